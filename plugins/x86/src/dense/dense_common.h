// dense_common.h — helpers shared by the dense kernels: typed data pointers, strided copies,
// the BLAS call, argument checks and the guard that keeps C++ exceptions off the C ABI.
// Portable C++17 (the arm64 plugin reuses it).
#pragma once

#include <cblas.h>
#include <omp.h>
#ifdef UD_DENSE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
constexpr bool kOneDNN = true;
#else
constexpr bool kOneDNN = false;
#endif
#include "program_ispc.h"  // the epilogue
#include "x86.h"  // and unidev.h, plugin_kit.h

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

namespace ud_dense {

// The tables' entry for a kernel that opens OpenMP regions (x86.h's ud_x86_omp_run says why);
// a call for which `inline_ok` holds opens none and runs on the calling thread (the hand-off
// costs two thread switches, which a tiny kernel on a framework's executor thread feels).
template <UD_KernelFn F, bool (*inline_ok)(const UD_KernelArgs*) = nullptr>
UD_Error* omp_kernel(const UD_KernelArgs* a) {
  return inline_ok != nullptr && inline_ok(a) ? F(a) : ud_x86_omp_run(F, a);
}

template <class T>
T* data_ptr(const UD_Tensor& t) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(t.handle) + t.byte_offset);
}

// OpenBLAS runs single-threaded on the calling thread: all parallelism is OpenMP, whose pool
// oneDNN (and torch, when loaded) share. A second pool of OpenBLAS pthreads would spin on the
// same cores after every call and slow both down severalfold.
inline void blas_single_thread() {
  static std::once_flag once;
  std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

// Row-major gemm on the calling thread: c[m, n] = alpha * op(a) @ op(b) + beta * c.
template <class T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
#ifdef UD_DENSE_ONEDNN  // oneDNN's sgemm (sequential inside a parallel region) beats OpenBLAS's
  if constexpr (std::is_same_v<T, float>)  // 1.1-1.3x (5x at k = 10), and never locks when threads
    return (void)dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                            beta, c, ldc);  // call it at once
#endif
  blas_single_thread();
  const CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, oa, ob, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, oa, ob, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The same gemm spread over the OpenMP threads: the longer of m and n is cut into one block of
// rows or columns per thread. Small products stay on one thread (waking threads costs more). For
// oneDNN's sgemm too: at m = 256 (an MLP batch) its own split runs up to 1.4x slower.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const int nt = omp_in_parallel() || double(m) * n * k < 262144.0 ? 1 : omp_get_max_threads();
  if (nt <= 1) return blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const bool split_n = n >= m;
  const int64_t dim = split_n ? n : m, chunk = ((dim + nt - 1) / nt + 15) / 16 * 16;
#pragma omp parallel num_threads(nt)
  {
    const int64_t lo = omp_get_thread_num() * chunk, len = std::min(chunk, dim - lo);
    if (len > 0 && split_n)
      blas_gemm(ta, tb, m, len, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo,
                ldc);
    else if (len > 0)
      blas_gemm(ta, tb, len, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta,
                c + lo * ldc, ldc);
  }
}

// Scratch memory kept by the calling thread across kernel calls (slot 0-3). Fresh large
// allocations would be fresh mmaps, page-faulted again on every call.
template <class T>
T* scratch(int slot, int64_t n) {
  thread_local std::vector<T> bufs[4];
  if ((int64_t)bufs[slot].size() < n) bufs[slot] = std::vector<T>((size_t)n);
  return bufs[slot].data();
}

// dst[i...] = src[i...] for two strided views of one shape (element strides).
template <class T>
void strided_copy(T* dst, const int64_t* ds, const T* src, const int64_t* ss, int nd,
                  const int64_t* shape) {
  if (nd == 0) *dst = *src;
  if (nd == 1 && ds[0] == 1 && ss[0] == 1) std::memcpy(dst, src, sizeof(T) * (size_t)shape[0]);
  if (nd == 0 || (nd == 1 && ds[0] == 1 && ss[0] == 1)) return;
  for (int64_t i = 0; i < shape[0]; i++)
    strided_copy(dst + i * ds[0], ds + 1, src + i * ss[0], ss + 1, nd - 1, shape + 1);
}

