/* vesim.h — an emulated NEC SX-Aurora Vector Engine runtime with VEDA's programming model.
 *
 * vesim stands in for the vendor's driver stack (VEDA over AVEO) on machines without a Vector
 * Engine. The host side of the API mirrors VEDA:
 *
 *   - vesimInit/vesimExit; devices (VESIM_DEVICES, default 1), each with 8 cores and
 *     VESIM_MEMORY bytes (default 48 GiB, host memory used only as it is touched)
 *   - one context per device: OMP mode (one stream using every core) or SCALAR mode (a stream
 *     per core); streams are in-order FIFO queues, each served by its own worker thread; a
 *     call that enqueues waits while 1024 tasks of its stream are still unfinished
 *   - virtual device pointers (VESIMdeviceptr) in VEDA's layout:
 *         bits 63..59 device | bits 58..37 allocation index | bits 36..0 byte offset
 *     They are not host addresses. Index 0 is never valid. Only the device side (a stream
 *     worker) turns a pointer into memory, through the allocation table, with bounds checks.
 *   - stream-ordered vesimMemAllocAsync/vesimMemFreeAsync, copies host<->device and
 *     device<->device (sync and async), memset of 8/16/32/64-bit patterns, packed small copies,
 *     kernel launch of a function with an argument pack, stream query/synchronize/callbacks
 *   - VEDA-style error codes with names and messages. Work that fails on a stream (a bounds
 *     violation, a kernel returning an error, a kernel that crashes with SIGSEGV/SIGBUS/SIGFPE)
 *     is recorded on that stream, and only there (see "Errors of enqueued work" below).
 *   - poisoned memory: what failed work was to write reads back as that failure, not as a value.
 *   - optional latency model (VESIM_LATENCY=veda), statistics, a profiler callback, and
 *     VESIM_PROFILE=1: a table of every task name's calls, device time and CPU time (the
 *     worker's and the helper cores' in its parallel regions) on stderr at exit.
 *
 * Kernels (the code that "runs on the VE") use the device-side API in vesim_device.h.
 * All functions are thread-safe.
 */
#ifndef VESIM_H_
#define VESIM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum VESIMresult {
  VESIM_SUCCESS = 0,
  VESIM_ERROR_INVALID_VALUE = 1,
  VESIM_ERROR_OUT_OF_MEMORY = 2,
  VESIM_ERROR_OUT_OF_BOUNDS = 3,
  VESIM_ERROR_UNKNOWN_VPTR = 4,
  VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED = 5,
  VESIM_ERROR_NOT_INITIALIZED = 6,
  VESIM_ERROR_INVALID_DEVICE = 7,
  VESIM_ERROR_INVALID_STREAM = 8,
  VESIM_ERROR_INVALID_CONTEXT = 9,
  VESIM_ERROR_CONTEXT_EXISTS = 10,
  VESIM_ERROR_NOT_READY = 11,
  VESIM_ERROR_KERNEL_FAILED = 12,  /* a kernel reported an error (see the stream's message) */
  VESIM_ERROR_KERNEL_CRASHED = 13, /* a kernel raised SIGSEGV/SIGBUS/SIGFPE/SIGILL */
  VESIM_ERROR_UNKNOWN = 14,
} VESIMresult;

/* VEDAdeviceptr's layout. */
typedef uint64_t VESIMdeviceptr;
#define VESIM_PTR_DEVICE_BITS 5
#define VESIM_PTR_INDEX_BITS 22
#define VESIM_PTR_OFFSET_BITS 37
#define VESIM_PTR_DEVICE(p) ((int)((p) >> 59))
#define VESIM_PTR_INDEX(p) ((uint32_t)(((p) >> 37) & ((1u << 22) - 1)))
#define VESIM_PTR_OFFSET(p) ((uint64_t)(p) & ((UINT64_C(1) << 37) - 1))

