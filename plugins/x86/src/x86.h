/* x86.h — what every unidev-x86 source needs: the execution model, the thread pool, typed tensor
 * access, argument checks, and the kernel tables the registry merges.
 *
 * Execution model. Memory is host memory and a handle is the host pointer itself. Streams are
 * in-order queues that run each piece of work to completion when it is enqueued, on the calling
 * thread (helped by the pool below). So a kernel may simply compute and return; its errors are
 * returned at once, and events record the time their stream reached them. */
#ifndef UD_X86_H_
#define UD_X86_H_

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

/* The dtypes unidev-x86 computes in, as indices into per-dtype kernel tables. */
enum { UD_F32, UD_F64, UD_I32, UD_I64, UD_B8, UD_NDT };
#define UD_FLOAT_SET 0x03u   /* float32, float64 */
#define UD_NUMERIC_SET 0x0Fu /* + int32, int64 */
#define UD_ALL_SET 0x1Fu     /* + bool */
int ud_x86_dt(UD_DType d);   /* index, or -1 for a dtype unidev-x86 does not compute in */
UD_DType ud_x86_dtype(int dt);
int ud_x86_dt_from_name(const char* name); /* "float32" -> UD_F32; -1 if unknown */

/* ---- allocations ----
 * [handle, handle + bytes) lies inside one live allocation (handle may point into it). */
UD_Error* ud_x86_check_range(const char* op, const char* arg, uint64_t handle, uint64_t bytes);

UD_Error* ud_x86_check_device(const char* fn, int32_t device); /* device 0 only */

/* ---- argument checks (each returns NULL or an error naming the op) ----
 * Device, counts, non-NULL arrays, and the structure and bounds of every present tensor (it
 * must lie inside a live allocation); `attrs` lists the attribute
 * types in op-set order: i int, f float, b bool, s str, n ints. */
UD_Error* ud_x86_check_args(const char* op, const UD_KernelArgs* a, int nin, int nout,
                            const char* attrs);
/* `t` has one of the dtypes in `set` (UD_*_SET); writes its index to *dt. */
UD_Error* ud_x86_check_dt(const char* op, const char* arg, const UD_Tensor* t, unsigned set,
                          int* dt);
/* The axis attribute normalized to [0, ndim) (negative counts from the end). */
UD_Error* ud_x86_axis(const char* op, int64_t axis, int ndim, int* out);

/* Return from the enclosing function with expr's error, if any. */
#define UD_TRY(expr)                  \
  do {                                \
    UD_Error* ud_try_err_ = (expr);   \
    if (ud_try_err_) return ud_try_err_; \
  } while (0)
/* Return an invalid-argument error (printf-style message) unless cond holds. */
#define UD_REQUIRE(cond, ...) \
  UD_TRY((cond) ? NULL : ud_kit_error(UD_ERR_INVALID_ARGUMENT, __VA_ARGS__))

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

/* ---- kernel tables ----
 * Each source file exports its ops as a NULL-terminated table; the registry searches them. */
typedef struct UD_X86Kernel {
  const char* op;
  unsigned dtypes; /* UD_*_SET of the op's first-input dtype */
  UD_KernelFn fn;
} UD_X86Kernel;

extern const UD_X86Kernel ud_x86_elementwise_kernels[];
extern const UD_X86Kernel ud_x86_memory_kernels[];
extern const UD_X86Kernel ud_x86_reduce_kernels[];
extern const UD_X86Kernel ud_x86_softmax_kernels[];
extern const UD_X86Kernel ud_x86_pool_kernels[];
extern const UD_X86Kernel ud_x86_nn_kernels[];
extern const UD_X86Kernel ud_x86_matmul_kernels[]; /* src/dense */
extern const UD_X86Kernel ud_x86_conv_kernels[];

#ifdef __cplusplus
}
#endif

#endif /* UD_X86_H_ */
