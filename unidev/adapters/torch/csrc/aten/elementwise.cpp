// elementwise.cpp — the elementwise row kinds (unary, binary with alpha, comparisons, scalar
// operands, where, addcmul, lerp, activation backwards): dtype promotion and output checks as
// torch CPU's, broadcasting by strides, CPU scalars as cached device scalars.
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/promote_types.h>
#include <ATen/ops/result_type.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <mutex>
#include <string_view>

#include "aten.h"

namespace unidev_torch {
namespace {

// Device copies of CPU scalars (wrapped numbers), kept for reuse: optimizers and `x * 0.5` send
// the same few constants every step, and each new one would cost an allocation and a launch.
// They bypass the caching allocator so that they never count as the user's memory.
Tensor scalar_on(const Tensor& t, ScalarType type, c10::Device dev) {
  using Key = std::tuple<c10::DeviceIndex, UD_Stream, ScalarType, double>;
  static std::mutex mu;
  static auto* cache = new std::map<Key, Tensor>();  // never destroyed: the plugin may be gone
  Scalar s = t.item();
  c10::DeviceIndex d = dev.index();
  Key key{d, current_stream(d), type, s.toDouble()};
  bool exact = (s.isFloatingPoint() && !std::isnan(s.toDouble())) || s.isBoolean() ||
               (s.isIntegral(false) && static_cast<int64_t>(s.toDouble()) == s.toLong());
  std::lock_guard<std::mutex> g(mu);
  if (exact) {
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  Tensor r;
  if (!exact || cache->size() >= 1024) {
    r = at::empty({}, at::TensorOptions().dtype(type).device(dev));
  } else {
    UD_Handle h = 0;
    check(plugin().api->mem_alloc(d, std::get<1>(key), 64, &h), "mem_alloc (scalar)");
    r = at::from_blob(reinterpret_cast<void*>(h), {}, [](void*) {},
                      at::TensorOptions().dtype(type).device(dev));
  }
  fill_value(r, s);
  if (exact && cache->size() < 1024) cache->emplace(key, r);
  return r;
}

MaybeOwned prepare(const Tensor& t, ScalarType type, c10::Device dev) {
  if (t.device() == dev)
    return t.scalar_type() == type ? MaybeOwned::borrowed(t) : MaybeOwned::owned(t.to(type));
  TORCH_CHECK(t.dim() == 0 && t.is_cpu(), "Expected all tensors to be on the same device, but "
              "found at least two devices, ", dev, " and ", t.device(), "!");
  return MaybeOwned::owned(scalar_on(t, type, dev));
}

// The strides torch's TensorIterator gives a new output of `shape`: dense, in the dimension
// order of the inputs (broadcast by strides; the first input that orders two dimensions decides,
// equal strides put the smaller dimension inside), so channels-last inputs give a channels-last
// result. False (contiguous) when every input is contiguous: the common, cheap case.
bool input_order(IntArrayRef shape, const c10::SmallVector<MaybeOwned, 4>& xs,
                 at::DimVector& strides) {
  int64_t nd = static_cast<int64_t>(shape.size());
  bool plain = true;
  for (const auto& x : xs) plain = plain && (x->dim() < 2 || x->is_contiguous());
  if (plain || nd < 2 || nd > 16) return false;
  int64_t st[4][16];
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& t = *xs[k];
    for (int64_t i = 0; i < nd; ++i) {
      int64_t j = i - (nd - t.dim());
      st[k][i] = (j < 0 || (t.size(j) == 1 && shape[i] != 1)) ? 0 : t.stride(j);
    }
  }
  auto should_swap = [&](int64_t d0, int64_t d1) {
    for (size_t k = 0; k < xs.size(); ++k) {
      int64_t s0 = st[k][d0], s1 = st[k][d1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 != s1) return s0 < s1 ? -1 : 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  int64_t perm[16];  // innermost first
  for (int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (int64_t i = 1; i < nd; ++i)
    for (int64_t d1 = i, d0 = i - 1; d0 >= 0; --d0) {
      int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) std::swap(perm[d0], perm[d1]), d1 = d0;
      else if (c < 0) break;
    }
  bool identity = true;
  for (int64_t i = 0; i < nd; ++i) identity = identity && perm[i] == nd - 1 - i;
  if (identity) return false;
  strides.resize(nd);
  int64_t s = 1;
  for (int64_t i = 0; i < nd; ++i) strides[perm[i]] = s, s *= std::max<int64_t>(shape[perm[i]], 1);
  return true;
}

}  // namespace

bool elementwise(int op, Tensor& out, ScalarType out_type, const Attrs& attrs,
                 std::initializer_list<Ref> ins, std::initializer_list<ScalarType> types) {
  UD_KernelFn fn = kernel(op, *types.begin());
  if (!fn) return false;
  bool fresh = !out.defined();
  if (!fresh) {
    check_cast(out_type, out);
    check_out(out, ins);
  }
  c10::Device dev = fresh ? device_of(ins) : out.device();
  c10::OptionalDeviceGuard guard;
  if (dev.index() != tls_device) guard.reset_device(dev);
  at::DimVector shape(ins.begin()->get().sizes());
  for (const Tensor& t : ins)
    if (t.sizes() != IntArrayRef(shape)) shape = at::infer_size_dimvector(shape, t.sizes());
  c10::SmallVector<MaybeOwned, 4> xs;
  auto ty = types.begin();
  for (const Tensor& t : ins) xs.push_back(prepare(t, *ty++, dev));
  at::DimVector order;
  bool permuted = (fresh || out.sizes() != IntArrayRef(shape)) && input_order(shape, xs, order);
  if (fresh) {
    c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
    out = permuted ? at::detail::empty_strided_generic(shape, order, allocator(), keys, out_type)
                   : at::detail::empty_generic(shape, allocator(), keys, out_type, std::nullopt);
  } else if (out.sizes() != IntArrayRef(shape)) {
    at::native::resize_output(out, shape);
    if (permuted) out.unsafeGetTensorImpl()->set_sizes_and_strides(shape, order);
  }
  bool temp = out.scalar_type() != out_type;
  for (const auto& x : xs) temp = temp || (!fresh && shares_storage(*x, out) && !same_view(*x, out));
  Tensor dst = temp ? at::empty_strided(shape, out.strides(), out.options().dtype(out_type)) : out;
  if (dst.numel() > 0) {
    std::array<at::DimVector, 4> strides;
    UD_Tensor d[4];
    for (size_t k = 0; k < xs.size(); ++k) d[k] = bdesc(*xs[k], dst.sizes(), strides[k]);
    UD_Tensor o = desc(dst);
    launch(fn, op, dev.index(), d, static_cast<int>(xs.size()), &o, 1, attrs);
  }
  if (temp) out.copy_(dst);
  return true;
}

namespace {

template <int E>
Tensor& k_unary(const Tensor& self, Tensor& out) {
  ScalarType t = ROW_OP == UD_OP_LOGICAL_NOT ? self.scalar_type() : out.scalar_type();
  TORCH_CHECK(ROW_OP == UD_OP_LOGICAL_NOT || t == self.scalar_type(), ROW, ": Found dtype ", t,
              " but expected ", self.scalar_type());
  if (!elementwise(ROW_OP, out, out.scalar_type(), Attrs(ROW_OP), {self}, {t}))
    fallback(ROW, self, out);
  return out;
}

// Unary ops that compute integers in the default float dtype (torch's unary float ops).
template <int E>
Tensor& k_unary_float(const Tensor& self, Tensor& out) {
  ScalarType in = self.scalar_type();
  check_cast(at::isIntegralType(in, true) ? c10::get_default_dtype_as_scalartype() : in, out);
  if (!elementwise(ROW_OP, out, out.scalar_type(), Attrs(ROW_OP), {self}, {out.scalar_type()}))
    fallback(ROW, self, out);
  return out;
}

template <int E>
Tensor k_unary_fn(const Tensor& self) {
  Tensor out;
  if (!elementwise(ROW_OP, out, self.scalar_type(), Attrs(ROW_OP), {self}, {self.scalar_type()}))
    return fallback(ROW, self)[0].toTensor();
  return out;
}

template <int E>
Tensor& k_unary_inplace(Tensor& self) {
  if (!elementwise(ROW_OP, self, self.scalar_type(), Attrs(ROW_OP), {self}, {self.scalar_type()}))
    fallback(ROW, self);
  return self;
}

const char* approx(c10::string_view s) { return s == "tanh" ? "tanh" : "none"; }

template <int E>
Tensor& k_gelu(const Tensor& self, c10::string_view a, Tensor& out) {
  if (!elementwise(ROW_OP, out, out.scalar_type(), Attrs(ROW_OP).s(0, approx(a)), {self},
                   {out.scalar_type()}))
    fallback(ROW, self, std::string(a), out);
  return out;
}

template <int E>
Tensor& k_gelu_backward(const Tensor& g, const Tensor& self, c10::string_view a, Tensor& out) {
  ScalarType t = at::result_type(g, self);
  if (!elementwise(ROW_OP, out, t, Attrs(ROW_OP).s(0, approx(a)), {g, self}, {t, t}))
    fallback(ROW, g, self, std::string(a), out);
  return out;
}

ScalarType compute_type(int op, const Tensor& a, const Tensor& b) {
  ScalarType t = a.scalar_type() == b.scalar_type() ? a.scalar_type() : at::result_type(a, b);
  if (op == UD_OP_DIV && at::isIntegralType(t, true)) t = c10::get_default_dtype_as_scalartype();
  return t;
}

ScalarType out_type(int op, ScalarType compute) {
  return (op >= UD_OP_EQ && op <= UD_OP_LOGICAL_OR) ? at::kBool : compute;
}

void check_inplace(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(at::infer_size_dimvector(self.sizes(), other.sizes()) == self.sizes(),
              "output with shape ", self.sizes(), " doesn't match the broadcast shape ",
              at::infer_size_dimvector(self.sizes(), other.sizes()));
}

// self `op` other (times alpha for add and sub) into `out`: allocated when undefined, `self` in
// the in-place forms. False when the plugin has no kernel for the dtype.
bool binary(int op, const Tensor& self, const Tensor& other, const Scalar* alpha, Tensor& out,
            bool inplace = false) {
  ScalarType t = compute_type(op, self, other);
  if (inplace) check_inplace(self, other);
  if (op == UD_OP_SUB) at::native::sub_check(self, other);
  Attrs attrs(op);
  if (alpha) {
    at::native::alpha_check(t, *alpha);
    attrs.f(0, alpha->toDouble());
  }
  return elementwise(op, out, out_type(op, t), attrs, {self, other}, {t, t});
}

template <int E>
Tensor& k_binary_alpha(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  if (!binary(ROW_OP, self, other, &alpha, out)) fallback(ROW, self, other, alpha, out);
  return out;
}

template <int E>
Tensor k_binary_alpha_fn(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  Tensor out;
  return binary(ROW_OP, self, other, &alpha, out) ? out : fallback(ROW, self, other, alpha)[0].toTensor();
}

template <int E>
Tensor& k_binary_alpha_inplace(Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (!binary(ROW_OP, self, other, &alpha, self, true)) fallback(ROW, self, other, alpha);
  return self;
}

template <int E>
Tensor& k_binary(const Tensor& self, const Tensor& other, Tensor& out) {
  if (!binary(ROW_OP, self, other, nullptr, out)) fallback(ROW, self, other, out);
  return out;
}

template <int E>
Tensor k_binary_fn(const Tensor& self, const Tensor& other) {
  Tensor out;
  return binary(ROW_OP, self, other, nullptr, out) ? out : fallback(ROW, self, other)[0].toTensor();
}

template <int E>
Tensor& k_binary_inplace(Tensor& self, const Tensor& other) {
  if (!binary(ROW_OP, self, other, nullptr, self, true)) fallback(ROW, self, other);
  return self;
}

template <int E>
Tensor& k_binary_bool(const Tensor& self, const Tensor& other, Tensor& out) {
  bool ok = self.scalar_type() == at::kBool && other.scalar_type() == at::kBool &&
            elementwise(ROW_OP, out, at::kBool, Attrs(ROW_OP), {self, other}, {at::kBool, at::kBool});
  if (!ok) fallback(ROW, self, other, out);
  return out;
}

// x ** c for the exponents torch itself specializes: one unary op instead of a broadcast pow.
int pow_as_unary(const Scalar& e) {
  if (e.isComplex() || e.isBoolean()) return -1;
  double v = e.toDouble();
  return v == 2.0 ? UD_OP_SQUARE : v == 0.5 ? UD_OP_SQRT : v == -1.0 ? UD_OP_RECIPROCAL
       : v == -0.5 ? UD_OP_RSQRT : v == 1.0 ? UD_OP_COPY : -1;
}

template <int E>
Tensor& k_binary_scalar(const Tensor& self, const Scalar& other, Tensor& out) {
  check_cast(out_type(ROW_OP, at::result_type(self, other)), out);
  int unary = ROW_OP == UD_OP_POW && self.is_floating_point() ? pow_as_unary(other) : -1;
  if (unary >= 0 && elementwise(unary, out, out.scalar_type(), Attrs(unary), {self},
                                {out.scalar_type()}))
    return out;
  Tensor o = at::scalar_to_tensor(other);
  o.unsafeGetTensorImpl()->set_wrapped_number(true);
  if (!binary(ROW_OP, self, o, nullptr, out)) fallback(ROW, self, other, out);
  return out;
}

template <int E>
Tensor k_where_fn(const Tensor& cond, const Tensor& self, const Tensor& other) {
  ScalarType t = at::result_type(self, other);
  Tensor out;
  if (!elementwise(ROW_OP, out, t, Attrs(ROW_OP), {self, other, cond}, {t, t, at::kBool}))
    return fallback(ROW, cond, self, other)[0].toTensor();
  return out;
}

template <int E>
Tensor& k_ternary_value(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& value,
                        Tensor& out) {
  ScalarType t = at::promote_types(at::result_type(self, a), at::result_type(self, b));
  if (!elementwise(ROW_OP, out, t, Attrs(ROW_OP).f(0, value.toDouble()), {self, a, b}, {t, t, t}))
    fallback(ROW, self, a, b, value, out);
  return out;
}

template <int E>
Tensor& k_lerp(const Tensor& self, const Tensor& end, const Scalar& w, Tensor& out) {
  ScalarType t = at::result_type(self, end);
  if (!elementwise(ROW_OP, out, t, Attrs(ROW_OP).f(0, w.toDouble()), {self, end}, {t, t}))
    fallback(ROW, self, end, w, out);
  return out;
}

template <int E>
Tensor& k_threshold_backward(const Tensor& g, const Tensor& self, const Scalar& th, Tensor& out) {
  ScalarType t = at::result_type(g, self);
  if (!elementwise(ROW_OP, out, t, Attrs(ROW_OP).f(0, th.toDouble()), {g, self}, {t, t}))
    fallback(ROW, g, self, th, out);
  return out;
}

// tier 3: torch's scalars are the op set's attributes (clamp_max's bound is attribute 1)
bool act(int op, Tensor& out, const Attrs& at, const Tensor& x) {
  return elementwise(op, out, out.scalar_type(), at, {x}, {out.scalar_type()});
}

template <int E>
Tensor& k_unary_scalar(const Tensor& self, const Scalar& s, Tensor& out) {
  int k = std::string_view(ROW).rfind("clamp_max", 0) == 0;
  if (!act(ROW_OP, out, Attrs(ROW_OP).f(k, s.toDouble()), self)) fallback(ROW, self, s, out);
  return out;
}

template <int E>
Tensor& k_clamp(const Tensor& self, const std::optional<Scalar>& lo,
                const std::optional<Scalar>& hi, Tensor& out) {
  Attrs at(ROW_OP);
  if (lo) at.f(0, lo->toDouble());
  if (hi) at.f(1, hi->toDouble());
  if (!act(ROW_OP, out, at, self)) fallback(ROW, self, lo, hi, out);
  return out;
}

template <int E>
Tensor& k_softplus(const Tensor& self, const Scalar& b, const Scalar& th, Tensor& out) {
  if (!act(ROW_OP, out, Attrs(ROW_OP).f(0, b.toDouble()).f(1, th.toDouble()), self))
    fallback(ROW, self, b, th, out);
  return out;
}

template <int E>
Tensor k_isnan_fn(const Tensor& self) {  // torch's isnan has no out form
  Tensor out;
  if (!elementwise(ROW_OP, out, at::kBool, Attrs(ROW_OP), {self}, {self.scalar_type()}))
    return fallback(ROW, self)[0].toTensor();
  return out;
}

// (grad, x) backwards with scalar attributes: the compute dtype is theirs, as torch's
bool act_grad(int op, Tensor& out, const Attrs& at, const Tensor& g, const Tensor& x) {
  ScalarType t = at::result_type(g, x);
  return elementwise(op, out, t, at, {g, x}, {t, t});
}

template <int E>
Tensor& k_softplus_backward(const Tensor& g, const Tensor& x, const Scalar& b, const Scalar& th,
                            Tensor& out) {
  if (!act_grad(ROW_OP, out, Attrs(ROW_OP).f(0, b.toDouble()).f(1, th.toDouble()), g, x))
    fallback(ROW, g, x, b, th, out);
  return out;
}

template <int E>
Tensor& k_leaky_relu_backward(const Tensor& g, const Tensor& x, const Scalar& s, bool r,
                              Tensor& out) {  // r (x is the result) changes nothing: s > 0 there
  if (!act_grad(ROW_OP, out, Attrs(ROW_OP).f(0, s.toDouble()), g, x))
    fallback(ROW, g, x, s, r, out);
  return out;
}

Attrs elu_attrs(int op, const Scalar& a, const Scalar& s, const Scalar& i) {
  return Attrs(op).f(0, a.toDouble()).f(1, s.toDouble()).f(2, i.toDouble());
}

template <int E>
Tensor& k_elu(const Tensor& x, const Scalar& a, const Scalar& s, const Scalar& i, Tensor& out) {
  if (!act(ROW_OP, out, elu_attrs(ROW_OP, a, s, i), x)) fallback(ROW, x, a, s, i, out);
  return out;
}

template <int E>
Tensor& k_elu_backward(const Tensor& g, const Scalar& a, const Scalar& s, const Scalar& i, bool r,
                       const Tensor& x, Tensor& out) {
  if (!act_grad(ROW_OP, out, elu_attrs(ROW_OP, a, s, i).b(3, r), g, x))
    fallback(ROW, g, a, s, i, r, x, out);
  return out;
}

}  // namespace

UD_TORCH_REGISTER(UD_TORCH_ROWS_ELEMENTWISE)

}  // namespace unidev_torch
