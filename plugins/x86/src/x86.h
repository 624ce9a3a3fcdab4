/* x86.h — what every unidev-x86 source needs: the execution model, the thread pool, typed tensor
 * access, argument checks, and the kernel tables the registry merges.
 *
 * Execution model. Memory is host memory and a handle is the host pointer itself. Streams are
 * in-order queues that run each piece of work to completion when it is enqueued, on the calling
 * thread (helped by the pool below). So a kernel may simply compute and return; its errors are
 * returned at once, and events record the time their stream reached them. */
#ifndef UD_X86_H_
#define UD_X86_H_

#include <assert.h>
#include <stdint.h>
#include <unidev/plugin_kit.h>
#include <unidev/unidev.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tensors ---- */
static inline void* ud_x86_ptr(const UD_Tensor* t) {
  return (char*)(uintptr_t)t->handle + t->byte_offset;
}

/* The dtypes unidev-x86 computes in (UD_DTM_* masks of ops.h; its per-dtype tables are indexed
 * by ops.h's UD_DT_* ids). Its own sets, not the op set's groups: a dtype added to an op set
 * group must not reach a kernel table that has no entry for it. */
#define UD_X86_FLOAT (UD_DTM_FLOAT32 | UD_DTM_FLOAT64)
#define UD_X86_NUMERIC (UD_X86_FLOAT | UD_DTM_INT32 | UD_DTM_INT64)
#define UD_X86_ALL (UD_X86_NUMERIC | UD_DTM_BOOL)

/* ---- allocations ----
 * [handle, handle + bytes) lies inside one live allocation (handle may point into it). */
UD_Error* ud_x86_check_range(const char* op, const char* arg, uint64_t handle, uint64_t bytes);

/* The index (inputs, then outputs) of the first present tensor of `a` that is not inside one
 * live allocation, or -1. */
int ud_x86_first_outside(const UD_KernelArgs* a);

UD_Error* ud_x86_check_device(const char* fn, int32_t device); /* device 0 only */

/* ---- argument checks (each returns NULL or an error naming the op) ----
 * The signature of op `op` (a UD_OpId: ud_kit_check_signature), the device, and that every
 * present tensor lies inside a live allocation. Dtypes and shapes are the kernels'. */
UD_Error* ud_x86_check_args(int op, const UD_KernelArgs* a);
/* The op-set name of tensor `t`, one of a's inputs or outputs (ops without a variadic input). */
const char* ud_x86_arg_name(int op, const UD_KernelArgs* a, const UD_Tensor* t);
/* The axis attribute normalized to [0, ndim) (negative counts from the end). */
UD_Error* ud_x86_axis(const char* op, int64_t axis, int ndim, int* out);
/* Compile-time check that an op family's shared kernel may read op `b`'s argument at op `a`'s
 * position (the families' positions come from ops.h). */
#define UD_X86_SAME_POS(a, b) static_assert((int)(a) == (int)(b), #a " differs from " #b)

/* Element offset of flat index `flat` (row-major over shape[0..nd)) in a view with `strides`. */
static inline int64_t ud_x86_offset(int64_t flat, int nd, const int64_t* shape,
                                    const int64_t* strides) {
  int64_t off = 0;
  for (int k = nd - 1; k >= 0; k--) {
    off += (flat % shape[k]) * strides[k];
    flat /= shape[k];
  }
  return off;
}

/* ---- thread pool ----
 * Runs fn(ctx, begin, end) over [0, n) cut into chunks of >= grain (about four per core) that
 * the caller and the pool's workers claim in turn, and returns when all are done. Ranges under
 * 2 * grain run inline, as does a call made from inside a pool task or while another thread
 * holds the pool. */
typedef void (*ud_x86_task)(void* ctx, int64_t begin, int64_t end);
void ud_x86_parallel(int64_t n, int64_t grain, ud_x86_task fn, void* ctx);
int ud_x86_threads(void);

/* ---- contiguous tile helpers (ISPC, by element size) ---- */
typedef void (*ud_x86_move_fn)(int64_t n, void* dst, const void* src, int64_t stride);
extern const ud_x86_move_fn ud_x86_pack[9];   /* dst[i] = src[i * stride] */
extern const ud_x86_move_fn ud_x86_unpack[9]; /* dst[i * stride] = src[i] */

/* ---- the elementwise engine ----
 * A tile function computes n elements of contiguous operands: o[i] = f(a[i], b[i], c[i]; p). */
