// aten.h — what the aten kernels share: the generated aten → unidev rows, the CPU fallback
// call, output checks, broadcast descriptors, and the per-row registration macro.
#pragma once

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <functional>
#include <initializer_list>

#include "../unidev_torch.h"
#include "op_table.h"

namespace unidev_torch {

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

// --- fallback.cpp ----------------------------------------------------------------------------
void note_fallback(const std::string& op);  // counts; warns or raises per UNIDEV_FALLBACK
void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
c10::OperatorHandle op_handle(const std::string& aten);  // "add.out" -> aten::add, "out"

// Runs aten op `aten` through the CPU fallback from inside a device kernel; returns the stack.
template <class... Args>
torch::jit::Stack fallback(const char* aten, Args&&... args) {
  torch::jit::Stack st;
  st.reserve(sizeof...(Args));
  (st.emplace_back(std::forward<Args>(args)), ...);
  boxed_fallback(op_handle(aten), &st);
  return st;
}

// --- copy.cpp, elementwise.cpp ---------------------------------------------------------------
void fill_value(const Tensor& t, const Scalar& v);  // on the device when the plugin can
// Elementwise `op` of `ins` (each converted to its `types` entry, broadcast by strides) into
// `out` resized to the broadcast shape (allocated when undefined). False when the plugin has no
// kernel for that dtype.
bool elementwise(int op, Tensor& out, ScalarType out_type, const Attrs& attrs,
                 std::initializer_list<Ref> ins, std::initializer_list<ScalarType> types);

// --- small helpers ---------------------------------------------------------------------------
inline bool on_device(const Tensor& t) { return t.defined() && t.device().type() == kPU1; }

inline c10::Device device_of(std::initializer_list<Ref> ts) {
  for (const Tensor& t : ts)
    if (on_device(t)) return t.device();
  TORCH_CHECK(false, "unidev: no tensor of this op is on the device");
}

// `t` as an input of an op whose output has `shape`: broadcast dimensions get stride 0.
inline UD_Tensor bdesc(const Tensor& t, IntArrayRef shape, at::DimVector& strides) {
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

inline UD_Tensor opt_desc(const OptTensor& t) {
  return t.has_value() && t->defined() ? desc(*t) : absent();
}

inline bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage().is_alias_of(b.storage());
}
inline bool same_view(const Tensor& a, const Tensor& b) {
  return a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.scalar_type() == b.scalar_type();
}

// torch CPU's checks (TensorIterator's) on an output the caller passed: no element of it may be
// written twice, and no input may overlap it partially; a full overlap in another layout is
// computed through a temporary. A few cached flags unless out and an input share storage.
inline void check_out(const Tensor& out, std::initializer_list<Ref> ins) {
  at::assert_no_internal_overlap(out);
  for (const Tensor& t : ins)
    if (t.defined()) at::assert_no_partial_overlap(out, t);
}

inline void check_cast(ScalarType result, const Tensor& out) {
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
}

inline void check_dtype(ScalarType want, const Tensor& out) {  // ops whose out must have their dtype
  TORCH_CHECK(out.scalar_type() == want, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(want).name(), ", but got ", out.dtype().name(),
              " instead");
}

// Runs op `op` with the given inputs into freshly computed outputs (no aliasing with inputs).
inline void call(int op, ScalarType t, std::initializer_list<UD_Tensor> ins,
                 std::initializer_list<UD_Tensor> outs, const Attrs& attrs, c10::DeviceIndex dev) {
  UD_KernelFn fn = kernel(op, t);
  TORCH_INTERNAL_ASSERT(fn, "unidev: no kernel for ", op_name(op));
  launch(fn, op, dev, ins.begin(), static_cast<int>(ins.size()), outs.begin(),
         static_cast<int>(outs.size()), attrs);
}

// The memory format torch's CPU kernels give the result of a layout-sensitive op on `x`
// (pooling, batch norm): channels-last when x is, as x.suggest_memory_format() says.
inline at::MemoryFormat format_of(const Tensor& x) {
  return x.dim() == 4 ? x.suggest_memory_format() : at::MemoryFormat::Contiguous;
}

// `out` resized to `shape`; a resized one gets memory format `fmt` (structured kernels' rule:
// an output the caller sized right keeps its strides).
inline void resize_to(Tensor& out, IntArrayRef shape, at::MemoryFormat fmt) {
  if (at::native::resize_output(out, shape) && fmt != at::MemoryFormat::Contiguous)
    out.unsafeGetTensorImpl()->empty_tensor_restride(fmt);
}

// Writes into `out` through a fresh tensor when `out` aliases an input (torch CPU's kernels of
// these ops accept that and compute garbage), refusing outputs that repeat elements.
template <class F>
void into(Tensor& out, IntArrayRef shape, std::initializer_list<const Tensor*> ins, F&& body,
          at::MemoryFormat fmt = at::MemoryFormat::Contiguous) {
  check_dtype(ins.begin()[0]->scalar_type(), out);
  resize_to(out, shape, fmt);
  at::assert_no_internal_overlap(out);
  bool temp = false;
  for (const Tensor* t : ins) temp = temp || shares_storage(*t, out);
  Tensor dst = temp ? at::empty(shape, out.options().memory_format(fmt)) : out;
  if (dst.numel() > 0) body(dst);
  if (temp) out.copy_(dst);
}

// Row kinds: `E` indexes kRows (op_table.h); each kernel falls back to the CPU when the plugin
// has no kernel. UD_TORCH_REGISTER(ROWS) registers a file's rows, ROWS being the generated
// UD_TORCH_ROWS_<FILE> list of (row, kind).
#define ROW_OP kRows[E].op
#define ROW kRows[E].aten
#define UD_TORCH_REG_ROW_(E, kind) m.impl(kRows[E].aten, TORCH_FN(k_##kind<E>));
#define UD_TORCH_REGISTER(ROWS) \
  TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { ROWS(UD_TORCH_REG_ROW_) }

}  // namespace unidev_torch