typedef struct VESIMcontext_st* VESIMcontext;
typedef struct VESIMstream_st* VESIMstream;

typedef enum VESIMcontext_mode {
  VESIM_CONTEXT_MODE_OMP = 0,    /* one stream, all cores */
  VESIM_CONTEXT_MODE_SCALAR = 1, /* one stream per core, one core each */
} VESIMcontext_mode;

/* ---- errors ----
 *
 * Errors of enqueued work. A task that fails while a stream runs it records its failure on that
 * stream: the stream's pending error is the first failure since it was last taken (later ones
 * while one is pending are not kept; their memory is still poisoned). It is returned — and
 * taken — by the next vesimStreamSynchronize of that stream, by vesimCtxSynchronize (which takes
 * every stream's), or by a synchronous copy or memset when that stream is the device's first.
 * No call on another stream returns it; vesimStreamQuery never does; vesimStreamDestroy drops
 * it. Callbacks see it (their `status`) without taking it; vesimStreamClearError takes it by id.
 *
 * Poisoned memory. The bytes a failed task was to write (a kernel's vesimDevResolveOut ranges,
 * a copy's or memset's destination), as far as they lie in a live allocation, are poisoned with
 * the failure's code and message. A later task on any stream that reads a poisoned byte (a
 * kernel's vesimDevResolve, a DtoH or DtoD source) fails with that code and a message that
 * quotes the original one, and so poisons what it was to write in turn. The poison of a range
 * is lifted by a successful write of it without gaps (HtoD, DtoD, memset, a kernel output
 * resolved as dense) and by freeing the allocation; a strided write leaves it.
 */
const char* vesimGetErrorName(VESIMresult r);   /* "VESIM_ERROR_OUT_OF_BOUNDS" */
const char* vesimGetErrorString(VESIMresult r); /* a sentence */
/* Details of the last failed call on this thread (or of the stream error that the last
 * vesimStreamSynchronize on this thread returned; inside a stream callback: of the pending
 * error its `status` reports). */
const char* vesimGetLastErrorDetail(void);
/* The id of the stream error vesimGetLastErrorDetail describes (0 for errors of calls). */
uint64_t vesimGetLastErrorId(void);

/* ---- init ---- */
VESIMresult vesimInit(void); /* reference counted; reads VESIM_* environment variables */
VESIMresult vesimExit(void); /* the last exit synchronizes and frees everything */

/* ---- devices ---- */
typedef struct VESIMdeviceinfo {
  char name[64];
  int cores;
  int vector_length;     /* elements of 64 bits per vector register */
  uint64_t memory;       /* bytes */
} VESIMdeviceinfo;

VESIMresult vesimDeviceGetCount(int* count);
VESIMresult vesimDeviceGetInfo(int device, VESIMdeviceinfo* info);
VESIMresult vesimMemGetInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes);

/* ---- contexts (one per device) and streams ---- */
VESIMresult vesimCtxCreate(VESIMcontext* ctx, VESIMcontext_mode mode, int device);
VESIMresult vesimCtxDestroy(VESIMcontext ctx); /* synchronizes, destroys its streams */
VESIMresult vesimCtxGet(int device, VESIMcontext* ctx); /* the device's context, if created */
VESIMresult vesimCtxStreamCount(VESIMcontext ctx, int* count);
VESIMresult vesimCtxGetStream(VESIMcontext ctx, int index, VESIMstream* stream);
/* Waits for every stream of the context and takes all their pending errors: returns the first,
 * with the others' messages appended to its detail. */
VESIMresult vesimCtxSynchronize(VESIMcontext ctx);
/* An extra in-order stream on the context (an extension: VEDA's streams are fixed at context
 * creation). It shares the device's cores with the others. */
