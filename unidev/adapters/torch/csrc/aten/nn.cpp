// nn.cpp — the network row kinds: mm/bmm/addmm, conv2d and its backward, max/avg/adaptive
// pooling, batch norm, softmax, nll and mse losses; shapes as torch computes them.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>

#include "aten.h"

namespace unidev_torch {
namespace {

template <int E>
Tensor& k_mm(const Tensor& a, const Tensor& b, Tensor& out) {
  int64_t nd = a.dim();
  TORCH_CHECK((nd == 2 || nd == 3) && b.dim() == nd, ROW, ": expected two ", nd, "-D tensors, got ",
              a.sizes(), " and ", b.sizes());
  TORCH_CHECK(a.size(-1) == b.size(-2) && (nd == 2 || a.size(0) == b.size(0)), ROW,
              ": shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), ROW, ": expected both of dtype ",
              a.scalar_type(), ", got ", b.scalar_type());
  if (!kernel(UD_OP_MATMUL, a.scalar_type())) return fallback(ROW, a, b, out), out;
  at::DimVector shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(b.size(-1));
  into(out, shape, {&a, &b}, [&](const Tensor& dst) {
    call(UD_OP_MATMUL, a.scalar_type(), {desc(a), desc(b)}, {desc(dst)}, Attrs(UD_OP_MATMUL),
         a.device().index());
  });
  return out;
}

template <int E>
Tensor& k_addmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), ROW, ": shapes ", a.sizes(),
              " and ", b.sizes(), " cannot be multiplied");
  bool ok = kernel(UD_OP_GEMM, a.scalar_type()) && b.scalar_type() == a.scalar_type() &&
            c.scalar_type() == a.scalar_type() && on_device(c);
  if (!ok) return fallback(ROW, c, a, b, beta, alpha, out), out;
  at::DimVector shape{a.size(0), b.size(1)};
  at::infer_size_dimvector(c.sizes(), shape);  // checks that c broadcasts
  into(out, shape, {&a, &b, &c}, [&](const Tensor& dst) {
    at::DimVector strides;
    UD_Tensor cd = beta.toDouble() == 0.0 ? absent() : bdesc(c, dst.sizes(), strides);
    call(UD_OP_GEMM, a.scalar_type(), {desc(a), desc(b), cd}, {desc(dst)},
         Attrs(UD_OP_GEMM).f(UD_ATTR_GEMM_ALPHA, alpha.toDouble()).f(UD_ATTR_GEMM_BETA, beta.toDouble()),
         a.device().index());
  });
  return out;
}

// unidev.torch.swap_conv2d's algorithms (forward, grad_x, grad_w; "" = the op's default), per
// thread: its autograd Function sets them around each call, and backward runs on autograd's own
// device thread.
thread_local std::string t_conv_algo[3];

int64_t conv_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

