// device.cc — SE_InitPlugin: a TF PluggableDevice whose memory, streams and events are a unidev
// plugin's. TF aborts the process when SE_InitPlugin fails, so a plugin that cannot be used is
// reported on stderr and registered with zero devices instead of failing.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "udtf.h"

extern "C" __attribute__((visibility("default"))) const char udtf_device_type[] = UDTF_TYPE;
extern "C" __attribute__((visibility("default"))) int udtf_claimed = 0;

namespace udtf {
namespace {

std::mutex g_mu;
std::vector<UD_Stream> g_streams;

// The plugin's library is what unidev's discovery finds now (`unidev list`'s answer), asked
// through the Python that runs TF: unidev.adapters.tensorflow.resolve.library(). Python's C API
// is looked up at run time, so the adapter links no libpython. Returns "OK <path>", "OFF <why>"
// (switched off by the user) or "ERR <why>".
std::string resolve() {
  using Obj = void*;
  auto sym = [](const char* n) { return dlsym(RTLD_DEFAULT, n); };
  auto initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  auto ensure = reinterpret_cast<int (*)()>(sym("PyGILState_Ensure"));
  auto release = reinterpret_cast<void (*)(int)>(sym("PyGILState_Release"));
  auto import = reinterpret_cast<Obj (*)(const char*)>(sym("PyImport_ImportModule"));
  auto call = reinterpret_cast<Obj (*)(Obj, const char*, const char*, ...)>(
      sym("PyObject_CallMethod"));
  auto utf8 = reinterpret_cast<const char* (*)(Obj)>(sym("PyUnicode_AsUTF8"));
  auto decref = reinterpret_cast<void (*)(Obj)>(sym("Py_DecRef"));
  auto clear = reinterpret_cast<void (*)()>(sym("PyErr_Clear"));
  if (!initialized || !ensure || !release || !import || !call || !utf8 || !decref || !clear ||
      !initialized())
    return "ERR TensorFlow runs outside Python here; the adapter resolves plugins through "
           "unidev's discovery, which needs it";
  int gil = ensure();
  std::string out = "ERR unidev.adapters.tensorflow.resolve is not importable in this Python";
  if (Obj mod = import("unidev.adapters.tensorflow.resolve")) {
    Obj res = call(mod, "library", "ss", UDTF_PLUGIN, UDTF_TYPE);
    const char* text = res ? utf8(res) : nullptr;
    out = text ? text : "ERR unidev's resolver failed";
    if (res) decref(res);
    decref(mod);
  }
  clear();
  release(gil);
  return out;
}

// TF's oneDNN graph and eager rewrites treat every device whose name contains "CPU" as its
// CPU and swap in _Mkl* ops that have no kernels here, so such a type works only without them.
bool onednn_conflict() {
  const char* v = std::getenv("TF_ENABLE_ONEDNN_OPTS");
  bool off = v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0);
  return std::strstr(UDTF_TYPE, "CPU") != nullptr && !off;
}

void load(Plugin& p) {
  if (onednn_conflict()) {
    p.error = "its device type contains 'CPU', which TF's oneDNN rewrites claim; rename the "
              "plugin's tf_type or set TF_ENABLE_ONEDNN_OPTS=0";
    return;
  }
  std::string found = resolve();
  if (found.compare(0, 3, "OK ") != 0) {
    p.off = found.compare(0, 4, "OFF ") == 0;
    p.error = found.substr(found.find(' ') + 1);
    return;
  }
  const std::string lib = found.substr(3);
  void* dl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    p.error = "cannot load " + lib + ": " + (e ? e : "?") +
              " (reinstall the plugin, then run `unidev build tensorflow`)";
    return;
  }
  auto get = reinterpret_cast<UD_GetApiFn>(dlsym(dl, UD_ENTRY_POINT));
  const UD_Api* api = get ? get() : nullptr;
  if (!api) {
    p.error = lib + " has no usable " UD_ENTRY_POINT "()";
    return;
  }
  if (api->abi_major != UD_ABI_MAJOR || api->struct_size < sizeof(UD_Api)) {
    p.error = "plugin ABI " + std::to_string(api->abi_major) + "." +
              std::to_string(api->abi_minor) + " does not match this adapter's " +
              std::to_string(UD_ABI_MAJOR) + "." + std::to_string(UD_ABI_MINOR);
    return;
  }
  const void* required[] = {
      (void*)api->error_code,       (void*)api->error_message,      (void*)api->error_destroy,
      (void*)api->device_count,     (void*)api->device_memory_info, (void*)api->device_synchronize,
      (void*)api->mem_alloc,        (void*)api->mem_free,           (void*)api->memcpy_h2d,
      (void*)api->memcpy_d2h,       (void*)api->memcpy_d2d,         (void*)api->memset,
      (void*)api->stream_create,    (void*)api->stream_synchronize, (void*)api->stream_wait_event,
      (void*)api->event_create,     (void*)api->event_destroy,      (void*)api->event_record,
      (void*)api->event_query,      (void*)api->event_synchronize,  (void*)api->kernel_lookup};
  for (const void* f : required)
    if (!f) {
      p.error = "the plugin leaves a UD_Api function the TF adapter needs NULL";
      return;
    }
  int32_t n = 0;
  const char* reason = nullptr;
  UD_Error* err = api->device_count(&n, &reason);
  if (err) {
    p.error = std::string("device_count failed: ") + api->error_message(err);
    api->error_destroy(err);
    return;
  }
  if (n <= 0) {
    p.error = reason ? reason : "the plugin reports no devices";
    return;
  }
  p.api = api;
  p.devices = n;
  std::lock_guard<std::mutex> g(g_mu);
  g_streams.assign(n, nullptr);
}

