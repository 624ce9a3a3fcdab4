// ops.cpp — the aten kernels of the PrivateUse1 backend: creation, views and copies; one kernel
// template per row kind of the aten → unidev table (op_table.h, generated from _optable.py); and
// the boxed CPU fallback, counted per operator, for every aten op the table does not serve.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>

#include "unidev_torch.h"

namespace unidev_torch {
namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
using OptTensor = std::optional<Tensor>;
// Inputs by reference: copying a Tensor that Python holds costs a refcount round trip on its
// PyObject under the GIL, as much as the rest of a small kernel call.
using Ref = std::reference_wrapper<const Tensor>;
using MaybeOwned = c10::MaybeOwned<Tensor>;
constexpr auto kPU1 = c10::DeviceType::PrivateUse1;

std::atomic<int> g_mode{0};  // 0: count, 1: warn once per op, 2: raise

// ---------------------------------------------------------------------------------------------
// CPU fallback
// ---------------------------------------------------------------------------------------------
void note_fallback(const std::string& op) {
  int64_t n = count_fallback(op);
  const std::string& dev = loaded() ? plugin().torch_name : std::string("PrivateUse1");
  TORCH_CHECK_NOT_IMPLEMENTED(g_mode != 2, "unidev ", dev, ": ", op,
                              " has no device kernel and UNIDEV_FALLBACK=error forbids running "
                              "it on the CPU");
  if (g_mode == 1 && n == 1) TORCH_WARN("unidev ", dev, ": ", op, " runs on the CPU (fallback)");
}

// A view op's result shares its input's storage; run on the host it would be a copy, and writes
// through it would be lost. Views torch serves on every backend never get here; the others with
// a generic kernel are registered below; the rest (sparse, nested) are refused.
bool returns_view(const c10::FunctionSchema& s) {
  for (const auto& r : s.returns())
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  return false;
}

// On the host the arguments are separate copies, so the CPU kernel cannot see that an output
// repeats elements or overlaps an input: check what torch's kernels check (TensorIterator's).
void check_written(const c10::FunctionSchema& s, const torch::jit::Stack& stack) {
  size_t n = s.arguments().size(), base = stack.size() - n;
  for (size_t i = 0; i < n; ++i) {
    const auto* alias = s.arguments()[i].alias_info();
    const c10::IValue& w = stack[base + i];
    if (!alias || !alias->isWrite() || !w.isTensor() || !w.toTensor().defined() ||
        w.toTensor().device().type() != kPU1)
      continue;
    const Tensor& out = w.toTensor();
    at::assert_no_internal_overlap(out);
    for (size_t j = 0; j < n; ++j)
      if (j != i && stack[base + j].isTensor() && stack[base + j].toTensor().defined())
        at::assert_no_partial_overlap(out, stack[base + j].toTensor());
  }
}

void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(!returns_view(op.schema()), "unidev ",
                              loaded() ? plugin().torch_name : std::string("PrivateUse1"), ": ",
                              full, " is a view op without a device kernel; on the CPU it would "
                              "return a copy and writes through it would be lost");
  check_written(op.schema(), *stack);
  note_fallback(full);
  at::native::cpu_fallback(op, stack);
}

c10::OperatorHandle op_handle(const std::string& aten) {  // "add.out" -> aten::add, "out"
  auto dot = std::min(aten.find('.'), aten.size());
  std::string overload = dot < aten.size() ? aten.substr(dot + 1) : "";
  return c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + aten.substr(0, dot)).c_str(),
                                                        overload.c_str());
}

