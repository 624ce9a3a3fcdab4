// api.cpp — the UD_Api table on vesim: devices, memory, streams, kernel lookup.
#include "aurora.h"

namespace aurora {

namespace {

VESIMresult g_init = VESIM_ERROR_NOT_INITIALIZED;
std::string g_init_detail;
int g_devices = 0;

// vesim is started on first use. Counting devices needs only its device table; the contexts (one
// OMP-mode context per device: all cores, one stream and its worker thread, fault handlers) come
// with the first other call, so a process that lists aurora but binds another plugin runs no
// vesim threads. Function-local statics, not std::call_once: every launch asks, the check is a load.
VESIMresult ensure_init(bool contexts = true) {
  static const VESIMresult counted = [] {
    g_init = vesimInit();
    if (g_init == VESIM_SUCCESS) g_init = vesimDeviceGetCount(&g_devices);
    if (g_init != VESIM_SUCCESS) g_init_detail = vesimGetLastErrorDetail();
    return g_init;
  }();
  if (!contexts || counted != VESIM_SUCCESS) return counted;
  static const VESIMresult result = [] {
    for (int d = 0; g_init == VESIM_SUCCESS && d < g_devices; d++) {
      VESIMcontext ctx;
      g_init = vesimCtxCreate(&ctx, VESIM_CONTEXT_MODE_OMP, d);
    }
    if (g_init != VESIM_SUCCESS) g_init_detail = vesimGetLastErrorDetail();
    return g_init;
  }();
  return result;
}

UD_Error* init_error() {
  if (ensure_init() == VESIM_SUCCESS) return nullptr;
  return ud_kit_error(code_of(g_init), "aurora: vesim failed to start: %s (%s)",
                      g_init_detail.c_str(), vesimGetErrorName(g_init));
}

}  // namespace

UD_Error* check_device(int32_t device) {
  if (UD_Error* e = init_error()) return e;
  if (device < 0 || device >= g_devices)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "aurora: device %d does not exist (%d devices; "
                        "set VESIM_DEVICES for more)", device, g_devices);
  return nullptr;
}

namespace {

UD_Error* device_count(int32_t* count, const char** reason) {
  if (!count) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "device_count: count is NULL");
  if (reason) *reason = nullptr;
  if (ensure_init(false) != VESIM_SUCCESS) {
    *count = 0;
    if (reason) *reason = "vesim failed to start";
    return nullptr;
  }
  *count = g_devices;
  if (g_devices == 0 && reason) *reason = "VESIM_DEVICES=0";
  return nullptr;
}

UD_Error* device_properties(int32_t device, UD_DeviceProperties* p) {
  if (UD_Error* e = check_device(device)) return e;
  if (!p || p->struct_size < sizeof(UD_DeviceProperties))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "device_properties: props is NULL or its "
                        "struct_size is too small");
  VESIMdeviceinfo info;
  if (VESIMresult r = vesimDeviceGetInfo(device, &info)) return from_vesim(r, "device_properties");
  snprintf(p->name, sizeof p->name, "%s", info.name);
  p->total_memory = info.memory;
  p->compute_units = info.cores;
  p->vector_width = info.vector_length * 8;
  p->host_addressable = 0;
  p->capabilities = UD_CAP_STREAMS | UD_CAP_EVENT_TIMING;
  return nullptr;
}

UD_Error* device_memory_info(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (UD_Error* e = check_device(device)) return e;
  return from_vesim(vesimMemGetInfo(device, free_bytes, total_bytes), "device_memory_info");
}

UD_Error* device_synchronize(int32_t device) {
  if (UD_Error* e = check_device(device)) return e;
  VESIMcontext ctx;
  if (VESIMresult r = vesimCtxGet(device, &ctx)) return from_vesim(r, "device_synchronize");
  // every stream's pending failure, in one error (unidev.h)
  return from_vesim(vesimCtxSynchronize(ctx), "device_synchronize: work on a stream failed");
}

// Runs `enqueue` on the stream (the device's default one for NULL) and reports its result.
template <class F>
UD_Error* on_stream(UD_Stream stream, int32_t device, const char* what, F enqueue) {
  VESIMstream s;
  if (UD_Error* e = stream_of(stream, device, &s)) return e;
  return from_vesim(enqueue(s), what);
}

UD_Error* mem_alloc(int32_t device, UD_Stream stream, uint64_t size, UD_Handle* handle) {
  if (!handle) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "mem_alloc: handle is NULL");
  VESIMstream s;
  if (UD_Error* e = device_stream(stream, device, "mem_alloc", &s)) return e;
  return from_vesim(vesimMemAllocAsync(handle, size, s), "mem_alloc");
}

UD_Error* mem_free(int32_t device, UD_Stream stream, UD_Handle handle) {
  if (UD_Error* e = check_device(device)) return e;
  return on_stream(stream, device, "mem_free",
                   [&](VESIMstream s) { return vesimMemFreeAsync(handle, s); });
}

UD_Error* memcpy_h2d(UD_Stream stream, UD_Handle dst, const void* src, uint64_t size) {
  return on_stream(stream, VESIM_PTR_DEVICE(dst), "memcpy_h2d",
                   [&](VESIMstream s) { return vesimMemcpyHtoDAsync(dst, src, size, s); });
}

UD_Error* memcpy_d2h(UD_Stream stream, void* dst, UD_Handle src, uint64_t size) {
  return on_stream(stream, VESIM_PTR_DEVICE(src), "memcpy_d2h",
                   [&](VESIMstream s) { return vesimMemcpyDtoHAsync(dst, src, size, s); });
}