// TF crashes when a second copy of an adapter registers the same platform (the installed one
// plus one on TF_PLUGGABLE_DEVICE_LIBRARY_PATH, say). The first copy loaded claims the type;
// later copies find the claim among the loaded libraries and stand down.
int claimed_elsewhere(dl_phdr_info* info, size_t, void*) {
  void* h = info->dlpi_name && *info->dlpi_name ? dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD)
                                                : nullptr;
  if (!h) return 0;
  auto* type = static_cast<const char*>(dlsym(h, "udtf_device_type"));
  auto* claimed = static_cast<const int*>(dlsym(h, "udtf_claimed"));
  int hit = type && claimed && claimed != &udtf_claimed && *claimed &&
            std::strcmp(type, UDTF_TYPE) == 0;
  dlclose(h);
  return hit;
}

}  // namespace

bool duplicate() {
  static const bool dup = [] {
    if (dl_iterate_phdr(claimed_elsewhere, nullptr)) return true;
    udtf_claimed = 1;
    return false;
  }();
  return dup;
}

Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    if (duplicate()) {
      p.error = "another copy of this adapter is already loaded";
      std::fprintf(stderr, "unidev: ignoring a second TensorFlow adapter for %s\n", UDTF_TYPE);
      return;
    }
    load(p);
    if (p.devices == 0 && !p.off)
      std::fprintf(stderr, "unidev: TensorFlow device %s is disabled: %s\n", UDTF_TYPE,
                   p.error.c_str());
  });
  return p;
}

TF_Code tf_code(UD_ErrorCode code) {
  switch (code) {
    case UD_ERR_INVALID_ARGUMENT: return TF_INVALID_ARGUMENT;
    case UD_ERR_OUT_OF_MEMORY: return TF_RESOURCE_EXHAUSTED;
    case UD_ERR_UNSUPPORTED: return TF_UNIMPLEMENTED;
    default: return TF_INTERNAL;
  }
}

