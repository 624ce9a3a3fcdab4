// unidev_torch.h — what every translation unit of the adapter shares: the bound plugin, the
// error check, streams, the allocator's entry points, and at::Tensor → UD_Tensor descriptors.
// Kept to c10/ATen core headers: every file includes it, and each header costs seconds per file.
#pragma once

#include <ATen/core/Tensor.h>
#include <unidev/ops.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace c10 {
class DeviceAllocator;
}

namespace unidev_torch {

constexpr int kMaxAttrs = 10;    // the most attributes of any op (checked at load)
constexpr int kMaxDevices = 16;

// The plugin behind PrivateUse1: its table and the kernels looked up once at load.
struct Plugin {
  const UD_Api* api = nullptr;
  std::string path, name, torch_name;
  int32_t dl_device_type = UD_DLPACK_EXT_DEV;
  int device_count = 0;
  UD_KernelFn kernels[UD_OP_COUNT][UD_DT_COUNT] = {};
  UD_Attr defaults[UD_OP_COUNT][kMaxAttrs] = {};
};

// --- loader.cpp ------------------------------------------------------------------------------
Plugin& plugin();  // throws a c10::Error naming the cause when no plugin is loaded
bool loaded();
// Binds the table at `api` (already loaded and checked by unidev's discovery) to PrivateUse1.
int init(uint64_t api, const std::string& path, const std::string& torch_name);
int dtype_index(at::ScalarType t);  // the UD_DT_* id of `t`, -1 if it has no unidev dtype
UD_DType ud_dtype(at::ScalarType t);
const char* op_name(int op);
// Raises a plugin error as the Python type of its code's kind (ops.h ud_error_kind: ValueError,
// IndexError, NotImplementedError, torch.OutOfMemoryError, RuntimeError), naming `what`; frees
// the error. No-op for NULL.
void check(UD_Error* err, const char* what);
void check_index(c10::DeviceIndex d);  // ValueError naming the device count when out of range

// --- guard.cpp: current device and stream per thread ------------------------------------------
extern thread_local c10::DeviceIndex tls_device;
UD_Stream stream_at(c10::DeviceIndex device, int64_t id);  // torch stream id → plugin stream
UD_Stream current_stream(c10::DeviceIndex device);
void synchronize_stream(c10::DeviceIndex device);

// --- allocator.cpp ---------------------------------------------------------------------------
c10::Allocator* allocator();                // the caching allocator behind PrivateUse1
c10::DeviceAllocator* device_allocator();   // the same, with streams and statistics
void resize_bytes(const c10::Storage& storage, size_t nbytes);
c10::Allocator* pinned_allocator();
bool is_pinned(const void* p);

// --- generator.cpp, hooks.cpp ----------------------------------------------------------------
void manual_seed(c10::DeviceIndex d, uint64_t seed);
uint64_t initial_seed(c10::DeviceIndex d);
void register_hooks();

// --- aten/fallback.cpp: CPU fallbacks, counted per aten operator ------------------------------
int64_t count_fallback(const std::string& op);
void set_fallback_mode(int mode);  // 0 counts, 1 also warns once per op, 2 raises
std::map<std::string, int64_t> fallback_counts();
void reset_fallbacks();
std::vector<std::string> registered_ops();  // aten/register.cpp: aten names with a device kernel

// --- the per-call path -----------------------------------------------------------------------
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

// Attributes of one call: the op's defaults in op-set order (ops.h), then what the caller sets.
struct Attrs {
  UD_Attr a[kMaxAttrs];
  int n;
  explicit Attrs(int op) : n(ud_op_info(op)->num_attrs) {
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

// Kernel calls per op since reset_op_counts(), and "copy.transposes" (loader.cpp; for tests).
std::map<std::string, int64_t> op_counts();
void reset_op_counts();

// Calls kernel `fn` of op `op` on the current stream of `device`; throws on error.
void launch(UD_KernelFn fn, int op, c10::DeviceIndex device, const UD_Tensor* in, int nin,
            const UD_Tensor* out, int nout, const Attrs& attrs);

}  // namespace unidev_torch
