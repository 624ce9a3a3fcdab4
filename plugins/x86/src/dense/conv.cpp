// conv.cpp — the three conv2d kernels: argument checks against the op set, the choice of
// algorithm, and the packing of strided views into the dense buffers the algorithms take.
//
// The `algorithm` attribute: "onednn", "direct", "im2col", "winograd" or "auto". What "auto"
// picks (from benchmarks/run.py on the ResNet-18 layers, batch 8):
//   float32 with oneDNN built in:
//     "winograd" for y and grad_w of 3x3 / stride 1 / dilation 1 layers with >= 32 channels per
//       group on both sides and >= 6000 output pixels (n * oh * ow) per thread: it needs 2.25x
//       fewer multiplies and measured 1.2-1.5x faster than oneDNN there, but its transforms
//       scale worse across threads (128x28x28 at 2 threads: 0.75x) and grad_x gained little;
//     "im2col" for grad_x when the input has fewer than 16 channels per group or the kernel is
//       1x1 with stride > 1: oneDNN's backward-data kernels measured 1.2-3x slower there;
//     "onednn" for everything else;
//   otherwise (float64, or a build without oneDNN such as arm64): "winograd" when it applies
//     and both per-group channel counts are >= 16; "direct" when a per-group GEMM would be thin
//     (c/groups * r * s < 16 or k/groups < 4, e.g. depthwise); "im2col" for the rest.
#include <memory>
#include <type_traits>

#include "conv_algos.h"
#include "dense.h"
#include "dense_common.h"
#include "x86.h"
#ifdef UD_DENSE_ONEDNN
#include "conv_onednn.h"
#endif