// Runs aten op `aten` through the CPU fallback from inside a device kernel; returns the stack.
template <class... Args>
torch::jit::Stack fallback(const char* aten, Args&&... args) {
  torch::jit::Stack st;
  st.reserve(sizeof...(Args));
  (st.emplace_back(std::forward<Args>(args)), ...);
  boxed_fallback(op_handle(aten), &st);
  return st;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------
bool on_device(const Tensor& t) { return t.defined() && t.device().type() == kPU1; }

c10::Device device_of(std::initializer_list<Ref> ts) {
  for (const Tensor& t : ts)
    if (on_device(t)) return t.device();
  TORCH_CHECK(false, "unidev: no tensor of this op is on the device");
}

UD_Tensor bdesc(const Tensor& t, IntArrayRef shape, at::DimVector& strides) {
  UD_Tensor d = desc(t);
  if (t.sizes() == shape) return d;
  int64_t nd = static_cast<int64_t>(shape.size()), off = nd - t.dim();
  strides.resize(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t j = i - off;
    strides[i] = (j < 0 || (t.size(j) == 1 && shape[i] != 1)) ? 0 : t.stride(j);
  }
  d.ndim = static_cast<int32_t>(nd);
  d.shape = shape.data();
  d.strides = strides.data();
  return d;
}

UD_Tensor opt_desc(const OptTensor& t) {
  return t.has_value() && t->defined() ? desc(*t) : absent();
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage().is_alias_of(b.storage());
}
bool same_view(const Tensor& a, const Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
}

// torch CPU's checks (TensorIterator's) on an output the caller passed: no element of it may be
// written twice, and no input may overlap it partially; a full overlap in another layout is
// computed through a temporary. A few cached flags unless out and an input share storage.
void check_out(const Tensor& out, std::initializer_list<Ref> ins) {
  at::assert_no_internal_overlap(out);
  for (const Tensor& t : ins)
    if (t.defined()) at::assert_no_partial_overlap(out, t);
}

void check_cast(ScalarType result, const Tensor& out) {
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
}

void check_dtype(ScalarType want, const Tensor& out) {  // ops whose out must have their dtype
  TORCH_CHECK(out.scalar_type() == want, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(want).name(), ", but got ", out.dtype().name(),
              " instead");
}

// Raw copies of `n` bytes at byte `offset` of `t`'s storage; the stream is drained before
// returning because the host buffer may be reused (or read) as soon as we return.
void h2d(const Tensor& t, uint64_t offset, const void* src, uint64_t n) {
  c10::DeviceIndex dev = t.device().index();
  check(plugin().api->memcpy_h2d(current_stream(dev), handle_of(t) + offset, src, n), "memcpy_h2d");
  synchronize_stream(dev);
}

void d2h(const Tensor& t, uint64_t offset, void* dst, uint64_t n) {
  c10::DeviceIndex dev = t.device().index();
  check(plugin().api->memcpy_d2h(current_stream(dev), dst, handle_of(t) + offset, n), "memcpy_d2h");
  synchronize_stream(dev);
}

uint64_t first_byte(const Tensor& t) { return t.storage_offset() * t.element_size(); }

// The bytes of storage a strided view spans, copied to the host, and the same view onto them:
// strided copies of dtypes the plugin has no copy kernel for go through this.
std::pair<Tensor, Tensor> span_to_host(const Tensor& t) {
  uint64_t end = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size(),
                                                  t.storage_offset());
  Tensor bytes = at::empty({static_cast<int64_t>(end - first_byte(t))}, at::kByte);
  d2h(t, first_byte(t), bytes.data_ptr(), bytes.numel());
  Tensor view = at::from_blob(bytes.data_ptr(), t.sizes(), t.strides(), [bytes](void*) {},
                              t.options().device(at::kCPU));
  return {view, bytes};
}

void fill_value(const Tensor& t, const Scalar& v);

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

// Elementwise `op` of `ins` (each converted to its `types` entry, broadcast by strides) into
// `out` resized to the broadcast shape (allocated when undefined). False when the plugin has no
// kernel for that dtype.
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
  if (fresh) {
    out = at::detail::empty_generic(shape, allocator(),
                                    c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), out_type,
                                    std::nullopt);
  } else if (out.sizes() != IntArrayRef(shape)) {
    at::native::resize_output(out, shape);
  }
  bool temp = out.scalar_type() != out_type;
  for (const auto& x : xs) temp = temp || (!fresh && shares_storage(*x, out) && !same_view(*x, out));
  Tensor dst = temp ? at::empty(shape, out.options().dtype(out_type)) : out;
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

