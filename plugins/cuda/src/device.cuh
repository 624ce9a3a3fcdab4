/* device.cuh — what both CUDA translation units share: the strided-indexing scheme (one for
 * every kernel), typed loads and stores, dtype dispatch, launch sizes and scratch memory. */
#ifndef UNIDEV_CUDA_DEVICE_CUH_
#define UNIDEV_CUDA_DEVICE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda_plugin.h"

namespace udc {

constexpr int kMaxDims = UD_KIT_MAX_DIMS;
constexpr int kThreads = 256;

/* NT views sharing one (collapsed) shape; strides in bytes so views of different dtypes mix. */
template <int NT>
struct Strided {
  int nd;
  int64_t numel;
  int64_t shape[kMaxDims];
  int64_t st[NT][kMaxDims];
  char* base[NT];

  /* byte offsets of linear element i (row-major over shape) in each view */
  __device__ __forceinline__ void offsets(int64_t i, int64_t* off) const {
    for (int t = 0; t < NT; t++) off[t] = 0;
    if (nd == 1) {
      for (int t = 0; t < NT; t++) off[t] = i * st[t][0];
      return;
    }
    for (int d = nd - 1; d >= 0; d--) {
      int64_t q = i / shape[d], r = i - q * shape[d];
      for (int t = 0; t < NT; t++) off[t] += r * st[t][d];
      i = q;
    }
  }
};

/* Views over `ndim` dims of `shape`; `strides[t]` in elements, itemsize[t] bytes. Dims are
 * collapsed where every view allows it. */
template <int NT>
Strided<NT> make_strided(int ndim, const int64_t* shape, const int64_t* const* strides,
                         char* const* base, const int* itemsize) {
  Strided<NT> s;
  int64_t cst[NT][kMaxDims];
  s.nd = ud_kit_collapse(ndim, shape, NT, strides, s.shape, cst);
  s.numel = 1;
  for (int d = 0; d < s.nd; d++) s.numel *= s.shape[d];
  for (int t = 0; t < NT; t++) {
    for (int d = 0; d < s.nd; d++) s.st[t][d] = cst[t][d] * itemsize[t];
    s.base[t] = base[t];
  }
  return s;
}

/* The same for whole tensors that share the first one's shape. */
template <int NT>
Strided<NT> strided_of(const UD_Tensor* const* ts) {
  const int64_t* strides[NT];
  char* base[NT];
  int isz[NT];
  for (int t = 0; t < NT; t++) {
    strides[t] = ts[t]->strides;
    base[t] = data_ptr(*ts[t]);
    isz[t] = (int)ud_kit_itemsize(ts[t]->dtype);
  }
  return make_strided<NT>(ts[0]->ndim, ts[0]->shape, strides, base, isz);
}

inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b);
}

#define UDC_GRID_LOOP(i, n)                                                     \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);    \
       i += (int64_t)gridDim.x * blockDim.x)

/* typed access; bool is stored as one byte 0/1 */
template <class T>
__device__ __forceinline__ T ld(const char* p) {
  if constexpr (std::is_same_v<T, bool>) return *(const uint8_t*)p != 0;
  else return *(const T*)p;
}
template <class T>
__device__ __forceinline__ void st(char* p, T v) {
  if constexpr (std::is_same_v<T, bool>) *(uint8_t*)p = v ? 1 : 0;
  else *(T*)p = v;
}

/* Accumulation type: float math for 16-bit types, double for float reductions. */
template <class T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };
template <class T>
__device__ __forceinline__ typename Acc<T>::type to_acc(T v) { return (typename Acc<T>::type)v; }
template <class T, class A>
__device__ __forceinline__ T from_acc(A v) { return (T)v; }
template <> __device__ __forceinline__ __half from_acc<__half, float>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) {
  return __float2bfloat16(v);
}
template <> __device__ __forceinline__ float to_acc<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/* Calls f(T{}) for the tensor dtype d among `allowed`; UNSUPPORTED otherwise. */
template <unsigned Allowed, class F>
UD_Error* by_dtype(UD_DType d, const char* op, F&& f) {
  switch (dtype_bit(d) & Allowed) {
    case UD_DTM_FLOAT32: if constexpr (Allowed & UD_DTM_FLOAT32) return f(float{}); break;
    case UD_DTM_FLOAT64: if constexpr (Allowed & UD_DTM_FLOAT64) return f(double{}); break;
    case UD_DTM_INT32: if constexpr (Allowed & UD_DTM_INT32) return f(int32_t{}); break;
    case UD_DTM_INT64: if constexpr (Allowed & UD_DTM_INT64) return f(int64_t{}); break;
    case UD_DTM_BOOL: if constexpr (Allowed & UD_DTM_BOOL) return f(bool{}); break;
    case UD_DTM_FLOAT16: if constexpr (Allowed & UD_DTM_FLOAT16) return f(__half{}); break;
    case UD_DTM_BFLOAT16: if constexpr (Allowed & UD_DTM_BFLOAT16) return f(__nv_bfloat16{}); break;
    default: break;
  }
  return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: no CUDA kernel for dtype %s", op,
                      ud_kit_dtype_name(d));
}

/* Record an index fault in host-mapped memory (plain stores: atomics on mapped host memory are
 * not portable); any one of racing faults is a fine report. */
__device__ __forceinline__ void report_fault(DeviceFault* f, int op, int64_t value, int64_t limit) {
  if (!f || *(volatile int32_t*)&f->code) return;
  f->value = value;
  f->limit = limit;
  __threadfence_system();
  *(volatile int32_t*)&f->code = op + 1;
}

inline UD_Error* launched(const char* op) { return cuda_error(cudaGetLastError(), op); }

/* Stream-ordered scratch memory, returned to the pool when the scope ends. */
struct Scratch {
  cudaStream_t stream;
  void* p = nullptr;
  explicit Scratch(void* s) : stream((cudaStream_t)s) {}
  ~Scratch() {
    if (p) cudaFreeAsync(p, stream);
  }
  UD_Error* alloc(size_t bytes) {
    return cuda_error(cudaMallocAsync(&p, bytes ? bytes : 1, stream), "scratch cudaMallocAsync");
  }
};

/* A dense row-major copy of t (t itself when it already is one). */
struct Dense {
  char* ptr = nullptr;
  Scratch buf;
  explicit Dense(void* s) : buf(s) {}
  UD_Error* from(const UD_Tensor& t) {
    if (ud_kit_is_contiguous(&t)) return ptr = data_ptr(t), nullptr;
    if (UD_Error* e = buf.alloc(ud_kit_numel(&t) * ud_kit_itemsize(t.dtype))) return e;
    ptr = (char*)buf.p;
    int64_t st[kMaxDims];
    UD_Tensor d = contiguous_like(t, st);
    return strided_copy(t, d, buf.stream);
  }
  /* the same descriptor over ptr, contiguous; `st` holds its strides */
  UD_Tensor contiguous_like(const UD_Tensor& t, int64_t* st) const {
    int64_t s = 1;
    for (int i = t.ndim - 1; i >= 0; i--) st[i] = s, s *= t.shape[i];
    UD_Tensor d = t;
    d.handle = (uint64_t)(uintptr_t)ptr;
    d.byte_offset = 0;
    d.strides = st;
    return d;
  }
};

}  // namespace udc

#endif /* UNIDEV_CUDA_DEVICE_CUH_ */