VESIMresult vesimStreamCreate(VESIMcontext ctx, VESIMstream* stream);
VESIMresult vesimStreamDestroy(VESIMstream stream); /* waits for its work first */
VESIMresult vesimStreamQuery(VESIMstream stream);   /* SUCCESS when idle, else NOT_READY */
/* Waits for the stream's work; returns (and clears) the first error recorded since the last
 * synchronize, with its message in vesimGetLastErrorDetail(). */
VESIMresult vesimStreamSynchronize(VESIMstream stream);
/* Takes the stream's pending error if it is still the one with `id` (from vesimGetLastErrorId
 * in a callback): a waiter that reported it through an event keeps the stream from reporting it
 * again. Does not wait. */
VESIMresult vesimStreamClearError(VESIMstream stream, uint64_t id);
VESIMresult vesimStreamGetDevice(VESIMstream stream, int* device);
typedef void (*VESIMstream_callback)(VESIMstream stream, VESIMresult status, void* user);
/* Runs `fn` on the stream's worker when the stream reaches it; `status` is the stream's pending
 * error (SUCCESS if none), its message and id in vesimGetLastErrorDetail/Id. The callback must
 * not synchronize its own stream nor enqueue onto it (with its queue full it would wait for
 * itself). */
VESIMresult vesimStreamAddCallback(VESIMstream stream, VESIMstream_callback fn, void* user);
/* A callback that marks a point in the stream (an extension, for events built on callbacks):
 * once `fn` has started, vesimStreamQuery counts the stream idle if nothing was enqueued after
 * it, so a host thread that `fn` wakes sees the stream's state as of the marker. `fn` must not
 * block. Synchronize still waits for `fn` to return. */
VESIMresult vesimStreamAddMarker(VESIMstream stream, VESIMstream_callback fn, void* user);

/* ---- memory ---- */
/* Allocation is stream ordered: the pointer is returned at once, the device allocates when the
 * stream reaches the call. The device's memory budget is charged at once (OUT_OF_MEMORY). */
VESIMresult vesimMemAllocAsync(VESIMdeviceptr* ptr, size_t size, VESIMstream stream);
VESIMresult vesimMemFreeAsync(VESIMdeviceptr ptr, VESIMstream stream);
VESIMresult vesimMemAlloc(VESIMdeviceptr* ptr, size_t size, int device); /* stream 0, synced */
VESIMresult vesimMemFree(VESIMdeviceptr ptr);
/* Host-side metadata of the allocation `ptr` points into (like vedaMemGetAddressRange). */
VESIMresult vesimMemGetAddressRange(VESIMdeviceptr* base, size_t* size, VESIMdeviceptr ptr);

VESIMresult vesimMemcpyHtoDAsync(VESIMdeviceptr dst, const void* src, size_t size, VESIMstream s);
VESIMresult vesimMemcpyDtoHAsync(void* dst, VESIMdeviceptr src, size_t size, VESIMstream s);
VESIMresult vesimMemcpyDtoDAsync(VESIMdeviceptr dst, VESIMdeviceptr src, size_t size,
                                 VESIMstream s);
VESIMresult vesimMemcpyHtoD(VESIMdeviceptr dst, const void* src, size_t size);
VESIMresult vesimMemcpyDtoH(void* dst, VESIMdeviceptr src, size_t size);
VESIMresult vesimMemcpyDtoD(VESIMdeviceptr dst, VESIMdeviceptr src, size_t size);

VESIMresult vesimMemsetD8Async(VESIMdeviceptr dst, uint8_t value, size_t count, VESIMstream s);
VESIMresult vesimMemsetD16Async(VESIMdeviceptr dst, uint16_t value, size_t count, VESIMstream s);
VESIMresult vesimMemsetD32Async(VESIMdeviceptr dst, uint32_t value, size_t count, VESIMstream s);
VESIMresult vesimMemsetD64Async(VESIMdeviceptr dst, uint64_t value, size_t count, VESIMstream s);
VESIMresult vesimMemsetD8(VESIMdeviceptr dst, uint8_t value, size_t count);
VESIMresult vesimMemsetD16(VESIMdeviceptr dst, uint16_t value, size_t count);
VESIMresult vesimMemsetD32(VESIMdeviceptr dst, uint32_t value, size_t count);
VESIMresult vesimMemsetD64(VESIMdeviceptr dst, uint64_t value, size_t count);