void fill_value(const Tensor& t, const Scalar& v) {
  if (t.numel() == 0) return;
  bool exact = !at::isIntegralType(t.scalar_type(), false) ||
               static_cast<int64_t>(v.toDouble()) == v.toLong();  // fill's value is a double
  UD_KernelFn fn = exact ? kernel(OP_fill, t.scalar_type()) : nullptr;
  if (fn) {
    UD_Tensor o = desc(t);
    launch(fn, OP_fill, t.device().index(), nullptr, 0, &o, 1,
           Attrs(OP_fill).f(A_fill_value, v.toDouble()));
    return;
  }
  note_fallback("fill_.Scalar");  // through the view's span: torch fills expanded views too
  const c10::DeviceGuard guard(t.device());
  auto [view, bytes] = span_to_host(t);
  view.fill_(v);
  h2d(t, first_byte(t), bytes.data_ptr(), bytes.numel());
}

// Same-device copy of `src` (broadcast) into `dst`, casting when the dtypes differ.
void device_copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  bool same = src.scalar_type() == dst.scalar_type();
  if (same && src.sizes() == dst.sizes() && src.is_contiguous() && dst.is_contiguous()) {
    if (handle_of(src) == handle_of(dst) && src.storage_offset() == dst.storage_offset()) return;
    check(plugin().api->memcpy_d2d(current_stream(dst.device().index()),
                                   handle_of(dst) + dst.storage_offset() * dst.element_size(),
                                   handle_of(src) + src.storage_offset() * src.element_size(),
                                   dst.numel() * dst.element_size()),
          "memcpy_d2d");
    return;
  }
  int op = same ? OP_copy : OP_cast;
  UD_KernelFn fn = kernel(op, src.scalar_type());
  // a plugin casts between the dtypes it claims cast for (x86 and aurora: not to uint8/16-bit)
  if (!fn || (!same && !kernel(OP_cast, dst.scalar_type()))) {
    note_fallback(same ? "copy_" : "copy_ (cast)");
    dst.copy_(src.cpu());
    return;
  }
  Tensor s = shares_storage(src, dst) ? src.clone() : src;
  at::DimVector strides;
  UD_Tensor in = bdesc(s, dst.sizes(), strides), out = desc(dst);
  Attrs attrs(op);
  if (!same) attrs.s(A_cast_dtype, kDTypeNames[dtype_index(dst.scalar_type())]);
  launch(fn, op, dst.device().index(), &in, 1, &out, 1, attrs);
}

// ---------------------------------------------------------------------------------------------
// Creation, views, copies
// ---------------------------------------------------------------------------------------------
Tensor empty_memory_format(IntArrayRef size, std::optional<ScalarType> dtype,
                           std::optional<at::Layout>, std::optional<c10::Device> device,
                           std::optional<bool>, std::optional<at::MemoryFormat> fmt) {
  c10::Device dev = device.value_or(c10::Device(kPU1));
  const c10::OptionalDeviceGuard guard(dev);
  return at::detail::empty_generic(size, allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()), fmt);
}

Tensor empty_strided(IntArrayRef size, IntArrayRef stride, std::optional<ScalarType> dtype,
                     std::optional<at::Layout>, std::optional<c10::Device> device,
                     std::optional<bool>) {
  c10::Device dev = device.value_or(c10::Device(kPU1));
  const c10::OptionalDeviceGuard guard(dev);
  return at::detail::empty_strided_generic(size, stride, allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           dtype.value_or(c10::get_default_dtype_as_scalartype()));
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
  if (s.is_contiguous() || kernel(OP_copy, s.scalar_type())) {
    Tensor c = s.contiguous();
    h = at::empty(c.sizes(), c.options().device(at::kCPU));
    d2h(c, first_byte(c), h.data_ptr(), c.numel() * c.element_size());
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
  h = h.resolve_conj().resolve_neg().contiguous();
  Tensor d = stored(dst);
  uint64_t n = h.numel() * h.element_size();
  if (d.is_contiguous()) {
    h2d(d, first_byte(d), h.data_ptr(), n);
  } else if (kernel(OP_copy, d.scalar_type())) {
    Tensor tmp = at::empty(d.sizes(), d.options());
    h2d(tmp, 0, h.data_ptr(), n);
    device_copy(tmp, d);
  } else {  // read, modify and write back the span of the view
    auto [view, bytes] = span_to_host(d);
    view.copy_(h);
    h2d(d, first_byte(d), bytes.data_ptr(), bytes.numel());
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
  } else if (same_bits && !src.is_conj() && !src.is_neg() && src.is_contiguous() &&
             dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
             dst.sizes() == src.sizes()) {
    const c10::DeviceGuard guard(src.device());
    d2h(src, first_byte(src), dst.data_ptr(), src.numel() * src.element_size());
  } else {
    dst.copy_(to_host(src));
  }
  return dst;
}

Tensor copy_from_and_resize(const Tensor& src, const Tensor& dst) {
  at::native::resize_output(dst, src.sizes());
  return copy_from(src, dst, false);
}

void grow_storage(const Tensor& self) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.numel() == 0) return;
  size_t need = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size(),
                                                 self.storage_offset());
  if (need > self.storage().nbytes()) resize_bytes(impl->storage(), need);
}

