// device.cc — SE_InitPlugin: a TF PluggableDevice whose memory, streams and events are a unidev
// plugin's. TF aborts the process when SE_InitPlugin fails, so a plugin that cannot be used is
// registered with zero devices instead (plugin.cc says why on stderr).
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "udtf.h"

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
// The device owning an allocation (or an offset inside it), from the plugin (ABI 1.1).
bool owner(UD_Handle h, const char* what, int32_t* device, TF_Status* status) {
  return check(api()->mem_device(h, device), status, std::string("memcpy_d2d: mem_device(") +
                                                         what + ")");
}

// A copy between two devices of a plugin that cannot copy across devices goes through the host:
// out of the source's device, into the destination's, each on its device's stream.
void staged_dtod(int32_t src_dev, int32_t dst_dev, UD_Handle dst, UD_Handle src, uint64_t size,
                 TF_Status* status) {
  std::vector<char> buf(size);
  UD_Stream from = udtf::device_stream(src_dev, status);
  if (!from || !check(api()->memcpy_d2h(from, buf.data(), src, size), status, "memcpy_d2d") ||
      !check(api()->stream_synchronize(from), status, "memcpy_d2d"))
    return;
  UD_Stream to = udtf::device_stream(dst_dev, status);
  if (to && check(api()->memcpy_h2d(to, dst, buf.data(), size), status, "memcpy_d2d"))
    check(api()->stream_synchronize(to), status, "memcpy_d2d");
}

// TF copies between two devices of one platform with memcpy_dtod on one of them. A plugin that
// refuses it (an invalid argument: another device's handle) is asked which devices own the two
// buffers (mem_device, ABI 1.1); a 1.0 plugin cannot say, so the copy fails with the reason.
void dtod(UD_Stream st, UD_Handle dst, UD_Handle src, uint64_t size, bool sync,
          TF_Status* status) {
  UD_Error* e = api()->memcpy_d2d(st, dst, src, size);
  if (e && plugin().devices > 1 && api()->error_code(e) == UD_ERR_INVALID_ARGUMENT) {
    if (!UD_API_HAS(api(), mem_device)) {
      std::string msg = std::string("memcpy_d2d on " UDTF_TYPE ": ") + api()->error_message(e) +
                        "; if the buffers are on two devices, copying between them needs the "
                        "plugin's mem_device (unidev ABI 1.1), which this plugin (ABI " +
                        std::to_string(api()->abi_major) + "." +
                        std::to_string(api()->abi_minor) + ") lacks";
      api()->error_destroy(e);
      return TF_SetStatus(status, TF_INVALID_ARGUMENT, msg.c_str());
    }
    int32_t from = -1, to = -1;
    if (owner(src, "source", &from, status) && owner(dst, "destination", &to, status) &&
        from != to) {
      api()->error_destroy(e);
      return staged_dtod(from, to, dst, src, size, status);
    }
    if (TF_GetCode(status) != TF_OK) return api()->error_destroy(e);
  }
  if (check(e, status, "memcpy_d2d") && sync)
    check(api()->stream_synchronize(st), status, "memcpy_d2d");
}

void memcpy_dtod(const SP_Device*, SP_Stream s, SP_DeviceMemoryBase* dst,
                 const SP_DeviceMemoryBase* src, uint64_t size, TF_Status* status) {
  dtod(s->stream, handle(dst), handle(src), size, false, status);
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
    dtod(st, handle(dst), handle(src), size, true, status);
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
  params->platform->name = udtf::platform_name();
  params->platform->type = udtf::platform_name();
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
