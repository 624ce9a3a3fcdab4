/* allocations.c — host memory for unidev-x86: 64-byte aligned allocations recorded in a sorted
 * table, so that every copy, memset and kernel operand is checked against a live allocation
 * (unknown, freed and offset handles and out-of-bounds views are errors, not corruption). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "x86.h"

#define UD_ALIGN 64
/* From 4 MB on (numpy's threshold), allocations are 2 MB aligned and asked for transparent huge
 * pages: streaming a 64 MB array then reads ~1.3x faster (no 4 KB page walks), and 4 MB operands
 * of L3-resident work no longer overflow the TLB. */
#define UD_HUGE ((uint64_t)1 << 22)

typedef struct {
  uintptr_t base;
  uint64_t size; /* as requested; 0-byte allocations hold no accessible byte */
} Block;

static struct {
  pthread_mutex_t lock;
  Block* blocks; /* sorted by base */
  size_t n, cap;
} g_mem = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* Index of the last block whose base is <= addr, or -1. Call with the lock held. */
static ptrdiff_t find(uintptr_t addr) {
  size_t lo = 0, hi = g_mem.n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_mem.blocks[mid].base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

/* The live block holding addr (a 0-byte block holds only its base), or NULL. Lock held. */
static const Block* holding(uintptr_t addr) {
  const ptrdiff_t i = find(addr);
  const Block* b = i >= 0 ? &g_mem.blocks[i] : NULL;
  return b && addr - b->base < (b->size ? b->size : 1) ? b : NULL;
}

UD_Error* ud_x86_check_range(const char* op, const char* arg, uint64_t addr, uint64_t bytes) {
  if (bytes == 0) return NULL;
  pthread_mutex_lock(&g_mem.lock);
  const Block* b = holding((uintptr_t)addr);
  const uint64_t room = b ? b->size - (addr - b->base) : 0;
  pthread_mutex_unlock(&g_mem.lock);
  if (!b)
    return ud_kit_error(UD_ERR_UNKNOWN_HANDLE,
                        "%s: '%s' at 0x%llx is not inside a live allocation of this plugin", op,
                        arg, (unsigned long long)addr);
  if (bytes > room)
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS,
                        "%s: '%s' needs %llu bytes at 0x%llx, its allocation has %llu left", op,
                        arg, (unsigned long long)bytes, (unsigned long long)addr,
                        (unsigned long long)room);
  return NULL;
}

int ud_x86_first_outside(const UD_KernelArgs* a) {
  int bad = -1;
  pthread_mutex_lock(&g_mem.lock); /* once per call: tiny ops pay for every lock */
  for (int i = 0; bad < 0 && i < a->num_inputs + a->num_outputs; i++) {
    const UD_Tensor* t = i < a->num_inputs ? &a->inputs[i] : &a->outputs[i - a->num_inputs];
    const uint64_t bytes = t->ndim < 0 ? 0 : ud_kit_extent(t);
    const Block* b = bytes ? holding((uintptr_t)t->handle) : NULL;
    if (bytes && (!b || bytes > b->size - (t->handle - b->base))) bad = i;
  }
  pthread_mutex_unlock(&g_mem.lock);
  return bad;
}

/* ABI 1.1: the one device owns every live allocation, offset handles inside one included. */
UD_Error* ud_x86_mem_device(UD_Handle handle, int32_t* device) {
  UD_KIT_REQUIRE(device, UD_ERR_INVALID_ARGUMENT, "mem_device: 'device' is NULL");
  pthread_mutex_lock(&g_mem.lock);
  const int known = handle && holding((uintptr_t)handle);
  pthread_mutex_unlock(&g_mem.lock);
  if (!known)
    return ud_kit_error(UD_ERR_UNKNOWN_HANDLE,
                        "mem_device: handle 0x%llx is not inside a live allocation of this "
                        "plugin (never allocated, or freed)", (unsigned long long)handle);
  *device = 0;
  return NULL;
}

