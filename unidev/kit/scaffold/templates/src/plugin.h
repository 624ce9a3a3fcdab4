/* plugin.h — what the skeleton's translation units share. */
#ifndef UNIDEV_{{NAME}}_PLUGIN_H_
#define UNIDEV_{{NAME}}_PLUGIN_H_

#include <unidev/plugin_kit.h>
#include <unidev/unidev.h>

#define PLUGIN_DEVICES 1
#define PLUGIN_MEMORY (8ull << 30) /* bytes each device pretends to have */

UD_Error* plugin_check_device(int32_t device);

/* memory.c */
UD_Error* mem_check_range(const char* what, UD_Handle h, uint64_t size);
uint64_t mem_used(int32_t device);
UD_Error* mem_alloc(int32_t device, UD_Stream s, uint64_t size, UD_Handle* out);
UD_Error* mem_free(int32_t device, UD_Stream s, UD_Handle h);
UD_Error* memcpy_h2d(UD_Stream s, UD_Handle dst, const void* src, uint64_t n);
UD_Error* memcpy_d2h(UD_Stream s, void* dst, UD_Handle src, uint64_t n);
UD_Error* memcpy_d2d(UD_Stream s, UD_Handle dst, UD_Handle src, uint64_t n);
UD_Error* memset_(UD_Stream s, UD_Handle dst, uint64_t pattern, uint32_t size, uint64_t n);

/* kernels.c */
UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out);

#endif