// torch CPU's convolutions (mkldnn, slow2d) compute channels-last when the input or the weight
// is: their results (y, grad_x, grad_w) get that format.
at::MemoryFormat conv_format(const Tensor& x, const Tensor& w) {
  bool cl = x.suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
            w.suggest_memory_format() == at::MemoryFormat::ChannelsLast;
  return cl ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

// conv2d (dir 0) and its backward ops (1: grad_x, 2: grad_w, whose first attribute is the
// result's shape) share stride, padding, dilation, groups and algorithm, in that order.
static_assert(UD_ATTR_CONV2D_STRIDE == 0 && UD_ATTR_CONV2D_ALGORITHM == 4 &&
              UD_ATTR_CONV2D_BACKWARD_INPUT_STRIDE == 1 &&
              UD_ATTR_CONV2D_BACKWARD_INPUT_ALGORITHM == 5 &&
              UD_ATTR_CONV2D_BACKWARD_WEIGHT_STRIDE == 1 &&
              UD_ATTR_CONV2D_BACKWARD_WEIGHT_ALGORITHM == 5);
Tensor conv_call(int dir, IntArrayRef shape, const Tensor& like, at::MemoryFormat fmt,
                 std::initializer_list<UD_Tensor> ins, const Tensor& x, IntArrayRef stride,
                 IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  static constexpr int kOps[3] = {UD_OP_CONV2D, UD_OP_CONV2D_BACKWARD_INPUT,
                                  UD_OP_CONV2D_BACKWARD_WEIGHT};
  Tensor y = at::empty(shape, like.options().memory_format(fmt));
  Attrs at(kOps[dir]);
  int k = dir == 0 ? 0 : 1;
  if (dir != 0) at.ints(0, y.sizes());
  at.ints(k, stride).ints(k + 1, padding).ints(k + 2, dilation).i(k + 3, groups);
  if (!t_conv_algo[dir].empty()) at.s(k + 4, t_conv_algo[dir].c_str());
  call(kOps[dir], x.scalar_type(), ins, {desc(y)}, at, x.device().index());
  return y;
}

bool conv_ok(const Tensor& x, bool transposed, IntArrayRef output_padding) {
  return !transposed && x.dim() == 4 && kernel(UD_OP_CONV2D, x.scalar_type()) &&
         kernel(UD_OP_CONV2D_BACKWARD_INPUT, x.scalar_type()) &&
         kernel(UD_OP_CONV2D_BACKWARD_WEIGHT, x.scalar_type());
}

template <int E>
Tensor k_conv(const Tensor& x, const Tensor& w, const OptTensor& bias, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, bool transposed, IntArrayRef opad,
              int64_t groups) {
  if (!conv_ok(x, transposed, opad) || stride.size() != 2 || padding.size() != 2) {
    note_fallback("convolution_overrideable");
    OptTensor b = bias.has_value() && bias->defined() ? OptTensor(bias->cpu()) : std::nullopt;
    return at::convolution(x.cpu(), w.cpu(), b, stride, padding, dilation, transposed, opad, groups)
        .to(x.device());
  }
  int64_t shape[4] = {x.size(0), w.size(0),
                      conv_out(x.size(2), w.size(2), stride[0], padding[0], dilation[0]),
                      conv_out(x.size(3), w.size(3), stride[1], padding[1], dilation[1])};
  return conv_call(0, shape, x, conv_format(x, w), {desc(x), desc(w), opt_desc(bias)}, x, stride,
                   padding, dilation, groups);
}

template <int E>
std::tuple<Tensor, Tensor, Tensor> k_conv_backward(
    const Tensor& gy, const Tensor& x, const Tensor& w, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, bool transposed, IntArrayRef opad, int64_t groups,
    std::array<bool, 3> mask) {
  if (!conv_ok(x, transposed, opad) || stride.size() != 2 || padding.size() != 2) {
    note_fallback("convolution_backward_overrideable");
    std::vector<int64_t> bias_sizes{w.size(transposed ? 1 : 0) * (transposed ? groups : 1)};
    auto [gx, gw, gb] = at::convolution_backward(gy.cpu(), x.cpu(), w.cpu(), bias_sizes, stride,
                                                 padding, dilation, transposed, opad, groups, mask);
    auto back = [&](const Tensor& t) { return t.defined() ? t.to(x.device()) : t; };
    return {back(gx), back(gw), back(gb)};
  }
  Tensor gx, gw, gb;
  at::MemoryFormat fmt = conv_format(x, w);
  if (mask[0])
    gx = conv_call(1, x.sizes(), x, fmt, {desc(gy), desc(w)}, x, stride, padding, dilation, groups);
  if (mask[1])
    gw = conv_call(2, w.sizes(), w, fmt, {desc(gy), desc(x)}, x, stride, padding, dilation, groups);
  if (mask[2]) gb = gy.sum(at::IntArrayRef{0, 2, 3});
  return {gx, gw, gb};
}

struct Pool {  // kernel_size, stride (filled from kernel_size), padding, dilation as pairs
  std::array<int64_t, 2> k, s, p, d;
  Pool(IntArrayRef ks, IntArrayRef st, IntArrayRef pad, IntArrayRef dil) {
    auto pair = [](IntArrayRef v, IntArrayRef dflt, std::array<int64_t, 2>& o) {
      if (v.empty()) v = dflt;
      o = {v[0], v.size() > 1 ? v[1] : v[0]};
    };
    pair(ks, ks, k);
    pair(st, ks, s);
    pair(pad, IntArrayRef{0}, p);
    pair(dil, IntArrayRef{1}, d);
  }
  static int64_t out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
    int64_t span = n + 2 * p - d * (k - 1) - 1;
    int64_t o = (span + (ceil ? s - 1 : 0)) / s + 1;
    if (ceil && (o - 1) * s >= n + p) --o;
    return o;
  }
  at::DimVector shape(const Tensor& x, bool ceil) const {
    return {x.size(0), x.size(1), out(x.size(2), k[0], s[0], p[0], d[0], ceil),
            out(x.size(3), k[1], s[1], p[1], d[1], ceil)};
  }
};