/* Packed small copies (veo-udma): many transfers in one call, one latency charge in total.
 * The host buffers are read (HtoD) or written (DtoH) when the stream reaches the call. */
typedef enum VESIMcopy_kind { VESIM_COPY_HTOD = 0, VESIM_COPY_DTOH = 1 } VESIMcopy_kind;
typedef struct VESIMpacked_copy {
  VESIMcopy_kind kind;
  VESIMdeviceptr vptr;
  void* host;
  size_t size;
} VESIMpacked_copy;
VESIMresult vesimMemcpyPackedAsync(const VESIMpacked_copy* copies, size_t count, VESIMstream s);

/* ---- kernels ---- */
typedef struct VESIMkernel_ctx VESIMkernel_ctx; /* see vesim_device.h */
/* A kernel returns VESIM_SUCCESS or an error (set a message with vesimDevFail). */
typedef VESIMresult (*VESIMkernel)(VESIMkernel_ctx* k, void* args);
/* Enqueues fn(args) on the stream; `args` (args_size bytes) is copied into the launch. */
VESIMresult vesimLaunchKernel(VESIMkernel fn, VESIMstream stream, const void* args,
                              size_t args_size);
/* Like vesimLaunchKernel, with a name for the profiler and statistics. */
VESIMresult vesimLaunchKernelNamed(const char* name, VESIMkernel fn, VESIMstream stream,
                                   const void* args, size_t args_size);

/* ---- statistics and profiling ---- */
typedef struct VESIMstats {
  uint64_t api_calls;       /* host API calls that enqueue work */
  uint64_t kernels;         /* kernels run */
  uint64_t kernel_errors;   /* kernels that failed or crashed */
  uint64_t copies_htod, copies_dtoh, copies_dtod, packed_copies;
  uint64_t bytes_htod, bytes_dtoh, bytes_dtod;
  uint64_t allocs, frees;
  uint64_t mem_used;   /* bytes allocated now */
  uint64_t mem_peak;   /* most bytes allocated at once */
  uint64_t live_allocations;
} VESIMstats;
VESIMresult vesimGetStats(int device, VESIMstats* stats);
VESIMresult vesimResetStats(int device); /* counters to 0, peak to current */

typedef enum VESIMprof_kind {
  VESIM_PROF_KERNEL = 0,
  VESIM_PROF_MEMCPY_HTOD,
  VESIM_PROF_MEMCPY_DTOH,
  VESIM_PROF_MEMCPY_DTOD,
  VESIM_PROF_MEMSET,
  VESIM_PROF_PACKED,
  VESIM_PROF_ALLOC,
  VESIM_PROF_FREE,
  VESIM_PROF_CALLBACK,
} VESIMprof_kind;
typedef struct VESIMprof_record {
  VESIMprof_kind kind;
  const char* name;   /* kernel name, or NULL */
  int device;
  VESIMstream stream;
  uint64_t bytes;
  uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC, on the device side */
  VESIMresult result;
} VESIMprof_record;
typedef void (*VESIMprofiler_callback)(const VESIMprof_record* record, void* user);
/* Called on the worker after every task; NULL turns profiling off. */
VESIMresult vesimProfilerSetCallback(VESIMprofiler_callback fn, void* user);

/* Latency model: 0 off (default), 1 "veda" (call ~6 us, small copy ~12 us, bulk ~10 GB/s).
 * Read from VESIM_LATENCY at init; can be changed at run time. */
VESIMresult vesimSetLatencyModel(int model);

#ifdef __cplusplus
}
#endif

#endif /* VESIM_H_ */