typedef void (*ud_x86_tile_fn)(int64_t n, void* o, const void* a, const void* b, const void* c,
                               const double* p);
/* Collapses views[0]'s dimensions outside `skip` (a bit mask of dimensions) for nv <= 4 views of
 * its shape: the result has ndim >= 1 (a 0-d or fully skipped shape becomes [1]). */
int ud_x86_collapse_views(int nv, const UD_Tensor* const* views, unsigned skip, int64_t* shape,
                          int64_t (*strides)[UD_KIT_MAX_DIMS]);
/* Runs fn over views[0] (the output) and views[1..nv-1] (inputs of views[0]'s shape, any
 * strides, stride 0 for broadcast): collapses dimensions, packs strided operands into tiles and
 * splits large work over the pool. fn NULL copies views[1] into views[0] (same element size).
 * fn gets {p[0] (0 when p is NULL), flags, stream}: flags 2 when views[2] has inner stride 0,
 * which fn then reads as one value; stream 1 when fn should write o with non-temporal stores
 * (outputs of >= UD_X86_STREAM_BYTES, which cannot stay in cache anyway; the engine fences after
 * them); so every fn of two or more inputs must be an ispc UD_STAMP. */
#define UD_X86_STREAM_BYTES ((int64_t)1 << 24)
void ud_x86_map(ud_x86_tile_fn fn, int nv, const UD_Tensor* const* views, const double* p);
/* every element of dst = value converted to dst's dtype */
void ud_x86_fill_view(const UD_Tensor* dst, double value);

/* ---- layouts (src/layout.c) ----
 * 4-d tensors: dense NCHW, dense channels-last (strides H*W*C, 1, W*C, C) or anything else. */
enum { UD_X86_NCHW, UD_X86_NHWC, UD_X86_OTHER };
int ud_x86_layout4(const UD_Tensor* t);
/* Debug counters, read by unidev_x86.debug_counters() through ud_x86_debug_counter(name). */
enum { UD_X86_LAYOUT_COPIES, UD_X86_PROGRAM_COMPILES, UD_X86_PROGRAM_DISK_HITS, /* src/program.c */
       UD_X86_PROGRAM_REBUILDS, UD_X86_PROGRAM_NO_JIT, UD_X86_NUM_COUNTERS };
void ud_x86_count(int counter);
/* t itself when it already is dense in `layout` (or empty), else a dense copy in it (of t's
 * contents when copy_in), counted in layout_copies; unstage copies it back when copy_out and
 * frees it. stage returns 0 when out of host memory. */
typedef struct {
  UD_Tensor t;
  const UD_Tensor* orig;
  int64_t strides[4];
  void* buf;
  int copied;
} UD_X86Staged;
int ud_x86_stage(const UD_Tensor* t, int layout, int copy_in, UD_X86Staged* s);
void ud_x86_unstage(UD_X86Staged* s, int copy_out);

/* ---- kernel tables ----
 * Each source file exports its ops as a table ended by a NULL fn; the registry searches them. */
typedef struct UD_X86Kernel {
  int op;          /* UD_OpId */
  uint32_t dtypes; /* UD_X86_* set of the op's first-input dtype */
  UD_KernelFn fn;  /* NULL ends a table */
} UD_X86Kernel;

extern const UD_X86Kernel ud_x86_elementwise_kernels[];
extern const UD_X86Kernel ud_x86_memory_kernels[];
extern const UD_X86Kernel ud_x86_reduce_kernels[];
extern const UD_X86Kernel ud_x86_softmax_kernels[];
extern const UD_X86Kernel ud_x86_pool_kernels[];
extern const UD_X86Kernel ud_x86_nn_kernels[];
extern const UD_X86Kernel ud_x86_matmul_kernels[]; /* src/dense */
extern const UD_X86Kernel ud_x86_conv_kernels[];
extern const UD_X86Kernel ud_x86_optim_kernels[]; /* src/optim.c */
extern const UD_X86Kernel ud_x86_program_kernels[]; /* src/program.c (and its kernel_compile) */

/* Runs a kernel that opens OpenMP regions (src/dense: oneDNN, the conv loops, gemm): inline on
 * the process's main thread, else on the plugin's one OpenMP thread, serialized (threads.c says
 * why: a team per framework thread throttles every team, the framework's included). */
UD_Error* ud_x86_omp_run(UD_KernelFn fn, const UD_KernelArgs* args);

#ifdef __cplusplus
}
#endif

#endif /* UD_X86_H_ */