template <int E>
std::tuple<Tensor&, Tensor&> k_max_pool(const Tensor& x, IntArrayRef ks, IntArrayRef st,
                                        IntArrayRef pad, IntArrayRef dil, bool ceil, Tensor& out,
                                        Tensor& idx) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type())) {
    fallback(ROW, x, ks, st, pad, dil, ceil, out, idx);
    return {out, idx};
  }
  Pool pl(ks, st, pad, dil);
  auto shape = pl.shape(x, ceil);
  resize_to(out, shape, format_of(x));
  resize_to(idx, shape, format_of(x));
  at::assert_no_internal_overlap(out);
  at::assert_no_internal_overlap(idx);
  if (out.numel() > 0)
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(out), desc(idx)},
         Attrs(ROW_OP).ints(0, pl.k).ints(1, pl.s).ints(2, pl.p).ints(3, pl.d).b(4, ceil),
         x.device().index());
  return {out, idx};
}

template <int E>
Tensor& k_max_pool_backward(const Tensor& gy, const Tensor& x, IntArrayRef ks, IntArrayRef st,
                            IntArrayRef pad, IntArrayRef dil, bool ceil, const Tensor& idx,
                            Tensor& gx) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type()))
    return fallback(ROW, gy, x, ks, st, pad, dil, ceil, idx, gx), gx;
  Pool pl(ks, st, pad, dil);
  into(gx, x.sizes(), {&gy, &x}, [&](const Tensor& dst) {
    call(ROW_OP, x.scalar_type(), {desc(gy), desc(x), desc(idx)}, {desc(dst)},
         Attrs(ROW_OP).ints(0, pl.k).ints(1, pl.s).ints(2, pl.p).ints(3, pl.d).b(4, ceil),
         x.device().index());
  }, format_of(x));
  return gx;
}

template <int E>
Tensor& k_avg_pool(const Tensor& x, IntArrayRef ks, IntArrayRef st, IntArrayRef pad, bool ceil,
                   bool cip, std::optional<int64_t> divisor, Tensor& out) {
  if (x.dim() != 4 || divisor || !kernel(ROW_OP, x.scalar_type()))
    return fallback(ROW, x, ks, st, pad, ceil, cip, divisor, out), out;
  Pool pl(ks, st, pad, {});
  into(out, pl.shape(x, ceil), {&x}, [&](const Tensor& dst) {
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(dst)},
         Attrs(ROW_OP).ints(0, pl.k).ints(1, pl.s).ints(2, pl.p).b(3, ceil).b(4, cip),
         x.device().index());
  }, format_of(x));
  return out;
}

template <int E>
Tensor& k_avg_pool_backward(const Tensor& gy, const Tensor& x, IntArrayRef ks, IntArrayRef st,
                            IntArrayRef pad, bool ceil, bool cip, std::optional<int64_t> divisor,
                            Tensor& gx) {
  if (x.dim() != 4 || divisor || !kernel(ROW_OP, x.scalar_type()))
    return fallback(ROW, gy, x, ks, st, pad, ceil, cip, divisor, gx), gx;
  Pool pl(ks, st, pad, {});
  into(gx, x.sizes(), {&gy, &x}, [&](const Tensor& dst) {
    call(ROW_OP, x.scalar_type(), {desc(gy), desc(x)}, {desc(dst)},
         Attrs(ROW_OP).ints(0, pl.k).ints(1, pl.s).ints(2, pl.p).b(3, ceil).b(4, cip),
         x.device().index());
  }, format_of(x));
  return gx;
}

template <int E>
Tensor k_adaptive_pool(const Tensor& x, IntArrayRef size) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type())) return fallback(ROW, x, size)[0].toTensor();
  std::array<int64_t, 2> os{size[0], size.size() > 1 ? size[1] : size[0]};
  Tensor y = at::empty({x.size(0), x.size(1), os[0], os[1]}, x.options().memory_format(format_of(x)));
  if (y.numel() > 0)
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(y)}, Attrs(ROW_OP).ints(0, os), x.device().index());
  return y;
}