bool check(UD_Error* err, TF_Status* status, const std::string& what) {
  if (!err) return true;
  const UD_Api* api = plugin().api;
  std::string msg = what + " on " UDTF_TYPE ": " + api->error_message(err);
  TF_SetStatus(status, tf_code(api->error_code(err)), msg.c_str());
  api->error_destroy(err);
  return false;
}

UD_Stream device_stream(int32_t device, TF_Status* status) {
  Plugin& p = plugin();
  if (device < 0 || device >= p.devices) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "unidev: device index out of range");
    return nullptr;
  }
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_streams[device]) {
    UD_Stream s = nullptr;
    if (!check(p.api->stream_create(device, &s), status, "stream_create")) return nullptr;
    g_streams[device] = s;
  }
  return g_streams[device];
}

}  // namespace udtf

namespace {

using udtf::check;
using udtf::plugin;

const UD_Api* api() { return plugin().api; }
UD_Handle handle(const SP_DeviceMemoryBase* m) { return reinterpret_cast<UD_Handle>(m->opaque); }

// The device's stream for callbacks that cannot report a status; failures are logged.
UD_Stream stream_or_log(const SP_Device* d, const char* what) {
  TF_Status* s = TF_NewStatus();
  UD_Stream st = udtf::device_stream(d->ordinal, s);
  if (!st) std::fprintf(stderr, "unidev %s: %s\n", what, TF_Message(s));
  TF_DeleteStatus(s);
  return st;
}

void allocate(const SP_Device* d, uint64_t size, int64_t, SP_DeviceMemoryBase* mem) {
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = nullptr;
  mem->size = 0;
  UD_Stream st = stream_or_log(d, "allocate");
  UD_Handle h = 0;
  if (!st) return;
  if (UD_Error* e = api()->mem_alloc(d->ordinal, st, size, &h)) {
    api()->error_destroy(e);  // TF reports the failed allocation as ResourceExhausted
    return;
  }
  mem->opaque = reinterpret_cast<void*>(h);
  mem->size = size;
  auto& p = plugin();
  int64_t now = p.in_use += int64_t(size);
  for (int64_t pk = p.peak; now > pk && !p.peak.compare_exchange_weak(pk, now);) {}
  for (int64_t lg = p.largest; int64_t(size) > lg && !p.largest.compare_exchange_weak(lg, size);) {}
  p.allocs++;
}

void deallocate(const SP_Device* d, SP_DeviceMemoryBase* mem) {
  if (!mem->opaque) return;
  UD_Stream st = stream_or_log(d, "deallocate");
  if (!st) return;
  if (UD_Error* e = api()->mem_free(d->ordinal, st, handle(mem))) {
    std::fprintf(stderr, "unidev deallocate: %s\n", api()->error_message(e));
    api()->error_destroy(e);
  }
  plugin().in_use -= int64_t(mem->size);
  mem->opaque = nullptr;
}

void* host_allocate(const SP_Device*, uint64_t size) {
  return std::aligned_alloc(64, (size + 63) / 64 * 64 + 64);
}
void host_deallocate(const SP_Device*, void* mem) { std::free(mem); }

TF_Bool allocator_stats(const SP_Device* d, SP_AllocatorStats* s) {
  auto& p = plugin();
  s->struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE;
  s->num_allocs = p.allocs;
  s->bytes_in_use = p.in_use;
  s->peak_bytes_in_use = p.peak;
  s->largest_alloc_size = p.largest;
  uint64_t free_b = 0, total = 0;
  UD_Error* e = api()->device_memory_info(d->ordinal, &free_b, &total);
  if (e) api()->error_destroy(e);
  s->has_bytes_limit = e ? 0 : 1;
  s->bytes_limit = int64_t(total);
  return true;
}

TF_Bool memory_usage(const SP_Device* d, int64_t* free_b, int64_t* total) {
  uint64_t f = 0, t = 0;
  if (UD_Error* e = api()->device_memory_info(d->ordinal, &f, &t)) {
    api()->error_destroy(e);
    return false;
  }
  *free_b = int64_t(f);
  *total = int64_t(t);
  return true;
}

void create_stream(const SP_Device* d, SP_Stream* out, TF_Status* status) {
  UD_Stream st = udtf::device_stream(d->ordinal, status);
  if (!st) return;
  *out = new (std::nothrow) SP_Stream_st{st, d->ordinal};
  if (!*out) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "unidev: out of host memory");
}
void destroy_stream(const SP_Device*, SP_Stream s) { delete s; }

