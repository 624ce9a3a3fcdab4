// register.cpp — what PrivateUse1 registers besides the rows' kernels: creation, storage
// (resize_, set_), torch's own metadata kernels for views, record_stream; and the list of every
// aten name with a device kernel (the rows register in their own files).
#include <ATen/EmptyTensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>

#include <iterator>

#include "aten.h"

namespace at::native {
std::tuple<Tensor, Tensor, Tensor> math_group_norm(const Tensor& input,
                                                   const std::optional<Tensor>& weight,
                                                   const std::optional<Tensor>& bias, int64_t N,
                                                   int64_t C, int64_t HxW, int64_t group,
                                                   double eps);
}  // namespace at::native

namespace unidev_torch {
namespace {

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

// The allocator keeps a block recorded on another stream until that stream's work is done.
void record_stream(Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == kPU1, "record_stream: expected a ", self.device().type(),
              " stream, got ", s);
  device_allocator()->recordStream(self.storage().data_ptr(), s);
}

// torch's composite native_group_norm (math_group_norm, exported by libtorch_cpu but not in its
// headers) views its input, which fails for channels-last ("view size is not compatible"):
// such an input runs through it contiguous and the result returns to the input's format, as
// torch CPU's kernel gives it.
std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& x, const std::optional<Tensor>& w,
                                              const std::optional<Tensor>& b, c10::SymInt n,
                                              c10::SymInt c, c10::SymInt hw, int64_t group,
                                              double eps) {
  auto [y, mean, rstd] = at::native::math_group_norm(x.contiguous(), w, b, n.guard_int(__FILE__, __LINE__),
                                                     c.guard_int(__FILE__, __LINE__),
                                                     hw.guard_int(__FILE__, __LINE__), group, eps);
  return {x.is_contiguous() ? y : y.contiguous(x.suggest_memory_format()), mean, rstd};
}

const char* const kInfra[] = {
    "empty.memory_format", "empty_strided", "as_strided", "view", "_reshape_alias",
    "view_as_real", "view_as_complex", "unfold", "_copy_from", "_copy_from_and_resize",
    "resize_", "set_.source_Storage", "set_.source_Storage_storage_offset",
    "set_.source_Tensor", "_local_scalar_dense", "record_stream", "native_group_norm"};  // copy.cpp has the copies

}  // namespace

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
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage", TORCH_FN(set_source));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));  // metadata, any aliasing
  m.impl("native_group_norm", TORCH_FN(group_norm));
}

}  // namespace unidev_torch
