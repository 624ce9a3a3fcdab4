// unidev_torch.h — what the adapter's two translation units share: the loaded plugin, its
// streams, the error check, and the helpers that turn at::Tensor into UD_Tensor descriptors.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <unidev/unidev.h>

#include <string>
#include <vector>

#include "op_table.h"

namespace unidev_torch {

constexpr int kNumDTypes = 8;  // kDTypeNames order (unidev.contract.dtypes.DTYPES)
constexpr int kMaxAttrs = 10;

// The plugin behind PrivateUse1: its table and the kernels looked up once at load.
struct Plugin {
  const UD_Api* api = nullptr;
  std::string path, name, torch_name;
  int32_t dl_device_type = UD_DLPACK_EXT_DEV;
  int device_count = 0;
  UD_KernelFn kernels[OP_COUNT][kNumDTypes] = {};
  UD_Attr defaults[OP_COUNT][kMaxAttrs] = {};
};

Plugin& plugin();  // throws a c10::Error naming the cause when no plugin is loaded
bool loaded();

// -1 if `t` has no unidev dtype.
int dtype_index(at::ScalarType t);
UD_DType ud_dtype(at::ScalarType t);

// Turns an error object into a c10 exception (OutOfMemoryError for UD_ERR_OUT_OF_MEMORY) that
// names `what`; frees the error. No-op for NULL.
void check(UD_Error* err, const char* what);

extern thread_local c10::DeviceIndex tls_device;  // the guard's current device of this thread

// The current stream of `device` for this thread (the guard's notion of it).
UD_Stream current_stream(c10::DeviceIndex device);
void synchronize_stream(c10::DeviceIndex device);

// The caching allocator behind PrivateUse1 and the storage growth it serves (resize_, hooks).
c10::Allocator* allocator();
void resize_bytes(const c10::Storage& storage, size_t nbytes);

// CPU fallbacks: counted per aten operator; mode 0 counts, 1 also warns once, 2 raises.
int64_t count_fallback(const std::string& op);
void set_fallback_mode(int mode);
std::vector<std::string> registered_ops();  // aten names with a device kernel

inline UD_KernelFn kernel(int op, at::ScalarType t) {
  int d = dtype_index(t);
  if (d < 0 || !loaded()) return nullptr;
  return plugin().kernels[op][d];
}

inline uint64_t handle_of(const at::Tensor& t) {  // by reference: no refcount traffic
  return reinterpret_cast<uint64_t>(t.unsafeGetTensorImpl()->unsafe_storage().data());
}

inline UD_Tensor desc(const at::Tensor& t) {
  static const int32_t dl_type = plugin().dl_device_type;  // fixed once a plugin is loaded
  UD_Tensor d;
  d.handle = handle_of(t);
  d.device = {dl_type, t.device().index()};
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = ud_dtype(t.scalar_type());
  d.shape = t.sizes().data();
  d.strides = t.strides().data();
  d.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.element_size();
  return d;
}

inline UD_Tensor absent() {
  UD_Tensor d{};
  d.ndim = -1;
  return d;
}

// Attributes of one call: the op's defaults in op-set order, then what the caller sets.
struct Attrs {
  UD_Attr a[kMaxAttrs];
  int n;
  explicit Attrs(int op) : n(kAttrBegin[op + 1] - kAttrBegin[op]) {
    for (int k = 0; k < n; ++k) a[k] = plugin().defaults[op][k];
  }
  Attrs& f(int k, double v) { a[k].value.f = v; return *this; }
  Attrs& i(int k, int64_t v) { a[k].value.i = v; return *this; }
  Attrs& b(int k, bool v) { a[k].value.b = v ? 1 : 0; return *this; }
  Attrs& s(int k, const char* v) { a[k].value.s = v; return *this; }
  Attrs& ints(int k, at::IntArrayRef v) {
    a[k].value.ints.data = v.data();
    a[k].value.ints.len = static_cast<int64_t>(v.size());
    return *this;
  }
};

// Calls kernel `fn` of op `op` on the current stream of `device`; throws on error.
void launch(UD_KernelFn fn, int op, c10::DeviceIndex device, const UD_Tensor* in, int nin,
            const UD_Tensor* out, int nout, const Attrs& attrs);

}  // namespace unidev_torch