void stream_dependency(const SP_Device*, SP_Stream dependent, SP_Stream other, TF_Status* status) {
  if (dependent->stream == other->stream) return;  // one in-order stream: already ordered
  UD_Event ev = nullptr;
  if (!check(api()->event_create(other->device, &ev), status, "event_create")) return;
  if (check(api()->event_record(ev, other->stream), status, "event_record"))
    check(api()->stream_wait_event(dependent->stream, ev), status, "stream_wait_event");
  api()->event_destroy(ev);
}

void stream_status(const SP_Device*, SP_Stream, TF_Status* status) {
  TF_SetStatus(status, TF_OK, "");
}

void create_event(const SP_Device* d, SP_Event* out, TF_Status* status) {
  UD_Event ev = nullptr;
  if (!check(api()->event_create(d->ordinal, &ev), status, "event_create")) return;
  *out = new (std::nothrow) SP_Event_st{ev};
}
void destroy_event(const SP_Device*, SP_Event e) {
  if (!e) return;
  if (UD_Error* err = api()->event_destroy(e->event)) api()->error_destroy(err);
  delete e;
}
SE_EventStatus event_status(const SP_Device*, SP_Event e) {
  int32_t done = 0;
  if (UD_Error* err = api()->event_query(e->event, &done)) {
    api()->error_destroy(err);
    return SE_EVENT_ERROR;
  }
  return done ? SE_EVENT_COMPLETE : SE_EVENT_PENDING;
}
void record_event(const SP_Device*, SP_Stream s, SP_Event e, TF_Status* status) {
  check(api()->event_record(e->event, s->stream), status, "event_record");
}
void wait_event(const SP_Device* const, SP_Stream s, SP_Event e, TF_Status* const status) {
  check(api()->stream_wait_event(s->stream, e->event), status, "stream_wait_event");
}
void block_for_event(const SP_Device*, SP_Event e, TF_Status* status) {
  check(api()->event_synchronize(e->event), status, "event_synchronize");
}
void block_until_done(const SP_Device*, SP_Stream s, TF_Status* status) {
  check(api()->stream_synchronize(s->stream), status, "stream_synchronize");
}
void synchronize_all(const SP_Device* d, TF_Status* status) {
  check(api()->device_synchronize(d->ordinal), status, "device_synchronize");
}

void memcpy_dtoh(const SP_Device*, SP_Stream s, void* dst, const SP_DeviceMemoryBase* src,
                 uint64_t size, TF_Status* status) {
  check(api()->memcpy_d2h(s->stream, dst, handle(src), size), status, "memcpy_d2h");
}
void memcpy_htod(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst, const void* src,
                 uint64_t size, TF_Status* status) {
  check(api()->memcpy_h2d(s->stream, handle(dst), src, size), status, "memcpy_h2d");
}
// Copies between two devices of a plugin that cannot copy across devices go through the host:
// the contract does not say which device a handle belongs to, so the destination is tried on
// each other device's stream until one accepts it.
void staged_dtod(UD_Stream src_stream, int32_t src_dev, UD_Handle dst, UD_Handle src,
                 uint64_t size, TF_Status* status) {
  std::vector<char> buf(size);
  if (!check(api()->memcpy_d2h(src_stream, buf.data(), src, size), status, "memcpy_d2d") ||
      !check(api()->stream_synchronize(src_stream), status, "memcpy_d2d"))
    return;
  for (int32_t d = 0; d < plugin().devices; d++) {
    UD_Stream st = d == src_dev ? nullptr : udtf::device_stream(d, status);
    if (!st) continue;
    UD_Error* e = api()->memcpy_h2d(st, dst, buf.data(), size);
    if (!e) {
      check(api()->stream_synchronize(st), status, "memcpy_d2d");
      return;
    }
    api()->error_destroy(e);
  }
  TF_SetStatus(status, TF_INTERNAL, "memcpy_d2d on " UDTF_TYPE ": no device accepts the target");
}

