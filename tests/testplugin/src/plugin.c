/* plugin.c — the UD_Api table of 'testdev': devices, streams, events, errors.
 *
 * Streams here run every call at once, on the calling thread, which the contract allows; a real
 * device enqueues instead and reports run-time errors at the next synchronizing call. */
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

struct UD_StreamImpl {
  int32_t device;
};
struct UD_EventImpl {
  int32_t device;
};

static UD_Error* device_count(int32_t* count, const char** reason) {
  *count = PLUGIN_DEVICES;
  if (reason) *reason = NULL;
  return NULL;
}

static UD_Error* device_properties(int32_t device, UD_DeviceProperties* p) {
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  if (!p) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "device_properties: props is NULL");
  /* every field of ABI 1.0 fits in the struct a 1.0 caller passes; check struct_size before
   * writing any field added later */
  memset(p->name, 0, sizeof p->name);
  strncpy(p->name, "testdev (host memory skeleton)", sizeof p->name - 1);
  p->total_memory = PLUGIN_MEMORY;
  p->compute_units = 1;
  p->vector_width = 16;
  p->host_addressable = 1;
  p->capabilities = 0;
  return NULL;
}

static UD_Error* device_memory_info(int32_t device, uint64_t* free_b, uint64_t* total) {
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  *total = PLUGIN_MEMORY;
  *free_b = PLUGIN_MEMORY - mem_used(device);
  return NULL;
}

static UD_Error* device_synchronize(int32_t device) { return plugin_check_device(device); }

static UD_Error* stream_create(int32_t device, UD_Stream* out) {
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  *out = malloc(sizeof **out);
  if (!*out) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "stream_create: out of host memory");
  (*out)->device = device;
  return NULL;
}

static UD_Error* stream_destroy(UD_Stream s) {
  free(s);
  return NULL;
}

static UD_Error* stream_synchronize(UD_Stream s) {
  return s ? NULL : ud_kit_error(UD_ERR_INVALID_ARGUMENT, "stream_synchronize: NULL stream");
}

static UD_Error* stream_query(UD_Stream s, int32_t* done) {
  (void)s;
  *done = 1; /* work runs at enqueue, so a stream is always idle */
  return NULL;
}

static UD_Error* stream_wait_event(UD_Stream s, UD_Event e) {
  (void)s;
  (void)e;
  return NULL;
}

static UD_Error* event_create(int32_t device, UD_Event* out) {
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  *out = malloc(sizeof **out);
  if (!*out) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "event_create: out of host memory");
  (*out)->device = device;
  return NULL;
}

static UD_Error* event_destroy(UD_Event e) {
  free(e);
  return NULL;
}

static UD_Error* event_record(UD_Event e, UD_Stream s) {
  (void)e;
  (void)s;
  return NULL;
}

static UD_Error* event_query(UD_Event e, int32_t* done) {
  (void)e;
  *done = 1;
  return NULL;
}

static UD_Error* event_synchronize(UD_Event e) {
  (void)e;
  return NULL;
}

static UD_Error* event_elapsed(UD_Event a, UD_Event b, double* ms) {
  (void)a;
  (void)b;
  *ms = 0.0;
  return ud_kit_error(UD_ERR_UNSUPPORTED, "event_elapsed: testdev keeps no event timing");
}

static const UD_Api kApi = {
    .struct_size = sizeof(UD_Api),
    .abi_major = UD_ABI_MAJOR,
    .abi_minor = UD_ABI_MINOR,
    .plugin_name = "testdev",
    .plugin_version = "0.1.0",
    .error_code = ud_kit_error_code,
    .error_message = ud_kit_error_message,
    .error_destroy = ud_kit_error_destroy,
    .device_count = device_count,
    .device_properties = device_properties,
    .device_memory_info = device_memory_info,
    .device_synchronize = device_synchronize,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .memcpy_h2d = memcpy_h2d,
    .memcpy_d2h = memcpy_d2h,
    .memcpy_d2d = memcpy_d2d,
    .memset = memset_,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_synchronize = stream_synchronize,
    .stream_query = stream_query,
    .stream_wait_event = stream_wait_event,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed = event_elapsed,
    .kernel_lookup = kernel_lookup,
    .mem_device = mem_device, /* ABI 1.1 */
};

UD_EXPORT const UD_Api* unidev_get_api(void) { return &kApi; }