UD_Error* ud_x86_mem_alloc(int32_t device, UD_Stream stream, uint64_t size, UD_Handle* handle) {
  (void)stream;
  UD_KIT_TRY(ud_x86_check_device("mem_alloc", device));
  UD_KIT_REQUIRE(handle, UD_ERR_INVALID_ARGUMENT, "mem_alloc: 'handle' is NULL");
  *handle = 0;
  const uint64_t align = size >= UD_HUGE ? (uint64_t)1 << 21 : UD_ALIGN;
  const uint64_t rounded = (size + align - 1) / align * align;
  void* p = size > (1ull << 56) ? NULL : aligned_alloc(align, rounded ? rounded : align);
  if (p && size >= UD_HUGE) madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
  if (!p)
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "mem_alloc: cannot allocate %llu host bytes",
                        (unsigned long long)size);
  pthread_mutex_lock(&g_mem.lock);
  if (g_mem.n == g_mem.cap) {
    size_t cap = g_mem.cap ? 2 * g_mem.cap : 256;
    Block* grown = realloc(g_mem.blocks, cap * sizeof(Block));
    if (!grown) {
      pthread_mutex_unlock(&g_mem.lock);
      free(p);
      return ud_kit_host_oom_error();
    }
    g_mem.blocks = grown;
    g_mem.cap = cap;
  }
  size_t at = (size_t)(find((uintptr_t)p) + 1);
  memmove(&g_mem.blocks[at + 1], &g_mem.blocks[at], (g_mem.n - at) * sizeof(Block));
  g_mem.blocks[at] = (Block){(uintptr_t)p, size};
  g_mem.n++;
  pthread_mutex_unlock(&g_mem.lock);
  *handle = (UD_Handle)(uintptr_t)p;
  return NULL;
}

UD_Error* ud_x86_mem_free(int32_t device, UD_Stream stream, UD_Handle handle) {
  (void)stream;
  UD_KIT_TRY(ud_x86_check_device("mem_free", device));
  pthread_mutex_lock(&g_mem.lock);
  ptrdiff_t i = find((uintptr_t)handle);
  int found = i >= 0 && g_mem.blocks[i].base == handle;
  if (found) {
    memmove(&g_mem.blocks[i], &g_mem.blocks[i + 1], (g_mem.n - (size_t)i - 1) * sizeof(Block));
    g_mem.n--;
  }
  pthread_mutex_unlock(&g_mem.lock);
  if (!found)
    return ud_kit_error(UD_ERR_UNKNOWN_HANDLE,
                        "mem_free: handle 0x%llx is not a live allocation of this plugin (never "
                        "allocated, already freed, or offset into an allocation)",
                        (unsigned long long)handle);
  free((void*)(uintptr_t)handle);
  return NULL;
}

/* A copy between host memory and allocations (`dev_dst`/`dev_src`: that side is a handle). */
static UD_Error* copy(const char* fn, void* dst, int dev_dst, const void* src, int dev_src,
                      uint64_t size) {
  if (dev_src) UD_KIT_TRY(ud_x86_check_range(fn, "src", (uintptr_t)src, size));
  if (dev_dst) UD_KIT_TRY(ud_x86_check_range(fn, "dst", (uintptr_t)dst, size));
  UD_KIT_REQUIRE(!size || (dst && src), UD_ERR_INVALID_ARGUMENT, "%s: NULL %s", fn,
                 dst ? "src" : "dst");
  if (size) memmove(dst, src, size);
  return NULL;
}

UD_Error* ud_x86_memcpy_h2d(UD_Stream stream, UD_Handle dst, const void* src, uint64_t size) {
  (void)stream;
  return copy("memcpy_h2d", (void*)(uintptr_t)dst, 1, src, 0, size);
}

UD_Error* ud_x86_memcpy_d2h(UD_Stream stream, void* dst, UD_Handle src, uint64_t size) {
  (void)stream;
  return copy("memcpy_d2h", dst, 0, (const void*)(uintptr_t)src, 1, size);
}

UD_Error* ud_x86_memcpy_d2d(UD_Stream stream, UD_Handle dst, UD_Handle src, uint64_t size) {
  (void)stream;
  return copy("memcpy_d2d", (void*)(uintptr_t)dst, 1, (const void*)(uintptr_t)src, 1, size);
}

UD_Error* ud_x86_memset(UD_Stream stream, UD_Handle dst, uint64_t pattern, uint32_t elem_size,
                        uint64_t count) {
  (void)stream;
  UD_KIT_REQUIRE(elem_size == 1 || elem_size == 2 || elem_size == 4 || elem_size == 8,
                 UD_ERR_INVALID_ARGUMENT, "memset: elem_size %u, expected 1, 2, 4 or 8", elem_size);
  if (count > UINT64_MAX / elem_size)
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS, "memset: %llu elements overflow",
                        (unsigned long long)count);
  UD_KIT_TRY(ud_x86_check_range("memset", "dst", dst, count * elem_size));
  if (!count) return NULL;
  uint8_t one[8]; /* the pattern's low bytes (little-endian), broadcast by the tile packer */
  memcpy(one, &pattern, sizeof one);
  char* d = (char*)(uintptr_t)dst;
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = count - done < (1u << 26) ? count - done : (1u << 26);
    ud_x86_pack[elem_size]((int64_t)n, d + done * elem_size, one, 0);
    done += n;
  }
  return NULL;
}