void dtod(UD_Stream st, int32_t dev, UD_Handle dst, UD_Handle src, uint64_t size, bool sync,
          TF_Status* status) {
  UD_Error* e = api()->memcpy_d2d(st, dst, src, size);
  if (e && plugin().devices > 1 && api()->error_code(e) == UD_ERR_INVALID_ARGUMENT) {
    api()->error_destroy(e);
    return staged_dtod(st, dev, dst, src, size, status);
  }
  if (check(e, status, "memcpy_d2d") && sync)
    check(api()->stream_synchronize(st), status, "memcpy_d2d");
}

void memcpy_dtod(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst,
                 const SP_DeviceMemoryBase* src, uint64_t size, TF_Status* status) {
  dtod(s->stream, s->device, handle(dst), handle(src), size, false, status);
}
// The synchronous copies run on the device's stream, so they follow all work enqueued before.
void sync_dtoh(const SP_Device* d, void* dst, const SP_DeviceMemoryBase* src, uint64_t size,
               TF_Status* status) {
  UD_Stream st = udtf::device_stream(d->ordinal, status);
  if (st && check(api()->memcpy_d2h(st, dst, handle(src), size), status, "memcpy_d2h"))
    check(api()->stream_synchronize(st), status, "memcpy_d2h");
}
void sync_htod(const SP_Device* d, SP_DeviceMemoryBase* dst, const void* src, uint64_t size,
               TF_Status* status) {
  UD_Stream st = udtf::device_stream(d->ordinal, status);
  if (st && check(api()->memcpy_h2d(st, handle(dst), src, size), status, "memcpy_h2d"))
    check(api()->stream_synchronize(st), status, "memcpy_h2d");
}
void sync_dtod(const SP_Device* d, SP_DeviceMemoryBase* dst, const SP_DeviceMemoryBase* src,
               uint64_t size, TF_Status* status) {
  if (UD_Stream st = udtf::device_stream(d->ordinal, status))
    dtod(st, d->ordinal, handle(dst), handle(src), size, true, status);
}
void fill(SP_Stream s, SP_DeviceMemoryBase* dst, uint64_t pattern, uint32_t elem, uint64_t bytes,
          TF_Status* status) {
  check(api()->memset(s->stream, handle(dst), pattern, elem, bytes / elem), status, "memset");
}
void mem_zero(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst, uint64_t size,
              TF_Status* status) {
  fill(s, dst, 0, 1, size, status);
}
void memset8(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst, uint8_t pattern,
             uint64_t size, TF_Status* status) {
  fill(s, dst, pattern, 1, size, status);
}
void memset32(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst, uint32_t pattern,
              uint64_t size, TF_Status* status) {
  fill(s, dst, pattern, 4, size, status);
}

// The contract has no host callbacks: run it once the stream has drained, on the calling thread.
TF_Bool host_callback(const SP_Device*, SP_Stream s, SE_StatusCallbackFn fn, void* arg) {
  if (UD_Error* e = api()->stream_synchronize(s->stream)) {
    std::fprintf(stderr, "unidev host_callback: %s\n", api()->error_message(e));
    api()->error_destroy(e);
    return false;
  }
  TF_Status* st = TF_NewStatus();
  fn(arg, st);
  TF_DeleteStatus(st);
  return true;
}

