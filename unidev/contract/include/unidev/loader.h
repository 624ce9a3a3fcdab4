/* loader.h — the one way to load a unidev plugin: dlopen, the entry symbol and the ABI rule.
 *
 * Header-only, C17 and C++17. unidev._C, the torch adapter and the TensorFlow adapter all load
 * plugins through it, so they accept and refuse the same tables with the same messages:
 *
 *     UD_Loaded p;
 *     if (ud_loader_open("/path/libplugin.so", &p) != UD_LOAD_OK) report(p.error);
 *     else use(p.api);                     // valid for the rest of the process
 *
 * A table that came some other way (handed over as an address by Python) is checked with
 * ud_loader_check before use. Fields after 1.0 are read only through UD_API_HAS (unidev.h).
 */
#ifndef UNIDEV_LOADER_H_
#define UNIDEV_LOADER_H_

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "unidev.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { UD_LOAD_OK = 0, UD_LOAD_ERROR = 1, UD_LOAD_ABI_MISMATCH = 2 };

typedef struct UD_Loaded {
  void* dl;           /* the dlopen handle (never closed) */
  const UD_Api* api;  /* the checked table; NULL on failure */
  char error[1024];   /* on failure: what failed, naming the library path */
} UD_Loaded;

/* Every function of the ABI 1.0 table, in UD_Api order: all must be non-NULL. */
#define UD_API_1_0_FUNCTIONS(X)                                                             \
  X(error_code) X(error_message) X(error_destroy) X(device_count) X(device_properties)      \
  X(device_memory_info) X(device_synchronize) X(mem_alloc) X(mem_free) X(memcpy_h2d)        \
  X(memcpy_d2h) X(memcpy_d2d) X(memset) X(stream_create) X(stream_destroy)                  \
  X(stream_synchronize) X(stream_query) X(stream_wait_event) X(event_create)                \
  X(event_destroy) X(event_record) X(event_query) X(event_synchronize) X(event_elapsed)     \
  X(kernel_lookup)

/* The one ABI rule: api non-NULL, abi_major == UD_ABI_MAJOR, struct_size >= UD_API_SIZE_1_0,
 * every 1.0 function pointer non-NULL (named in the error). Any minor is accepted: a newer
 * plugin's extra fields are ignored, an older one's missing fields read as absent. `what` names
 * the plugin in the message written to err[n] (may be NULL when n is 0). */
static inline int ud_loader_check(const UD_Api* api, const char* what, char* err, size_t n) {
  if (!what) what = "(unnamed)";
  if (!api) {
    if (n) snprintf(err, n, "plugin %s: " UD_ENTRY_POINT "() returned NULL", what);
    return UD_LOAD_ERROR;
  }
  if (api->abi_major != UD_ABI_MAJOR) {
    if (n)
      snprintf(err, n,
               "plugin %s implements unidev ABI %d.%d but this unidev speaks ABI %d.%d; rebuild "
               "the plugin against this unidev (major versions must match)",
               what, (int)api->abi_major, (int)api->abi_minor, UD_ABI_MAJOR, UD_ABI_MINOR);
    return UD_LOAD_ABI_MISMATCH;
  }
  if (api->struct_size < UD_API_SIZE_1_0) {
    if (n)
      snprintf(err, n,
               "plugin %s has a UD_Api of %zu bytes, smaller than ABI %d.0 requires (%zu)", what,
               api->struct_size, UD_ABI_MAJOR, (size_t)UD_API_SIZE_1_0);
    return UD_LOAD_ABI_MISMATCH;
  }
#define UD_LOADER_REQUIRE_(f)                                                              \
  if (!api->f) {                                                                           \
    if (n)                                                                                 \
      snprintf(err, n, "plugin %s leaves the required UD_Api function %s NULL (ABI %d.0 "  \
               "requires every function it defines)", what, #f, UD_ABI_MAJOR);             \
    return UD_LOAD_ABI_MISMATCH;                                                           \
  }
  UD_API_1_0_FUNCTIONS(UD_LOADER_REQUIRE_)
#undef UD_LOADER_REQUIRE_
  if (n) err[0] = '\0';
  return UD_LOAD_OK;
}

/* dlopen(path, RTLD_NOW | RTLD_LOCAL), dlsym(UD_ENTRY_POINT), call it, then ud_loader_check.
 * Never dlcloses: a plugin returned OK stays loaded for the process (its threads and atexit
 * handlers may run its code until exit), and one refused after its constructors ran may have
 * started threads too. On failure out->api is NULL and out->error says what failed. */
static inline int ud_loader_open(const char* path, UD_Loaded* out) {
  out->dl = NULL;
  out->api = NULL;
  out->error[0] = '\0';
  if (!path || !*path) {
    snprintf(out->error, sizeof out->error, "cannot load plugin library: empty path");
    return UD_LOAD_ERROR;
  }
  dlerror();
  out->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!out->dl) {
    const char* e = dlerror();
    snprintf(out->error, sizeof out->error, "cannot load plugin library %s: %s", path,
             e ? e : "unknown error");
    return UD_LOAD_ERROR;
  }
  void* sym = dlsym(out->dl, UD_ENTRY_POINT);
  if (!sym) {
    snprintf(out->error, sizeof out->error,
             "%s does not export " UD_ENTRY_POINT "(); is it a unidev plugin?", path);
    return UD_LOAD_ERROR;
  }
  UD_GetApiFn get;
  memcpy(&get, &sym, sizeof get); /* object to function pointer, as POSIX dlsym allows */
  const UD_Api* api = get();
  const int rc = ud_loader_check(api, path, out->error, sizeof out->error);
  if (rc == UD_LOAD_OK) out->api = api;
  return rc;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNIDEV_LOADER_H_ */
