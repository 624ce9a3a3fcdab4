// copy.cpp — moving and filling bytes: copies between the device and anything (torch's
// conjugate and negative bits applied on the host), item(), fill_/zero_, arange, cat and
// constant_pad_nd.
#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>

#include "aten.h"

namespace unidev_torch {
namespace {

uint64_t first_byte(const Tensor& t) { return t.storage_offset() * t.element_size(); }

// Raw copies of `n` bytes (default: t's elements, dense) at `t`'s first element; the stream is
// drained before returning because the host buffer may be reused (or read) as soon as we return.
void h2d(const Tensor& t, const void* src, uint64_t n) {
  c10::DeviceIndex dev = t.device().index();
  check(plugin().api->memcpy_h2d(current_stream(dev), handle_of(t) + first_byte(t), src, n),
        "memcpy_h2d");
  synchronize_stream(dev);
}

void d2h(const Tensor& t, void* dst, uint64_t n = 0) {
  c10::DeviceIndex dev = t.device().index();
  check(plugin().api->memcpy_d2h(current_stream(dev), dst, handle_of(t) + first_byte(t),
                                 n ? n : t.nbytes()), "memcpy_d2h");
  synchronize_stream(dev);
}

// The bytes of storage a strided view spans, copied to the host, and the same view onto them:
// strided copies of dtypes the plugin has no copy kernel for go through this.
std::pair<Tensor, Tensor> span_to_host(const Tensor& t) {
  uint64_t end = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size(),
                                                  t.storage_offset());
  Tensor bytes = at::empty({static_cast<int64_t>(end - first_byte(t))}, at::kByte);
  d2h(t, bytes.data_ptr(), bytes.numel());
  Tensor view = at::from_blob(bytes.data_ptr(), t.sizes(), t.strides(), [bytes](void*) {},
                              t.options().device(at::kCPU));
  return {view, bytes};
}

// Same-device copy of `src` (broadcast) into `dst`, casting when the dtypes differ.
void device_copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  bool same = src.scalar_type() == dst.scalar_type();
  if (same && src.sizes() == dst.sizes() && src.is_contiguous() && dst.is_contiguous()) {
    if (handle_of(src) == handle_of(dst) && src.storage_offset() == dst.storage_offset()) return;
    check(plugin().api->memcpy_d2d(current_stream(dst.device().index()), handle_of(dst) +
                                   first_byte(dst), handle_of(src) + first_byte(src), dst.nbytes()),
          "memcpy_d2d");
    return;
  }
  int op = same ? UD_OP_COPY : UD_OP_CAST;
  UD_KernelFn fn = kernel(op, src.scalar_type());
  // a plugin casts between the dtypes it claims cast for (x86 and aurora: not to uint8/16-bit)
  if (!fn || (!same && !kernel(UD_OP_CAST, dst.scalar_type()))) {
    note_fallback(same ? "copy_" : "copy_ (cast)");
    dst.copy_(src.cpu());
    return;
  }
  Tensor s = shares_storage(src, dst) ? src.clone() : src;
  at::DimVector strides;
  UD_Tensor in = bdesc(s, dst.sizes(), strides), out = desc(dst);
  Attrs attrs(op);
  if (!same) attrs.s(UD_ATTR_CAST_DTYPE, ud_dtype_id_name(dtype_index(dst.scalar_type())));
  launch(fn, op, dst.device().index(), &in, 1, &out, 1, attrs);
}

// The same view with torch's conjugate and negative bits cleared: the elements as stored. Copies
// move stored elements and apply the bits on the host. Resolving them on the device would run
// conj_physical through the CPU fallback, whose copies come back here with the bits still set
// (torch's math-bit fallback re-enters _copy_from: the stack overflowed).
Tensor stored(const Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) return t;
  Tensor r = t.alias();
  r._set_conj(false);
  r._set_neg(false);
  return r;
}

// The values of device tensor `t` on the host (a CPU tensor carrying t's bits).
Tensor to_host(const Tensor& t) {
  const c10::DeviceGuard guard(t.device());
  Tensor s = stored(t), h;
  if (!s.is_contiguous() && s.is_non_overlapping_and_dense()) {
    // channels-last and other dense layouts: one raw transfer into a host tensor of that layout
    h = at::empty_strided(s.sizes(), s.strides(), s.options().device(at::kCPU));
    d2h(s, h.data_ptr());
  } else if (s.is_contiguous() || kernel(UD_OP_COPY, s.scalar_type())) {
    Tensor c = s.contiguous();
    h = at::empty(c.sizes(), c.options().device(at::kCPU));
    d2h(c, h.data_ptr());
  } else {
    h = span_to_host(s).first;
  }
  if (t.is_conj()) h = h.conj();
  return t.is_neg() ? at::_neg_view(h) : h;
}