const Tensor& resize(const Tensor& self, IntArrayRef size, std::optional<at::MemoryFormat> fmt) {
  if (self.sizes() == size && !fmt) return self;
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (fmt && *fmt != at::MemoryFormat::Preserve) impl->empty_tensor_restride(*fmt);
  grow_storage(self);
  return self;
}

Tensor& set_storage(Tensor& self, c10::Storage src, int64_t offset, IntArrayRef size,
                    IntArrayRef stride) {
  if (stride.empty()) stride = IntArrayRef();  // no strides: contiguous
  at::native::checkSetStorage(self, src, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  if (stride.data()) self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  else self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  grow_storage(self);
  return self;
}

Tensor& set_source(Tensor& self, c10::Storage src) {
  int64_t n = static_cast<int64_t>(src.nbytes() / self.element_size());
  return set_storage(self, src, 0, {n}, {});
}

Scalar local_scalar_dense(const Tensor& self) {
  const c10::DeviceGuard guard(self.device());
  Tensor h = at::empty({}, self.options().device(at::kCPU));
  d2h(self, first_byte(self), h.data_ptr(), self.element_size());
  if (self.is_conj()) h = h.conj();
  return (self.is_neg() ? at::_neg_view(h) : h).item();
}

// ---------------------------------------------------------------------------------------------
// Row kinds. `E` indexes kRows; each kernel falls back to the CPU when the plugin has no kernel.
// ---------------------------------------------------------------------------------------------
#define ROW_OP kRows[E].op
#define ROW kRows[E].aten

template <int E>
Tensor& k_unary(const Tensor& self, Tensor& out) {
  ScalarType t = ROW_OP == OP_logical_not ? self.scalar_type() : out.scalar_type();
  TORCH_CHECK(ROW_OP == OP_logical_not || t == self.scalar_type(), ROW, ": Found dtype ", t,
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
  if (op == OP_div && at::isIntegralType(t, true)) t = c10::get_default_dtype_as_scalartype();
  return t;
}

ScalarType out_type(int op, ScalarType compute) {
  return (op >= OP_eq && op <= OP_logical_or) ? at::kBool : compute;
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
  if (op == OP_sub) at::native::sub_check(self, other);
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
  return v == 2.0 ? OP_square : v == 0.5 ? OP_sqrt : v == -1.0 ? OP_reciprocal
       : v == -0.5 ? OP_rsqrt : v == 1.0 ? OP_copy : -1;
}

template <int E>
Tensor& k_binary_scalar(const Tensor& self, const Scalar& other, Tensor& out) {
  check_cast(out_type(ROW_OP, at::result_type(self, other)), out);
  int unary = ROW_OP == OP_pow && self.is_floating_point() ? pow_as_unary(other) : -1;
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

// Reduction over `dim` (none or empty: all) computing in `t`; false when unsupported.
bool reduce(int op, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, ScalarType t,
            const Tensor& out) {
  UD_KernelFn fn = kernel(op, t);
  if (!fn) return false;
  Tensor x = self.scalar_type() == t ? self : self.to(t);
  int64_t nd = self.dim();
  std::vector<int64_t> axes;
  if (dim.has_value() && nd > 0)
    for (int64_t d : *dim) axes.push_back(at::maybe_wrap_dim(d, nd));
  std::sort(axes.begin(), axes.end());
  TORCH_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), kOpName[op],
              ": dim ", *dim, " repeats a dimension");
  at::DimVector shape;
  for (int64_t i = 0; i < nd; ++i) {
    bool r = axes.empty() || std::binary_search(axes.begin(), axes.end(), i);
    if (!r) shape.push_back(self.size(i));
    else if (keepdim) shape.push_back(1);
  }
  at::native::resize_output(out, shape);
  at::assert_no_internal_overlap(out);
  ScalarType ot = (op == OP_argmax || op == OP_argmin) ? at::kLong : t;
  bool temp = out.scalar_type() != ot || shares_storage(out, x);
  Tensor dst = temp ? at::empty(shape, out.options().dtype(ot)) : out;
  if (dst.numel() > 0) {
    UD_Tensor in = desc(x), o = desc(dst);
    launch(fn, op, x.device().index(), &in, 1, &o, 1, Attrs(op).ints(0, axes).b(1, keepdim));
  }
  if (temp) out.copy_(dst);
  return true;
}

template <int E>
Tensor& k_reduce_dtype(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<ScalarType> dtype, Tensor& out) {
  if (dtype) check_dtype(*dtype, out);
  ScalarType t = dtype.value_or(out.scalar_type());
  if (!reduce(ROW_OP, self, dim, keepdim, t, out)) fallback(ROW, self, dim, keepdim, dtype, out);
  return out;
}

template <int E>
Tensor& k_reduce(const Tensor& self, IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  if (!reduce(ROW_OP, self, dim, keepdim, self.scalar_type(), out))
    fallback(ROW, self, dim, keepdim, out);
  return out;
}

template <int E>
Tensor k_reduce_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, ROW, "(): Expected reduction dim to be specified for "
              "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (!reduce(ROW_OP, self, std::nullopt, false, self.scalar_type(), out))
    return fallback(ROW, self)[0].toTensor();
  return out;
}

