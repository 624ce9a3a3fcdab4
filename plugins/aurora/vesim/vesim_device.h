/* vesim_device.h — the device-side API: what kernels running on a vesim stream may call.
 *
 * A kernel receives a VESIMkernel_ctx. It turns virtual pointers into memory only through
 * vesimDevResolve, which checks that the pointer names a live allocation of the stream's
 * device and that [ptr, ptr + bytes) lies inside it. Work is spread over the device's cores
 * with vesimDevParallelFor (real threads: at most the host's core count).
 */
#ifndef VESIM_DEVICE_H_
#define VESIM_DEVICE_H_

#include "vesim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Elements of 64 bits per VE vector register: loops are strip-mined by this length. */
#define VESIM_VL 256

/* Resolves `ptr` for reading (or reading and writing) `bytes` bytes. UNKNOWN_VPTR for a pointer
 * that is not a live allocation of this device, OUT_OF_BOUNDS if the access leaves the
 * allocation; a range holding poisoned bytes (vesim.h) fails with the poisoning failure's code.
 * The message (with `what` naming the access) is recorded for the stream. */
VESIMresult vesimDevResolve(VESIMkernel_ctx* k, VESIMdeviceptr ptr, uint64_t bytes,
                            const char* what, void** addr);

/* Resolves `ptr` for writing only: no poison check. The range is recorded first, whatever this
 * call returns: if the kernel fails (an error, a crash), the range is poisoned with its failure;
 * if it succeeds and `dense` is set (the kernel writes every byte of the range), the range's
 * poison is lifted. Resolve every output this way before anything that can fail, on the
 * kernel's own thread (not inside a vesimDevParallelFor body). */
VESIMresult vesimDevResolveOut(VESIMkernel_ctx* k, VESIMdeviceptr ptr, uint64_t bytes, int dense,
                               const char* what, void** addr);

/* Fails the kernel with `code` and a printf-style message; returns `code`. */
VESIMresult vesimDevFail(VESIMkernel_ctx* k, VESIMresult code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

int vesimDevCores(const VESIMkernel_ctx* k);
int vesimDevDevice(const VESIMkernel_ctx* k);

/* Calls body(arg, begin, end, core) over [0, n) split into at most `cores` contiguous chunks,
 * each at least `grain` long. Returns an error if a chunk crashed (the others still finish). */
typedef void (*VESIMrange_fn)(void* arg, int64_t begin, int64_t end, int core);
VESIMresult vesimDevParallelFor(VESIMkernel_ctx* k, int64_t n, int64_t grain, VESIMrange_fn body,
                                void* arg);

/* Scratch memory on the device for the kernel's lifetime (freed when it returns), 64-byte
 * aligned, contents undefined (the stream keeps freed blocks for its next kernels). Call it on
 * the kernel's own thread. NULL with an OUT_OF_MEMORY failure recorded if it cannot be had. */
void* vesimDevScratch(VESIMkernel_ctx* k, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* VESIM_DEVICE_H_ */