// Stores host tensor `h` (broadcast to dst's shape, cast to its dtype) into device tensor `dst`
// so that dst, read with its bits, gives h's values.
void from_host(const Tensor& h_in, const Tensor& dst) {
  const c10::DeviceGuard guard(dst.device());
  Tensor h = h_in.to(dst.scalar_type()).expand(dst.sizes());
  if (dst.is_neg()) h = h.neg();
  if (dst.is_conj()) h = h.conj();
  h = h.resolve_conj().resolve_neg();
  Tensor d = stored(dst);
  uint64_t n = h.numel() * h.element_size();
  if (!d.is_contiguous() && d.is_non_overlapping_and_dense()) {
    // channels-last and other dense layouts: staged on the host in d's strides, one transfer
    if (h.strides() != d.strides())
      h = at::empty_strided(d.sizes(), d.strides(), h.options()).copy_(h);
    return h2d(d, h.data_ptr(), n);
  }
  h = h.contiguous();
  if (d.is_contiguous()) {
    h2d(d, h.data_ptr(), n);
  } else if (kernel(UD_OP_COPY, d.scalar_type())) {
    Tensor tmp = at::empty(d.sizes(), d.options());
    h2d(tmp, h.data_ptr(), n);
    device_copy(tmp, d);
  } else {  // read, modify and write back the span of the view
    auto [view, bytes] = span_to_host(d);
    view.copy_(h);
    h2d(d, bytes.data_ptr(), bytes.numel());
  }
}

// Every copy between the device and anything: torch's copy_ hands PrivateUse1 copies here before
// its own checks, so this checks what CPU copy_ does (broadcast, no element written twice, no
// partial overlap).
Tensor copy_from(const Tensor& src, const Tensor& dst, bool) {
  if (src.sizes() != dst.sizes()) {
    at::DimVector shape = at::infer_size_dimvector(dst.sizes(), src.sizes());
    TORCH_CHECK(IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
                " doesn't match the broadcast shape ", IntArrayRef(shape));
  }
  if (dst.numel() == 0) return dst;
  bool s_dev = on_device(src), d_dev = on_device(dst);
  bool same_bits = src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
  if (d_dev) at::assert_no_internal_overlap(dst);
  if (s_dev && d_dev && src.device() == dst.device() && same_bits) {
    at::assert_no_partial_overlap(dst, src);
    const c10::DeviceGuard guard(dst.device());
    device_copy(stored(src), stored(dst));
  } else if (d_dev) {  // from the host, from another device, or resolving bits: via the host
    from_host(s_dev ? to_host(src) : src, dst);
  } else if (same_bits && !src.is_conj() && !src.is_neg() && dst.scalar_type() == src.scalar_type() &&
             dst.sizes() == src.sizes() &&
             ((src.is_contiguous() && dst.is_contiguous()) ||
              (src.strides() == dst.strides() && src.is_non_overlapping_and_dense()))) {
    const c10::DeviceGuard guard(src.device());
    d2h(src, dst.data_ptr());
  } else {
    dst.copy_(to_host(src));
  }
  return dst;
}

Tensor copy_from_and_resize(const Tensor& src, const Tensor& dst) {
  at::native::resize_output(dst, src.sizes());
  return copy_from(src, dst, false);
}

Scalar local_scalar_dense(const Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  Tensor h = at::empty({}, self.options().device(at::kCPU));
  d2h(self, h.data_ptr(), self.element_size());
  if (self.is_conj()) h = h.conj();
  return (self.is_neg() ? at::_neg_view(h) : h).item();
}

template <int E>
Tensor& k_cat(const at::ITensorListRef& list, int64_t dim, Tensor& out) {
  std::vector<Tensor> all, ts;
  for (const Tensor& t : list) all.push_back(t);
  for (const Tensor& t : all)
    if (!(t.dim() == 1 && t.numel() == 0)) ts.push_back(t);  // legacy empty tensors are skipped
  bool ok = !ts.empty() && ts[0].dim() > 0 && kernel(ROW_OP, ts[0].scalar_type());
  for (const Tensor& t : ts)
    ok = ok && on_device(t) && t.scalar_type() == ts[0].scalar_type() && t.dim() == ts[0].dim();
  if (!ok) return fallback(ROW, all, dim, out), out;
  int64_t axis = at::maybe_wrap_dim(dim, ts[0].dim());
  at::DimVector shape(ts[0].sizes().begin(), ts[0].sizes().end());
  shape[axis] = 0;
  std::vector<UD_Tensor> ds;  // the plugin checks that the other dims agree
  TORCH_CHECK_TYPE(at::canCast(ts[0].scalar_type(), out.scalar_type()), "torch.cat(): input "
                   "types can't be cast to the desired output type ", out.scalar_type());
  bool temp = out.scalar_type() != ts[0].scalar_type();
  for (const Tensor& t : ts) {
    shape[axis] += t.size(axis);
    ds.push_back(desc(t));
    temp = temp || shares_storage(t, out);
  }
  at::native::resize_output(out, shape);
  at::assert_no_internal_overlap(out);
  for (const Tensor& t : ts) at::assert_no_partial_overlap(out, t);
  Tensor dst = temp ? at::empty(shape, ts[0].options()) : out;
  UD_Tensor o = desc(dst);
  if (dst.numel() > 0)
    launch(kernel(ROW_OP, ts[0].scalar_type()), ROW_OP, dst.device().index(), ds.data(),
           static_cast<int>(ds.size()), &o, 1, Attrs(ROW_OP).i(0, axis));
  if (temp) out.copy_(dst);
  return out;
}