namespace ud_dense {
namespace {

#ifdef UD_DENSE_ONEDNN
constexpr bool kOneDNN = true;
#else
constexpr bool kOneDNN = false;
#endif

enum class Algo { automatic, onednn, direct, im2col, winograd };
const char* const kAlgoNames[] = {"auto", "onednn", "direct", "im2col", "winograd"};

struct ConvCall {
  const char* op;
  ConvDir dir;
  ConvShape p{};
  Algo algo = Algo::automatic;
  const UD_Tensor *in0 = nullptr, *in1 = nullptr, *bias = nullptr, *out = nullptr;
};

UD_Error* read_ints(const char* op, const UD_Attr& a, int64_t n, int64_t min, int64_t* v) {
  if (a.value.ints.len != n)
    return UD_INVALID("%s: attribute '%s' has %lld values, expected %lld", op, a.name,
                      (long long)a.value.ints.len, (long long)n);
  for (int64_t i = 0; i < n; i++) {
    v[i] = a.value.ints.data[i];
    if (v[i] < min)
      return UD_INVALID("%s: attribute '%s' has %lld at %lld, expected values >= %lld", op, a.name,
                        (long long)v[i], (long long)i, (long long)min);
  }
  return nullptr;
}

// Attributes from index `base`: stride, padding, dilation, groups, algorithm.
UD_Error* read_attrs(ConvCall* c, const UD_Attr* at) {
  ConvShape& p = c->p;
  int64_t* fields[3][2] = {{&p.sh, &p.sw}, {&p.ph, &p.pw}, {&p.dh, &p.dw}};
  for (int i = 0; i < 3; i++) {  // stride >= 1, padding >= 0, dilation >= 1
    int64_t v[2] = {0, 0};
    if (UD_Error* e = read_ints(c->op, at[i], 2, i == 1 ? 0 : 1, v)) return e;
    *fields[i][0] = v[0], *fields[i][1] = v[1];
  }
  p.g = at[3].value.i;
  if (p.g < 1)
    return UD_INVALID("%s: attribute 'groups' is %lld, expected >= 1", c->op, (long long)p.g);
  for (int i = 0; i < 5; i++)
    if (std::strcmp(at[4].value.s, kAlgoNames[i]) == 0) {
      c->algo = Algo(i);
      return nullptr;
    }
  return UD_INVALID(
      "%s: attribute 'algorithm' is '%s', expected one of auto, onednn, direct, "
      "im2col, winograd",
      c->op, at[4].value.s);
}

// Fills the problem from x's shape [n, c, h, w] and the weight's [k, c/g, r, s].
UD_Error* read_shape(const char* op, const int64_t* xs, const int64_t* ws, ConvShape* p) {
  p->n = xs[0], p->c = xs[1], p->h = xs[2], p->w = xs[3], p->k = ws[0], p->r = ws[2], p->s = ws[3];
  if (p->c % p->g || p->k % p->g || ws[1] != p->c / p->g)
    return UD_INVALID(
        "%s: x has %lld channels, weight is [%lld, %lld, ..], groups = %lld; "
        "expected channel counts divisible by groups and weight.shape[1] == %lld",
        op, (long long)p->c, (long long)p->k, (long long)ws[1], (long long)p->g,
        (long long)(p->c / p->g));
  const int64_t eh = p->h + 2 * p->ph - p->dh * (p->r - 1) - 1;
  const int64_t ew = p->w + 2 * p->pw - p->dw * (p->s - 1) - 1;
  if (p->r < 1 || p->s < 1 || eh < 0 || ew < 0)
    return UD_INVALID(
        "%s: kernel %lldx%lld (dilated %lldx%lld) is empty or larger than the padded "
        "input %lldx%lld",
        op, (long long)p->r, (long long)p->s, (long long)(p->dh * (p->r - 1) + 1),
        (long long)(p->dw * (p->s - 1) + 1), (long long)(p->h + 2 * p->ph),
        (long long)(p->w + 2 * p->pw));
  p->oh = eh / p->sh + 1, p->ow = ew / p->sw + 1;
  return nullptr;
}

UD_Error* expect_shape(const char* op, const char* arg, const UD_Tensor& t, const int64_t* want) {
  const int64_t* s = t.shape;
  if (s[0] != want[0] || s[1] != want[1] || s[2] != want[2] || s[3] != want[3])
    return UD_INVALID(
        "%s: '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, "
        "%lld]",
        op, arg, (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
        (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
  return nullptr;
}

Algo choose(const ConvCall& c, bool is_f32) {
  const ConvShape& p = c.p;
  if (kOneDNN && is_f32) {
    const int64_t pixels_per_thread = p.n * p.oh * p.ow / omp_get_max_threads();
    if (winograd_applies(p) && std::min(p.cg(), p.kg()) >= 32 && pixels_per_thread >= 6000 &&
        c.dir != ConvDir::backward_input)
      return Algo::winograd;
    const bool thin = p.cg() < 16 || (p.r == 1 && p.s == 1 && (p.sh > 1 || p.sw > 1));
    return c.dir == ConvDir::backward_input && thin ? Algo::im2col : Algo::onednn;
  }
  if (winograd_applies(p) && p.cg() >= 16 && p.kg() >= 16) return Algo::winograd;
  if (p.cg() * p.r * p.s < 16 || p.kg() < 4) return Algo::direct;
  return Algo::im2col;
}

UD_Error* check_algo(const ConvCall& c, bool is_f32) {
  const ConvShape& p = c.p;
  if (c.algo == Algo::winograd && !winograd_applies(p))
    return UD_INVALID(
        "%s: algorithm 'winograd' needs a 3x3 kernel, stride 1 and dilation 1; got "
        "%lldx%lld, stride [%lld, %lld], dilation [%lld, %lld]",
        c.op, (long long)p.r, (long long)p.s, (long long)p.sh, (long long)p.sw, (long long)p.dh,
        (long long)p.dw);
  if (c.algo == Algo::onednn && !(kOneDNN && is_f32))
    return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: algorithm 'onednn' %s", c.op,
                        kOneDNN ? "supports float32 only" : "is not built in");
  const int64_t lim = INT32_MAX;
  if (p.cg() * p.r * p.s > lim || p.n * p.oh * p.ow > lim || p.k > lim)
    return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: problem too large for 32-bit BLAS dims", c.op);
  return nullptr;
}

template <class T>
const T* dense_in(const UD_Tensor& t, std::unique_ptr<T[]>& buf) {
  if (ud_kit_is_contiguous(&t)) return data_ptr<T>(t);
  buf.reset(new T[ud_kit_numel(&t)]);
  pack(t, buf.get(), false);
  return buf.get();
}

template <class T>
void run(const ConvCall& c) {
  const UD_Tensor& out = *c.out;
  const int64_t n_out = ud_kit_numel(&out);
  if (n_out == 0) return;
  std::unique_ptr<T[]> b0, b1, bb, bo;
  const T* bias = c.bias ? dense_in<T>(*c.bias, bb) : nullptr;
  const bool out_dense = ud_kit_is_contiguous(&out);
  T* o = out_dense ? data_ptr<T>(out) : (bo.reset(new T[n_out]), bo.get());
  if (ud_kit_numel(c.in0) == 0 || ud_kit_numel(c.in1) == 0) {  // an empty sum: bias or zero
    const int64_t plane = n_out / (out.shape[0] * out.shape[1]);
    for (int64_t i = 0; i < n_out; i++) o[i] = bias ? bias[i / plane % out.shape[1]] : T(0);
  } else {
    const T* i0 = dense_in<T>(*c.in0, b0);
    const T* i1 = dense_in<T>(*c.in1, b1);
    if (c.algo == Algo::onednn) {
#ifdef UD_DENSE_ONEDNN
      if constexpr (std::is_same_v<T, float>) onednn_conv(c.dir, c.p, i0, i1, bias, o);
#endif
    } else {
      const ConvAlgo<T> a = c.algo == Algo::direct   ? conv_direct<T>()
                            : c.algo == Algo::im2col ? conv_im2col<T>()
                                                     : conv_winograd<T>();
      if (c.dir == ConvDir::forward) a.forward(c.p, i0, i1, bias, o);
      if (c.dir == ConvDir::backward_input) a.backward_input(c.p, i0, i1, o);
      if (c.dir == ConvDir::backward_weight) a.backward_weight(c.p, i0, i1, o);
    }
  }
  if (!out_dense) pack(out, bo.get(), true);
}

UD_Error* execute(ConvCall& c, const int64_t* out_shape) {
  const int64_t gy[4] = {c.p.n, c.p.k, c.p.oh, c.p.ow};
  const bool fwd = c.dir == ConvDir::forward;
  if (UD_Error* e = expect_shape(c.op, fwd ? "y" : "grad_y", fwd ? *c.out : *c.in0, gy)) return e;
  if (!fwd) {
    const char* name = c.dir == ConvDir::backward_input ? "grad_x" : "grad_w";
    if (UD_Error* e = expect_shape(c.op, name, *c.out, out_shape)) return e;
  }
  const bool f32 = c.in0->dtype.bits == 32;
  if (c.algo == Algo::automatic) c.algo = choose(c, f32);
  if (UD_Error* e = check_algo(c, f32)) return e;
  return by_dtype(c.op, c.in0->dtype, [&](auto t) { run<decltype(t)>(c); });
}

// Checks counts, attributes and tensors; `shape_attr` names the backwards' leading attribute.
UD_Error* read_call(ConvCall* c, const UD_KernelArgs* a, bool shape_attr, const char* name0,
                    const char* name1, const char* name_out, const int64_t** shape) {
  const char* types = shape_attr ? "nnnnis" : "nnnis";  // ints x3 (x4), int groups, str algorithm
  if (UD_Error* e = ud_x86_check_args(c->op, a, shape_attr ? 2 : 3, 1, types)) return e;
  c->in0 = &a->inputs[0], c->in1 = &a->inputs[1], c->out = &a->outputs[0];
  if (UD_Error* e = check_input(c->op, name0, *c->in0, 4, nullptr)) return e;
  if (UD_Error* e = check_input(c->op, name1, *c->in1, 4, &c->in0->dtype)) return e;
  if (UD_Error* e = check_input(c->op, name_out, *c->out, 4, &c->in0->dtype)) return e;
  if (!shape_attr) return read_attrs(c, a->attrs);
  int64_t tmp[4];
  if (UD_Error* e = read_ints(c->op, a->attrs[0], 4, 0, tmp)) return e;
  *shape = a->attrs[0].value.ints.data;
  return read_attrs(c, a->attrs + 1);
}

}  // namespace
}  // namespace ud_dense

using namespace ud_dense;

extern "C" UD_Error* ud_x86_conv2d(const UD_KernelArgs* args) {
  ConvCall c{"conv2d", ConvDir::forward};
  if (UD_Error* e = read_call(&c, args, false, "x", "weight", "y", nullptr)) return e;
  if (UD_Error* e = read_shape(c.op, c.in0->shape, c.in1->shape, &c.p)) return e;
  const UD_Tensor& b = args->inputs[2];
  if (ud_kit_present(&b)) {
    if (UD_Error* e = check_input(c.op, "bias", b, 1, &c.in0->dtype)) return e;
    if (b.shape[0] != c.p.k)
      return UD_INVALID("conv2d: 'bias' has %lld values, expected %lld", (long long)b.shape[0],
                        (long long)c.p.k);
    c.bias = &b;
  }
  return execute(c, nullptr);
}

extern "C" UD_Error* ud_x86_conv2d_backward_input(const UD_KernelArgs* args) {
  ConvCall c{"conv2d_backward_input", ConvDir::backward_input};
  const int64_t* xs = nullptr;
  if (UD_Error* e = read_call(&c, args, true, "grad_y", "weight", "grad_x", &xs)) return e;
  if (UD_Error* e = read_shape(c.op, xs, c.in1->shape, &c.p)) return e;
  return execute(c, xs);
}

extern "C" UD_Error* ud_x86_conv2d_backward_weight(const UD_KernelArgs* args) {
  ConvCall c{"conv2d_backward_weight", ConvDir::backward_weight};
  const int64_t* ws = nullptr;
  if (UD_Error* e = read_call(&c, args, true, "grad_y", "x", "grad_w", &ws)) return e;
  if (UD_Error* e = read_shape(c.op, c.in1->shape, ws, &c.p)) return e;
  return execute(c, ws);
}