template <int E>
Tensor& k_arg_reduce(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  check_dtype(at::kLong, out);
  std::vector<int64_t> d;
  if (dim) d.push_back(*dim);
  bool ok = (dim || !keepdim) && self.numel() > 0 &&
            reduce(ROW_OP, self, dim ? at::OptionalIntArrayRef(d) : std::nullopt, keepdim,
                   self.scalar_type(), out);
  if (!ok) fallback(ROW, self, dim, keepdim, out);
  return out;
}

// Runs op `op` with the given inputs into freshly computed outputs (no aliasing with inputs).
void call(int op, ScalarType t, std::initializer_list<UD_Tensor> ins,
          std::initializer_list<UD_Tensor> outs, const Attrs& attrs, c10::DeviceIndex dev) {
  UD_KernelFn fn = kernel(op, t);
  TORCH_INTERNAL_ASSERT(fn, "unidev: no kernel for ", kOpName[op]);
  launch(fn, op, dev, ins.begin(), static_cast<int>(ins.size()), outs.begin(),
         static_cast<int>(outs.size()), attrs);
}

// Writes into `out` through a fresh tensor when `out` aliases an input (torch CPU's kernels of
// these ops accept that and compute garbage), refusing outputs that repeat elements.
template <class F>
void into(Tensor& out, IntArrayRef shape, std::initializer_list<const Tensor*> ins, F&& body) {
  check_dtype(ins.begin()[0]->scalar_type(), out);
  at::native::resize_output(out, shape);
  at::assert_no_internal_overlap(out);
  bool temp = false;
  for (const Tensor* t : ins) temp = temp || shares_storage(*t, out);
  Tensor dst = temp ? at::empty(shape, out.options()) : out;
  if (dst.numel() > 0) body(dst);
  if (temp) out.copy_(dst);
}

template <int E>
Tensor& k_mm(const Tensor& a, const Tensor& b, Tensor& out) {
  int64_t nd = a.dim();
  TORCH_CHECK((nd == 2 || nd == 3) && b.dim() == nd, ROW, ": expected two ", nd, "-D tensors, got ",
              a.sizes(), " and ", b.sizes());
  TORCH_CHECK(a.size(-1) == b.size(-2) && (nd == 2 || a.size(0) == b.size(0)), ROW,
              ": shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), ROW, ": expected both of dtype ",
              a.scalar_type(), ", got ", b.scalar_type());
  if (!kernel(OP_matmul, a.scalar_type())) return fallback(ROW, a, b, out), out;
  at::DimVector shape(a.sizes().begin(), a.sizes().end() - 1);
  shape.push_back(b.size(-1));
  into(out, shape, {&a, &b}, [&](const Tensor& dst) {
    call(OP_matmul, a.scalar_type(), {desc(a), desc(b)}, {desc(dst)}, Attrs(OP_matmul),
         a.device().index());
  });
  return out;
}