template <int E>
Tensor k_pad(const Tensor& x, IntArrayRef pad, const Scalar& value) {
  bool ok = kernel(ROW_OP, x.scalar_type()) && pad.size() % 2 == 0 &&
            static_cast<int64_t>(pad.size()) / 2 <= x.dim();
  for (int64_t p : pad) ok = ok && p >= 0;
  if (!ok) return fallback(ROW, x, pad, value)[0].toTensor();
  int64_t nd = x.dim();
  std::vector<int64_t> pads(2 * nd, 0);
  at::DimVector shape(x.sizes().begin(), x.sizes().end());
  for (size_t k = 0; k < pad.size() / 2; ++k) {  // torch lists (before, after) from the last dim
    int64_t d = nd - 1 - static_cast<int64_t>(k);
    pads[2 * d] = pad[2 * k];
    pads[2 * d + 1] = pad[2 * k + 1];
    shape[d] += pad[2 * k] + pad[2 * k + 1];
  }
  // torch CPU's constant_pad_nd keeps the input's memory format
  Tensor y = at::empty(shape, x.options().memory_format(x.suggest_memory_format()));
  if (y.numel() > 0)
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(y)},
         Attrs(ROW_OP).ints(0, pads).f(1, value.toDouble()), x.device().index());
  return y;
}

template <int E>
Tensor& k_arange(const Scalar& start, const Scalar& end, const Scalar& step, Tensor& out) {
  double a = start.toDouble(), b = end.toDouble(), s = step.toDouble();
  UD_KernelFn fn = kernel(ROW_OP, out.scalar_type());
  if (!fn || s == 0 || !std::isfinite(a) || !std::isfinite(b) || !std::isfinite(s))
    return fallback(ROW, start, end, step, out), out;
  at::native::resize_output(out, {std::max<int64_t>(0, std::ceil((b - a) / s))});
  at::assert_no_internal_overlap(out);
  UD_Tensor o = desc(out);
  if (out.numel() > 0)
    launch(fn, ROW_OP, out.device().index(), nullptr, 0, &o, 1, Attrs(ROW_OP).f(0, a).f(1, b)
           .f(2, s).s(3, ud_dtype_id_name(dtype_index(out.scalar_type()))));
  return out;
}

template <int E>
Tensor& k_fill(Tensor& self, const Scalar& v) {  // any dtype: fill_value falls back by itself
  fill_value(self, v);
  return self;
}

template <int E>
Tensor& k_zero(Tensor& self) {
  UD_KernelFn fn = kernel(UD_OP_ZERO, self.scalar_type());
  if (!fn) return fill_value(self, 0), self;
  UD_Tensor o = desc(self);
  if (self.numel() > 0) launch(fn, UD_OP_ZERO, self.device().index(), nullptr, 0, &o, 1, Attrs(UD_OP_ZERO));
  return self;
}

}  // namespace

void fill_value(const Tensor& t, const Scalar& v) {
  if (t.numel() == 0) return;
  bool exact = !at::isIntegralType(t.scalar_type(), false) ||
               static_cast<int64_t>(v.toDouble()) == v.toLong();  // fill's value is a double
  UD_KernelFn fn = exact ? kernel(UD_OP_FILL, t.scalar_type()) : nullptr;
  if (fn) {
    UD_Tensor o = desc(t);
    launch(fn, UD_OP_FILL, t.device().index(), nullptr, 0, &o, 1,
           Attrs(UD_OP_FILL).f(UD_ATTR_FILL_VALUE, v.toDouble()));
    return;
  }
  note_fallback("fill_.Scalar");  // through the view's span: torch fills expanded views too
  const c10::DeviceGuard guard(t.device());
  auto [view, bytes] = span_to_host(t);
  view.fill_(v);
  h2d(t, bytes.data_ptr(), bytes.numel());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}
UD_TORCH_REGISTER(UD_TORCH_ROWS_COPY)

// copy_from applies conjugate and negative bits itself (see stored()); torch's math-bit fallback
// would resolve them with a device copy, which is a _copy_from again.
#define UD_TORCH_COPY_FALLTHROUGH(KEY)                                      \
  TORCH_LIBRARY_IMPL(aten, KEY, m) {                                        \
    m.impl("_copy_from", torch::CppFunction::makeFallthrough());            \
    m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough()); \
  }
UD_TORCH_COPY_FALLTHROUGH(Conjugate)
UD_TORCH_COPY_FALLTHROUGH(Negative)

}  // namespace unidev_torch
