/* memory.c — host allocations behind opaque handles, with a table of live ranges so that a
 * freed, foreign or out-of-range handle gets an error instead of a wild access. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

typedef struct {
  uint64_t base, size;
  int32_t device;
} Range;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Range* g_ranges;
static size_t g_count, g_cap;
static uint64_t g_used[PLUGIN_DEVICES > 0 ? PLUGIN_DEVICES : 1];

/* Index of the live range holding [h, h + size), or -1. Caller holds g_mu. */
static long find(uint64_t h, uint64_t size) {
  for (size_t i = 0; i < g_count; i++) {
    const Range* r = &g_ranges[i];
    if (h >= r->base && h - r->base <= r->size && size <= r->size - (h - r->base)) return (long)i;
  }
  return -1;
}

UD_Error* mem_check_range(const char* what, UD_Handle h, uint64_t size) {
  pthread_mutex_lock(&g_mu);
  long i = find(h, size);
  pthread_mutex_unlock(&g_mu);
  if (i < 0)
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS,
                        "%s: %llu bytes at handle 0x%llx are not inside a live allocation", what,
                        (unsigned long long)size, (unsigned long long)h);
  return NULL;
}

uint64_t mem_used(int32_t device) {
  pthread_mutex_lock(&g_mu);
  uint64_t u = g_used[device];
  pthread_mutex_unlock(&g_mu);
  return u;
}

UD_Error* mem_alloc(int32_t device, UD_Stream s, uint64_t size, UD_Handle* out) {
  (void)s;
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  if (!out) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "mem_alloc: handle pointer is NULL");
  pthread_mutex_lock(&g_mu);
  int full = size > PLUGIN_MEMORY - g_used[device];
  pthread_mutex_unlock(&g_mu);
  if (full)
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: %llu bytes requested, %llu free",
                        (unsigned long long)size,
                        (unsigned long long)(PLUGIN_MEMORY - mem_used(device)));
  /* round up so that size 0 still gets a unique, 64-byte aligned block */
  void* p = aligned_alloc(64, ((size + 63) / 64) * 64 + 64);
  if (!p) return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: host allocation failed");
  pthread_mutex_lock(&g_mu);
  if (g_count == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 64;
    Range* r = realloc(g_ranges, cap * sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&g_mu);
      free(p);
      return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: allocation table full");
    }
    g_ranges = r;
    g_cap = cap;
  }
  g_ranges[g_count++] = (Range){(uint64_t)(uintptr_t)p, size, device};
  g_used[device] += size;
  pthread_mutex_unlock(&g_mu);
  *out = (UD_Handle)(uintptr_t)p;
  return NULL;
}

UD_Error* mem_free(int32_t device, UD_Stream s, UD_Handle h) {
  (void)s;
  UD_Error* e = plugin_check_device(device);
  if (e) return e;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_count; i++) {
    if (g_ranges[i].base == h && g_ranges[i].device == device) {
      g_used[device] -= g_ranges[i].size;
      g_ranges[i] = g_ranges[--g_count];
      pthread_mutex_unlock(&g_mu);
      free((void*)(uintptr_t)h);
      return NULL;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ud_kit_error(UD_ERR_UNKNOWN_HANDLE,
                      "mem_free: 0x%llx is not a live allocation of device %d (freed twice, or "
                      "an offset handle?)", (unsigned long long)h, device);
}

/* Which device allocated the live allocation holding `h` (its base, or an offset inside it; a
 * 0-byte allocation holds only its base). */
UD_Error* mem_device(UD_Handle h, int32_t* device) {
  if (!device) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "mem_device: device pointer is NULL");
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_count; i++) {
    const Range* r = &g_ranges[i];
    if (h == r->base || (h > r->base && h - r->base < r->size)) {
      *device = r->device;
      pthread_mutex_unlock(&g_mu);
      return NULL;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ud_kit_error(UD_ERR_UNKNOWN_HANDLE,
                      "mem_device: 0x%llx is not inside a live allocation (freed, or never "
                      "allocated)", (unsigned long long)h);
}

UD_Error* memcpy_h2d(UD_Stream s, UD_Handle dst, const void* src, uint64_t n) {
  (void)s;
  UD_Error* e = mem_check_range("memcpy_h2d", dst, n);
  if (!e && n) memcpy((void*)(uintptr_t)dst, src, n);
  return e;
}

UD_Error* memcpy_d2h(UD_Stream s, void* dst, UD_Handle src, uint64_t n) {
  (void)s;
  UD_Error* e = mem_check_range("memcpy_d2h", src, n);
  if (!e && n) memcpy(dst, (const void*)(uintptr_t)src, n);
  return e;
}

UD_Error* memcpy_d2d(UD_Stream s, UD_Handle dst, UD_Handle src, uint64_t n) {
  (void)s;
  UD_Error* e = mem_check_range("memcpy_d2d (destination)", dst, n);
  if (!e) e = mem_check_range("memcpy_d2d (source)", src, n);
  if (!e && n) memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return e;
}

UD_Error* memset_(UD_Stream s, UD_Handle dst, uint64_t pattern, uint32_t size, uint64_t n) {
  (void)s;
  if (size != 1 && size != 2 && size != 4 && size != 8)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: elem_size %u, expected 1, 2, 4 or 8",
                        size);
  if (n > UINT64_MAX / size)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "memset: %llu elements overflow",
                        (unsigned long long)n);
  UD_Error* e = mem_check_range("memset", dst, (uint64_t)size * n);
  if (e) return e;
  unsigned char* p = (unsigned char*)(uintptr_t)dst;
  for (uint64_t i = 0; i < n; i++) memcpy(p + i * size, &pattern, size); /* little endian */
  return NULL;
}