template <int E>
Tensor& k_addmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), ROW, ": shapes ", a.sizes(),
              " and ", b.sizes(), " cannot be multiplied");
  bool ok = kernel(OP_gemm, a.scalar_type()) && b.scalar_type() == a.scalar_type() &&
            c.scalar_type() == a.scalar_type() && on_device(c);
  if (!ok) return fallback(ROW, c, a, b, beta, alpha, out), out;
  at::DimVector shape{a.size(0), b.size(1)};
  at::infer_size_dimvector(c.sizes(), shape);  // checks that c broadcasts
  into(out, shape, {&a, &b, &c}, [&](const Tensor& dst) {
    at::DimVector strides;
    UD_Tensor cd = beta.toDouble() == 0.0 ? absent() : bdesc(c, dst.sizes(), strides);
    call(OP_gemm, a.scalar_type(), {desc(a), desc(b), cd}, {desc(dst)},
         Attrs(OP_gemm).f(A_gemm_alpha, alpha.toDouble()).f(A_gemm_beta, beta.toDouble()),
         a.device().index());
  });
  return out;
}

int64_t conv_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

bool conv_ok(const Tensor& x, bool transposed, IntArrayRef output_padding) {
  return !transposed && x.dim() == 4 && kernel(OP_conv2d, x.scalar_type()) &&
         kernel(OP_conv2d_backward_input, x.scalar_type()) &&
         kernel(OP_conv2d_backward_weight, x.scalar_type());
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
  Tensor y = at::empty({x.size(0), w.size(0), conv_out(x.size(2), w.size(2), stride[0], padding[0],
                        dilation[0]), conv_out(x.size(3), w.size(3), stride[1], padding[1],
                        dilation[1])}, x.options());
  call(OP_conv2d, x.scalar_type(), {desc(x), desc(w), opt_desc(bias)}, {desc(y)},
       Attrs(OP_conv2d).ints(A_conv2d_stride, stride).ints(A_conv2d_padding, padding)
           .ints(A_conv2d_dilation, dilation).i(A_conv2d_groups, groups),
       x.device().index());
  return y;
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
  c10::DeviceIndex dev = x.device().index();
  if (mask[0]) {
    gx = at::empty(x.sizes(), x.options());
    call(OP_conv2d_backward_input, x.scalar_type(), {desc(gy), desc(w)}, {desc(gx)},
         Attrs(OP_conv2d_backward_input).ints(A_conv2d_backward_input_input_shape, x.sizes())
             .ints(A_conv2d_backward_input_stride, stride)
             .ints(A_conv2d_backward_input_padding, padding)
             .ints(A_conv2d_backward_input_dilation, dilation)
             .i(A_conv2d_backward_input_groups, groups), dev);
  }
  if (mask[1]) {
    gw = at::empty(w.sizes(), w.options());
    call(OP_conv2d_backward_weight, x.scalar_type(), {desc(gy), desc(x)}, {desc(gw)},
         Attrs(OP_conv2d_backward_weight).ints(A_conv2d_backward_weight_weight_shape, w.sizes())
             .ints(A_conv2d_backward_weight_stride, stride)
             .ints(A_conv2d_backward_weight_padding, padding)
             .ints(A_conv2d_backward_weight_dilation, dilation)
             .i(A_conv2d_backward_weight_groups, groups), dev);
  }
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
  at::native::resize_output(out, shape);
  at::native::resize_output(idx, shape);
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
  });
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
  });
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
  });
  return gx;
}

template <int E>
Tensor k_adaptive_pool(const Tensor& x, IntArrayRef size) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type())) return fallback(ROW, x, size)[0].toTensor();
  std::array<int64_t, 2> os{size[0], size.size() > 1 ? size[1] : size[0]};
  Tensor y = at::empty({x.size(0), x.size(1), os[0], os[1]}, x.options());
  if (y.numel() > 0)
    call(ROW_OP, x.scalar_type(), {desc(x)}, {desc(y)}, Attrs(ROW_OP).ints(0, os), x.device().index());
  return y;
}