// Copies between a view and a dense row-major buffer of its shape, either way.
template <class T>
void pack(const UD_Tensor& t, T* dense, bool to_view) {
  int64_t cs[UD_KIT_MAX_DIMS], s = 1;
  for (int i = t.ndim - 1; i >= 0; s *= t.shape[i--]) cs[i] = s;
  T *view = data_ptr<T>(t), *dst = to_view ? view : dense;
  strided_copy(dst, to_view ? t.strides : cs, to_view ? dense : view, to_view ? cs : t.strides,
               t.ndim, t.shape);
}

// The fused ops' epilogue where no library applies it: t = act(t + bias[i1] + r) over a 2-d or
// 4-d view t (channels: dim 1) and r of t's shape (or null), in T, by program.ispc's vectorized
// loop along a dim where t and r are contiguous (NCHW: the h*w plane; NHWC or [M, N]: dim 1).
template <class T>
void epilogue(const UD_Tensor& t, const T* bias, const UD_Tensor* r, int act) {
  int64_t n[4] = {1, 1, 1, 1}, ts[4] = {0, 0, 0, 0}, rs[4] = {0, 0, 0, 0}, in = -1;
  for (int d = 0; d < t.ndim; d++)
    n[d] = t.shape[d], ts[d] = t.strides[d], rs[d] = r ? r->strides[d] : 0;
  for (int d = 0; d < 4; d++) in = n[d] > 1 && ts[d] == 1 && (!r || rs[d] == 1) ? d : in;
  if (in == 3 && ts[2] == n[3] && (!r || rs[2] == n[3])) n[3] *= n[2], n[2] = 1;  // whole planes
  const int64_t len = in < 0 ? 1 : n[in], rows = n[0] * n[1] * n[2] * n[3] / len;
  const int op = act == UD_ACT_NONE ? -1 : ud_kit_activation_op(act);
#pragma omp parallel for schedule(static) if (rows * len >= 32768)
  for (int64_t row = 0; row < rows; row++) {
    int64_t i[4] = {0, 0, 0, 0}, rem = row, o = 0, ro = 0;
    for (int d = 3; d >= 0; o += i[d] * ts[d], ro += i[d] * rs[d], d--)
      if (d != in) i[d] = rem % n[d], rem /= n[d];
    T* y = data_ptr<T>(t) + o;
    const T *b = bias ? bias + i[1] : nullptr, *rr = r ? data_ptr<T>(*r) + ro : nullptr;
    if constexpr (std::is_same_v<T, float>)
      ispc::ud_epilogue_f32(len, y, b, b && in == 1, rr, op);
    else ispc::ud_epilogue_f64(len, y, b, b && in == 1, rr, op);
  }
}

using ll = long long;  // for printf's %lld

// ndim (when >= 0) and dtype: float32/float64, and equal to `want` when given. The structure of
// every tensor was checked by ud_x86_check_args.
inline UD_Error* check_input(const char* op, const char* arg, const UD_Tensor& t, int ndim,
                             const UD_DType* want) {
  UD_KIT_REQUIRE(ndim < 0 || t.ndim == ndim, UD_ERR_INVALID_ARGUMENT,
                 "%s: '%s' has ndim %d, expected %d", op, arg, t.ndim, ndim);
  return want ? ud_kit_check_dtype(op, arg, &t, *want)
              : ud_kit_check_dtype_in(op, arg, &t, UD_X86_FLOAT, nullptr);
}

// Runs f(T()) for T = float or double as the dtype says; C++ exceptions become error objects.
template <class F>
UD_Error* by_dtype(const char* op, UD_DType d, F&& f) noexcept {
  try {
    d.bits == 32 ? f(float()) : f(double());
    return nullptr;
  } catch (const std::bad_alloc&) {
    return ud_kit_error(UD_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
  } catch (const std::exception& e) {
    return ud_kit_error(UD_ERR_INTERNAL, "%s: %s", op, e.what());
  } catch (...) {
    return ud_kit_error(UD_ERR_INTERNAL, "%s: unknown exception", op);
  }
}

}  // namespace ud_dense
