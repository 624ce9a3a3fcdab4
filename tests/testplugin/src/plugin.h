/* plugin.h — what the skeleton's translation units share. */
#ifndef UNIDEV_TESTDEV_PLUGIN_H_
#define UNIDEV_TESTDEV_PLUGIN_H_

#include <unidev/plugin_kit.h> /* unidev.h, the generated ops.h and the kit's helpers */

#ifndef PLUGIN_DEVICES
#define PLUGIN_DEVICES 1 /* how many devices (a build may -D another count) */
#endif
#define PLUGIN_MEMORY (8ull << 30) /* bytes each device pretends to have */
/* the dtypes the kernels implement (UD_DTM_* of ops.h); lookup also honours each op's own */
#define PLUGIN_DTYPES UD_DTM_ALL

static inline UD_Error* plugin_check_device(int32_t device) {
  if (device < 0 || device >= PLUGIN_DEVICES)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "device index %d out of range [0, %d)", device,
                        PLUGIN_DEVICES);
  return NULL;
}

/* memory.c */
UD_Error* mem_check_range(const char* what, UD_Handle h, uint64_t size);
uint64_t mem_used(int32_t device);
UD_Error* mem_alloc(int32_t device, UD_Stream s, uint64_t size, UD_Handle* out);
UD_Error* mem_free(int32_t device, UD_Stream s, UD_Handle h);
UD_Error* mem_device(UD_Handle h, int32_t* device);
UD_Error* memcpy_h2d(UD_Stream s, UD_Handle dst, const void* src, uint64_t n);
UD_Error* memcpy_d2h(UD_Stream s, void* dst, UD_Handle src, uint64_t n);
UD_Error* memcpy_d2d(UD_Stream s, UD_Handle dst, UD_Handle src, uint64_t n);
UD_Error* memset_(UD_Stream s, UD_Handle dst, uint64_t pattern, uint32_t size, uint64_t n);

/* kernels.c */
UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out);

#endif