template <int E>
Tensor k_adaptive_pool_backward(const Tensor& gy, const Tensor& x) {
  if (x.dim() != 4 || !kernel(ROW_OP, x.scalar_type())) return fallback(ROW, gy, x)[0].toTensor();
  Tensor gx = at::empty(x.sizes(), x.options());
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
  Tensor y = at::empty(x.sizes(), x.options());
  Tensor mean = at::empty({x.size(1)}, x.options()), invstd = at::empty({x.size(1)}, x.options());
  call(ROW_OP, x.scalar_type(), {desc(x), opt_desc(w), opt_desc(b), opt_desc(rm), opt_desc(rv)},
       {desc(y), desc(mean), desc(invstd)},
       Attrs(ROW_OP).b(A_batch_norm_training, training).f(A_batch_norm_momentum, momentum)
           .f(A_batch_norm_eps, eps), x.device().index());
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
  Tensor invstd = train ? *si : (*rv + eps).rsqrt();
  Tensor gx = at::empty(x.sizes(), x.options());
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
  bool ok = kernel(OP_mse_loss_backward, x.scalar_type()) &&
            target.scalar_type() == x.scalar_type() &&
            at::infer_size_dimvector(x.sizes(), target.sizes()) == x.sizes() &&
            (reduction == 0 ? gl.sizes() == x.sizes() : gl.dim() == 0);
  if (!ok) return false;
  into(gx, x.sizes(), {&gl, &x, &target}, [&](const Tensor& dst) {
    at::DimVector s;
    call(OP_mse_loss_backward, x.scalar_type(), {desc(gl), desc(x), bdesc(target, x.sizes(), s)},
         {desc(dst)}, Attrs(OP_mse_loss_backward).s(0, reduction_name(reduction)),
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
  Tensor y = at::empty(shape, x.options());
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
           .f(2, s).s(3, kDTypeNames[dtype_index(out.scalar_type())]));
  return out;
}

template <int E>
Tensor& k_fill(Tensor& self, const Scalar& v) {  // any dtype: fill_value falls back by itself
  fill_value(self, v);
  return self;
}

template <int E>
Tensor& k_zero(Tensor& self) {
  UD_KernelFn fn = kernel(OP_zero, self.scalar_type());
  if (!fn) return fill_value(self, 0), self;
  UD_Tensor o = desc(self);
  if (self.numel() > 0) launch(fn, OP_zero, self.device().index(), nullptr, 0, &o, 1, Attrs(OP_zero));
  return self;
}

// The allocator keeps a block recorded on another stream until that stream's work is done.
void record_stream(Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == kPU1, "record_stream: expected a ", self.device().type(),
              " stream, got ", s);
  static_cast<c10::DeviceAllocator*>(allocator())->recordStream(self.storage().data_ptr(), s);
}

const char* const kInfra[] = {
    "empty.memory_format", "empty_strided", "as_strided", "view", "_reshape_alias",
    "view_as_real", "view_as_complex", "unfold", "_copy_from", "_copy_from_and_resize",
    "resize_", "set_.source_Storage", "set_.source_Storage_storage_offset",
    "set_.source_Tensor", "_local_scalar_dense", "record_stream"};

}  // namespace

void set_fallback_mode(int mode) { g_mode = mode; }

std::vector<std::string> registered_ops() {
  std::vector<std::string> out(std::begin(kInfra), std::end(kInfra));
  for (const AtenRow& r : kRows) out.push_back(r.aten);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage", TORCH_FN(set_source));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));  // metadata, any aliasing
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
#define REG_ROW(E, kind) m.impl(kRows[E].aten, TORCH_FN(k_##kind<E>));
  UD_TORCH_ROWS(REG_ROW)
#undef REG_ROW
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&boxed_fallback>());
}

// copy_from applies conjugate and negative bits itself (see stored()); torch's math-bit fallback
// would resolve them with a device copy, which is a _copy_from again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// torch 2.13 registers no fallthrough for this key, so every op under
// torch.autocast(<device>) would fail; autocast runs ops in the dtypes they are given.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace unidev_torch