template <int E>
Tensor k_adaptive_pool_backward(const Tensor& gy, const Tensor& x) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type())) return fallback(ROW, gy, x)[0].toTensor();
  Tensor gx = at::empty(x.sizes(), x.options().memory_format(format_of(x)));
  if (gx.numel() > 0)
    call(ROW_OP, x.scalar_type(), {desc(gy), desc(x)}, {desc(gx)},
         Attrs(ROW_OP).ints(0, gy.sizes().slice(2)), x.device().index());
  return gx;
}

template <int E>
std::tuple<Tensor, Tensor, Tensor> k_batch_norm(const Tensor& x, const OptTensor& w,
                                                const OptTensor& b, const OptTensor& rm,
                                                const OptTensor& rv, bool training,
                                                double momentum, double eps) {
  if (x.dim() < 2 || !kernel(ROW_OP, x.scalar_type())) {
    auto st = fallback(ROW, x, w, b, rm, rv, training, momentum, eps);
    return {st[0].toTensor(), st[1].toTensor(), st[2].toTensor()};
  }
  Tensor y = at::empty(x.sizes(), x.options().memory_format(format_of(x)));
  Tensor mean = at::empty({x.size(1)}, x.options()), invstd = at::empty({x.size(1)}, x.options());
  call(ROW_OP, x.scalar_type(), {desc(x), opt_desc(w), opt_desc(b), opt_desc(rm), opt_desc(rv)},
       {desc(y), desc(mean), desc(invstd)},
       Attrs(ROW_OP).b(UD_ATTR_BATCH_NORM_TRAINING, training).f(UD_ATTR_BATCH_NORM_MOMENTUM, momentum)
           .f(UD_ATTR_BATCH_NORM_EPS, eps), x.device().index());
  // torch CPU returns empty save_mean/save_invstd in inference; callers check their shape
  if (!training) return {y, at::empty({0}, x.options()), at::empty({0}, x.options())};
  return {y, mean, invstd};
}

template <int E>
std::tuple<Tensor, Tensor, Tensor> k_batch_norm_backward(
    const Tensor& gy, const Tensor& x, const OptTensor& w, const OptTensor& rm, const OptTensor& rv,
    const OptTensor& sm, const OptTensor& si, bool train, double eps, std::array<bool, 3> mask) {
  if (x.dim() < 2 || !kernel(ROW_OP, x.scalar_type())) {
    auto st = fallback(ROW, gy, x, w, rm, rv, sm, si, train, eps, mask);
    return {st[0].toTensor(), st[1].toTensor(), st[2].toTensor()};
  }
  Tensor mean = train ? *sm : *rm;
  Tensor invstd = train ? *si : rv->add(eps).rsqrt();
  Tensor gx = at::empty(x.sizes(), x.options().memory_format(format_of(x)));
  Tensor gw = at::empty({x.size(1)}, x.options()), gb = at::empty({x.size(1)}, x.options());
  call(ROW_OP, x.scalar_type(), {desc(gy), desc(x), opt_desc(w), desc(mean), desc(invstd)},
       {desc(gx), desc(gw), desc(gb)}, Attrs(ROW_OP).b(0, train), x.device().index());
  return {mask[0] ? gx : Tensor(), mask[1] ? gw : Tensor(), mask[2] ? gb : Tensor()};
}

template <int E>
Tensor& k_softmax(const Tensor& x, int64_t dim, bool half_to_float, Tensor& out) {
  if (half_to_float || !kernel(ROW_OP, x.scalar_type()))
    return fallback(ROW, x, dim, half_to_float, out), out;
  int64_t axis = x.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, x.dim());
  into(out, x.sizes(), {&x}, [&](const Tensor& dst) {
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(dst)}, Attrs(ROW_OP).i(0, axis),
         x.device().index());
  });
  return out;
}

template <int E>
Tensor& k_softmax_backward(const Tensor& gy, const Tensor& y, int64_t dim, ScalarType in_type,
                           Tensor& out) {
  if (in_type != y.scalar_type() || !kernel(ROW_OP, y.scalar_type()))
    return fallback(ROW, gy, y, dim, in_type, out), out;
  int64_t axis = y.dim() == 0 ? 0 : at::maybe_wrap_dim(dim, y.dim());
  into(out, y.sizes(), {&gy, &y}, [&](const Tensor& dst) {
    call(ROW_OP, y.scalar_type(), {desc(gy), desc(y)}, {desc(dst)}, Attrs(ROW_OP).i(0, axis),
         y.device().index());
  });
  return out;
}