void create_executor(const SP_Platform*, SE_CreateStreamExecutorParams* params, TF_Status*) {
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = allocate;
  se->deallocate = deallocate;
  se->host_memory_allocate = host_allocate;
  se->host_memory_deallocate = host_deallocate;
  se->get_allocator_stats = allocator_stats;
  se->device_memory_usage = memory_usage;
  se->create_stream = create_stream;
  se->destroy_stream = destroy_stream;
  se->create_stream_dependency = stream_dependency;
  se->get_stream_status = stream_status;
  se->create_event = create_event;
  se->destroy_event = destroy_event;
  se->get_event_status = event_status;
  se->record_event = record_event;
  se->wait_for_event = wait_event;
  se->memcpy_dtoh = memcpy_dtoh;
  se->memcpy_htod = memcpy_htod;
  se->memcpy_dtod = memcpy_dtod;
  se->sync_memcpy_dtoh = sync_dtoh;
  se->sync_memcpy_htod = sync_htod;
  se->sync_memcpy_dtod = sync_dtod;
  se->block_host_for_event = block_for_event;
  se->block_host_until_done = block_until_done;
  se->synchronize_all_activity = synchronize_all;
  se->mem_zero = mem_zero;
  se->memset = memset8;
  se->memset32 = memset32;
  se->host_callback = host_callback;
}
void destroy_executor(const SP_Platform*, SP_StreamExecutor*) {}

void device_count(const SP_Platform*, int* count, TF_Status*) { *count = plugin().devices; }

void create_device(const SP_Platform*, SE_CreateDeviceParams* params, TF_Status* status) {
  SP_Device* d = params->device;
  d->struct_size = SP_DEVICE_STRUCT_SIZE;
  d->ordinal = params->ordinal;
  if (params->ordinal < 0 || params->ordinal >= plugin().devices)
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "unidev: no such device");
}
void destroy_device(const SP_Platform*, SP_Device*) {}
void create_device_fns(const SP_Platform*, SE_CreateDeviceFnsParams* params, TF_Status*) {
  params->device_fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
}
void destroy_device_fns(const SP_Platform*, SP_DeviceFns*) {}
void destroy_platform(SP_Platform*) {}
void destroy_platform_fns(SP_PlatformFns*) {}

}  // namespace

extern "C" __attribute__((visibility("default"))) void SE_InitPlugin(
    SE_PlatformRegistrationParams* params, TF_Status* status) {
  plugin();  // loads and validates the plugin; failures leave zero devices, never an error
  params->platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  // A duplicate registers an inert platform under a name of its own (letters from its address).
  static std::string name = [] {
    if (!udtf::duplicate()) return std::string(UDTF_TYPE);
    std::string n = "UNIDEV_DUPLICATE_" UDTF_TYPE "_";
    for (uintptr_t a = reinterpret_cast<uintptr_t>(&udtf_claimed) >> 4; a; a /= 26)
      n += char('A' + a % 26);
    return n;
  }();
  params->platform->name = name.c_str();
  params->platform->type = name.c_str();
  params->platform->supports_unified_memory = false;
  // TF's BFC allocator sub-allocates from large plugin allocations (handle + offset); growth
  // mode asks the plugin for memory only as it is needed.
  params->platform->use_bfc_allocator = true;
  params->platform->force_memory_growth = true;
  SP_PlatformFns* f = params->platform_fns;
  f->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  f->get_device_count = device_count;
  f->create_device = create_device;
  f->destroy_device = destroy_device;
  f->create_device_fns = create_device_fns;
  f->destroy_device_fns = destroy_device_fns;
  f->create_stream_executor = create_executor;
  f->destroy_stream_executor = destroy_executor;
  params->destroy_platform = destroy_platform;
  params->destroy_platform_fns = destroy_platform_fns;
  TF_SetStatus(status, TF_OK, "");
}