UD_Error* memcpy_d2d(UD_Stream stream, UD_Handle dst, UD_Handle src, uint64_t size) {
  return on_stream(stream, VESIM_PTR_DEVICE(dst), "memcpy_d2d",
                   [&](VESIMstream s) { return vesimMemcpyDtoDAsync(dst, src, size, s); });
}

UD_Error* mem_set(UD_Stream stream, UD_Handle dst, uint64_t pattern, uint32_t elem_size,
                  uint64_t count) {
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: elem_size %u, expected 1, 2, 4 or 8",
                        elem_size);
  return on_stream(stream, VESIM_PTR_DEVICE(dst), "memset", [&](VESIMstream s) {
    switch (elem_size) {
      case 1: return vesimMemsetD8Async(dst, uint8_t(pattern), count, s);
      case 2: return vesimMemsetD16Async(dst, uint16_t(pattern), count, s);
      case 4: return vesimMemsetD32Async(dst, uint32_t(pattern), count, s);
      default: return vesimMemsetD64Async(dst, pattern, count, s);
    }
  });
}

UD_Error* stream_create(int32_t device, UD_Stream* stream) {
  if (UD_Error* e = check_device(device)) return e;
  if (!stream) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "stream_create: stream is NULL");
  VESIMcontext ctx;
  if (VESIMresult r = vesimCtxGet(device, &ctx)) return from_vesim(r, "stream_create");
  VESIMstream s;
  if (VESIMresult r = vesimStreamCreate(ctx, &s)) return from_vesim(r, "stream_create");
  *stream = reinterpret_cast<UD_Stream>(s);
  return nullptr;
}

UD_Error* stream_destroy(UD_Stream stream) {
  if (UD_Error* e = init_error()) return e;
  if (!stream) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "stream_destroy: stream is NULL");
  auto* s = reinterpret_cast<VESIMstream>(stream);
  // a pending failure is dropped with the stream (unidev.h allows it; what the failed work was
  // to write stays poisoned)
  return from_vesim(vesimStreamDestroy(s), "stream_destroy");
}

UD_Error* stream_synchronize(UD_Stream stream) {
  if (UD_Error* e = init_error()) return e;
  return on_stream(stream, 0, "stream_synchronize: work on the stream failed",
                   vesimStreamSynchronize);
}

UD_Error* stream_query(UD_Stream stream, int32_t* done) {
  if (UD_Error* e = init_error()) return e;
  if (!done) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "stream_query: done is NULL");
  VESIMstream s;
  if (UD_Error* e = stream_of(stream, 0, &s)) return e;
  VESIMresult r = vesimStreamQuery(s);
  *done = r != VESIM_ERROR_NOT_READY;
  return *done ? from_vesim(r, "stream_query") : nullptr;
}

// Asks vesim's allocation table: the device bits of a freed or invented pointer mean nothing.
UD_Error* mem_device(UD_Handle handle, int32_t* device) {
  if (!device) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "mem_device: device is NULL");
  VESIMdeviceptr base = 0;
  size_t size = 0;  // a 0-byte allocation holds its base
  if (!handle || ensure_init(false) || vesimMemGetAddressRange(&base, &size, handle) ||
      (handle - base >= size && handle != base))
    return ud_kit_error(UD_ERR_UNKNOWN_HANDLE, "mem_device: handle 0x%llx is not inside a live "
                        "aurora allocation (freed or never allocated)", (unsigned long long)handle);
  *device = VESIM_PTR_DEVICE(handle);
  return nullptr;
}

UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* kernel) {
  if (!op || !kernel)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: op or kernel is NULL");
  *kernel = find_kernel(ud_op_id(op), ud_dtype_id(dtype));
  return nullptr;
}

}  // namespace

UD_Error* device_stream(UD_Stream stream, int32_t device, const char* what, VESIMstream* out) {
  int sd = -1;
  if (UD_Error* e = check_device(device)) return e;
  if (UD_Error* e = stream_of(stream, device, out)) return e;
  if (vesimStreamGetDevice(*out, &sd) != VESIM_SUCCESS || sd != device)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: the stream is not a live stream of device %d", what,
                        device);
  return nullptr;
}

UD_Error* stream_of(UD_Stream stream, int32_t device, VESIMstream* out) {
  *out = reinterpret_cast<VESIMstream>(stream);
  if (stream) return nullptr;
  if (UD_Error* e = check_device(device)) return e;
  VESIMcontext ctx;
  VESIMresult r = vesimCtxGet(device, &ctx);
  if (r == VESIM_SUCCESS) r = vesimCtxGetStream(ctx, 0, out);
  return from_vesim(r, "default stream");
}

}  // namespace aurora

extern "C" UD_EXPORT const UD_Api* unidev_get_api(void) {
  using namespace aurora;
  // in unidev.h's field order
  static const UD_Api api = {
      sizeof(UD_Api), UD_ABI_MAJOR, UD_ABI_MINOR, "aurora", "0.1.0",
      ud_kit_error_code, ud_kit_error_message, ud_kit_error_destroy,
      device_count, device_properties, device_memory_info, device_synchronize,
      mem_alloc, mem_free, memcpy_h2d, memcpy_d2h, memcpy_d2d, mem_set,
      stream_create, stream_destroy, stream_synchronize, stream_query, stream_wait_event,
      event_create, event_destroy, event_record, event_query, event_synchronize, event_elapsed,
      kernel_lookup, mem_device};
  return &api;
}