const char* reduction_name(int64_t r) { return r == 0 ? "none" : r == 1 ? "mean" : "sum"; }

template <int E>
std::tuple<Tensor&, Tensor&> k_nll_loss(const Tensor& x, const Tensor& target, const OptTensor& w,
                                        int64_t reduction, int64_t ignore, Tensor& out,
                                        Tensor& total) {
  if ((x.dim() != 1 && x.dim() != 2) || !kernel(ROW_OP, x.scalar_type())) {
    fallback(ROW, x, target, w, reduction, ignore, out, total);
    return {out, total};
  }
  at::native::resize_output(out, reduction == 0 ? target.sizes() : IntArrayRef{});
  at::native::resize_output(total, {});
  call(ROW_OP, x.scalar_type(), {desc(x), desc(target), opt_desc(w)}, {desc(out), desc(total)},
       Attrs(ROW_OP).s(0, reduction_name(reduction)).i(1, ignore), x.device().index());
  return {out, total};
}

template <int E>
Tensor& k_nll_loss_backward(const Tensor& gl, const Tensor& x, const Tensor& target,
                            const OptTensor& w, int64_t reduction, int64_t ignore,
                            const Tensor& total, Tensor& gx) {
  if ((x.dim() != 1 && x.dim() != 2) || !kernel(ROW_OP, x.scalar_type()))
    return fallback(ROW, gl, x, target, w, reduction, ignore, total, gx), gx;
  into(gx, x.sizes(), {&gl, &x}, [&](const Tensor& dst) {
    call(ROW_OP, x.scalar_type(), {desc(gl), desc(x), desc(target), opt_desc(w), desc(total)},
         {desc(dst)}, Attrs(ROW_OP).s(0, reduction_name(reduction)).i(1, ignore),
         x.device().index());
  });
  return gx;
}

template <int E>
Tensor& k_mse_loss(const Tensor& x, const Tensor& target, int64_t reduction, Tensor& out) {
  bool ok = kernel(ROW_OP, x.scalar_type()) && target.scalar_type() == x.scalar_type() &&
            at::infer_size_dimvector(x.sizes(), target.sizes()) == x.sizes();
  if (!ok) return fallback(ROW, x, target, reduction, out), out;
  check_out(out, {x, target});  // a TensorIterator op on the CPU
  into(out, reduction == 0 ? x.sizes() : IntArrayRef{}, {&x, &target}, [&](const Tensor& dst) {
    at::DimVector s;
    call(ROW_OP, x.scalar_type(), {desc(x), bdesc(target, x.sizes(), s)}, {desc(dst)},
         Attrs(ROW_OP).s(0, reduction_name(reduction)), x.device().index());
  });
  return out;
}

bool mse_backward(const Tensor& gl, const Tensor& x, const Tensor& target, int64_t reduction,
                  Tensor& gx) {
  bool ok = kernel(UD_OP_MSE_LOSS_BACKWARD, x.scalar_type()) &&
            target.scalar_type() == x.scalar_type() &&
            at::infer_size_dimvector(x.sizes(), target.sizes()) == x.sizes() &&
            (reduction == 0 ? gl.sizes() == x.sizes() : gl.dim() == 0);
  if (!ok) return false;
  into(gx, x.sizes(), {&gl, &x, &target}, [&](const Tensor& dst) {
    at::DimVector s;
    call(UD_OP_MSE_LOSS_BACKWARD, x.scalar_type(), {desc(gl), desc(x), bdesc(target, x.sizes(), s)},
         {desc(dst)}, Attrs(UD_OP_MSE_LOSS_BACKWARD).s(0, reduction_name(reduction)),
         x.device().index());
  });
  return true;
}

template <int E>
Tensor k_mse_loss_backward_fn(const Tensor& gl, const Tensor& x, const Tensor& target,
                              int64_t reduction) {
  Tensor gx = at::empty(x.sizes(), x.options());
  if (!mse_backward(gl, x, target, reduction, gx))
    return fallback(ROW, gl, x, target, reduction)[0].toTensor();
  return gx;
}

}  // namespace

void set_conv_algorithms(const std::string& fwd, const std::string& gx, const std::string& gw) {
  t_conv_algo[0] = fwd, t_conv_algo[1] = gx, t_conv_algo[2] = gw;
}

UD_TORCH_REGISTER(UD_TORCH_ROWS_NN)

}  // namespace unidev_torch
