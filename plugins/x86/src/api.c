/* api.c — the UD_Api table of unidev-x86: one device (the host), streams and events (memory is
 * allocations.c).
 * Streams run work at enqueue (see x86.h), so a stream is always idle when a call returns and an
 * event is complete from the moment it is recorded. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "x86.h"

#define UD_X86_VERSION "0.1.0"
#ifndef UD_PLUGIN_NAME /* the arm64 plugin compiles this file with its own name and ISA */
#define UD_PLUGIN_NAME "x86"
#define UD_PLUGIN_ISA "AVX2"
#define UD_PLUGIN_VECTOR_BYTES 32
#endif

/* OpenMP kernels (src/dense) enter through ud_x86_omp_run themselves (dense_common.h) */
UD_Error* ud_x86_kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* kernel);
UD_Error* ud_x86_mem_alloc(int32_t device, UD_Stream stream, uint64_t size, UD_Handle* handle);
UD_Error* ud_x86_mem_free(int32_t device, UD_Stream stream, UD_Handle handle);
UD_Error* ud_x86_memcpy_h2d(UD_Stream stream, UD_Handle dst, const void* src, uint64_t size);
UD_Error* ud_x86_memcpy_d2h(UD_Stream stream, void* dst, UD_Handle src, uint64_t size);
UD_Error* ud_x86_memcpy_d2d(UD_Stream stream, UD_Handle dst, UD_Handle src, uint64_t size);
UD_Error* ud_x86_memset(UD_Stream stream, UD_Handle dst, uint64_t pattern, uint32_t elem_size,
                        uint64_t count);
UD_Error* ud_x86_mem_device(UD_Handle handle, int32_t* device);
UD_Error* ud_x86_kernel_compile(const char* op, UD_DType dtype, const UD_Attr* attrs,
                                int32_t num_attrs, UD_KernelFn* kernel); /* src/program.c */

UD_Error* ud_x86_check_device(const char* fn, int32_t device) {
  UD_KIT_REQUIRE(device == 0, UD_ERR_INVALID_ARGUMENT,
                 "%s: device %d does not exist (%s has device 0)", fn, device, UD_PLUGIN_NAME);
  return NULL;
}

/* ---- devices ---- */
static UD_Error* device_count(int32_t* count, const char** reason) {
  UD_KIT_REQUIRE(count, UD_ERR_INVALID_ARGUMENT, "device_count: 'count' is NULL");
  *count = 1;
  if (reason) *reason = NULL;
  return NULL;
}

static UD_Error* device_properties(int32_t device, UD_DeviceProperties* props) {
  UD_KIT_TRY(ud_x86_check_device("device_properties", device));
  UD_KIT_REQUIRE(props && props->struct_size >= sizeof(UD_DeviceProperties),
                 UD_ERR_INVALID_ARGUMENT,
                 "device_properties: 'props' is NULL or its struct_size is too small");
  __builtin_cpu_init(); /* plugins/arm64's x86_api_shim.h answers "no AVX-512" on aarch64 */
  const int avx512 = __builtin_cpu_supports("avx512f");
  snprintf(props->name, sizeof props->name, "%s host CPU (%s)", UD_PLUGIN_NAME,
           avx512 ? "AVX-512" : UD_PLUGIN_ISA);
  props->total_memory = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  props->compute_units = ud_x86_threads();
  props->vector_width = avx512 ? 64 : UD_PLUGIN_VECTOR_BYTES;
  props->host_addressable = 1;
  props->capabilities = UD_CAP_EVENT_TIMING;
  return NULL;
}

static UD_Error* device_memory_info(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes) {
  UD_KIT_TRY(ud_x86_check_device("device_memory_info", device));
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  if (free_bytes) *free_bytes = (uint64_t)sysconf(_SC_AVPHYS_PAGES) * page;
  if (total_bytes) *total_bytes = (uint64_t)sysconf(_SC_PHYS_PAGES) * page;
  return NULL;
}

static UD_Error* device_synchronize(int32_t device) {
  return ud_x86_check_device("device_synchronize", device);
}

/* ---- streams and events: small tagged objects (work never waits, see above) ---- */
enum { UD_STREAM_MAGIC = 0x5354524d, UD_EVENT_MAGIC = 0x45564e54 };
struct UD_EventImpl {
  uint32_t magic;
  int recorded;        /* events: the stream has passed the event */
  struct timespec when; /* events: when it did */
};
typedef struct UD_EventImpl Object; /* a stream is the same object, its UD_Stream a cast */

/* A NULL stream is the device's default stream; a NULL event is an error. */
static UD_Error* check(const char* fn, const void* p, uint32_t magic) {
  UD_KIT_REQUIRE((!p && magic == UD_STREAM_MAGIC) || (p && ((const Object*)p)->magic == magic),
                 UD_ERR_INVALID_ARGUMENT, "%s: not a live x86 %s", fn,
                 magic == UD_STREAM_MAGIC ? "stream" : "event");
  return NULL;
}

static UD_Error* create(const char* fn, int32_t device, void* out, uint32_t magic) {
  UD_KIT_TRY(ud_x86_check_device(fn, device));
  UD_KIT_REQUIRE(out, UD_ERR_INVALID_ARGUMENT, "%s: the output pointer is NULL", fn);
  Object* o = calloc(1, sizeof *o);
  if (!o) return ud_kit_host_oom_error();
  o->magic = magic;
  *(Object**)out = o;
  return NULL;
}

static UD_Error* destroy(const char* fn, void* p, uint32_t magic) {
  UD_KIT_REQUIRE(p, UD_ERR_INVALID_ARGUMENT, "%s: NULL handle", fn);
  UD_KIT_TRY(check(fn, p, magic));
  ((Object*)p)->magic = 0;
  free(p);
  return NULL;
}

static UD_Error* query(const char* fn, const void* p, uint32_t magic, int32_t* done) {
  UD_KIT_TRY(check(fn, p, magic));
  UD_KIT_REQUIRE(done, UD_ERR_INVALID_ARGUMENT, "%s: 'done' is NULL", fn);
  *done = 1;
  return NULL;
}

/* create, destroy, synchronize and query of streams and events */
#define UD_OBJECT_FNS(KIND, TYPE, MAGIC)                                          \
  static UD_Error* KIND##_create(int32_t device, TYPE* out) {                     \
    return create(#KIND "_create", device, out, MAGIC);                           \
  }                                                                               \
  static UD_Error* KIND##_destroy(TYPE o) { return destroy(#KIND "_destroy", o, MAGIC); } \
  static UD_Error* KIND##_synchronize(TYPE o) { return check(#KIND "_synchronize", o, MAGIC); } \
  static UD_Error* KIND##_query(TYPE o, int32_t* done) {                          \
    return query(#KIND "_query", o, MAGIC, done);                                 \
  }
UD_OBJECT_FNS(stream, UD_Stream, UD_STREAM_MAGIC)
UD_OBJECT_FNS(event, UD_Event, UD_EVENT_MAGIC)

static UD_Error* stream_wait_event(UD_Stream s, UD_Event e) {
  UD_KIT_TRY(check("stream_wait_event", s, UD_STREAM_MAGIC));
  return check("stream_wait_event", e, UD_EVENT_MAGIC);
}
static UD_Error* event_record(UD_Event e, UD_Stream s) {
  UD_KIT_TRY(check("event_record", e, UD_EVENT_MAGIC));
  UD_KIT_TRY(check("event_record", s, UD_STREAM_MAGIC));
  clock_gettime(CLOCK_MONOTONIC, &e->when);
  e->recorded = 1;
  return NULL;
}
static UD_Error* event_elapsed(UD_Event start, UD_Event end, double* ms) {
  UD_KIT_TRY(check("event_elapsed", start, UD_EVENT_MAGIC));
  UD_KIT_TRY(check("event_elapsed", end, UD_EVENT_MAGIC));
  UD_KIT_REQUIRE(ms, UD_ERR_INVALID_ARGUMENT, "event_elapsed: 'milliseconds' is NULL");
  UD_KIT_REQUIRE(start->recorded && end->recorded, UD_ERR_INVALID_ARGUMENT,
                 "event_elapsed: the %s event was never recorded", start->recorded ? "end" :
                 "start");
  *ms = (double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
        (double)(end->when.tv_nsec - start->when.tv_nsec) * 1e-6;
  return NULL;
}

/* in UD_Api's order: header, errors, devices, memory, streams, events, kernels */
static const UD_Api g_api = {
    sizeof(UD_Api), UD_ABI_MAJOR, UD_ABI_MINOR, UD_PLUGIN_NAME, UD_X86_VERSION,
    ud_kit_error_code, ud_kit_error_message, ud_kit_error_destroy,
    device_count, device_properties, device_memory_info, device_synchronize,
    ud_x86_mem_alloc, ud_x86_mem_free, ud_x86_memcpy_h2d, ud_x86_memcpy_d2h, ud_x86_memcpy_d2d,
    ud_x86_memset,
    stream_create, stream_destroy, stream_synchronize, stream_query, stream_wait_event,
    event_create, event_destroy, event_record, event_query, event_synchronize, event_elapsed,
    ud_x86_kernel_lookup,
    ud_x86_mem_device,     /* 1.1 */
    ud_x86_kernel_compile, /* 1.2 */
};

UD_EXPORT const UD_Api* unidev_get_api(void) { return &g_api; }
