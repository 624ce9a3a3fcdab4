// blas.cpp — strided GEMM on OpenBLAS, and the matmul/gemm kernels.
#include "blas.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "strided.h"

namespace aurora {

namespace {

// BLAS runs single-threaded on each core of a parallel region (gemm below): OpenBLAS's own
// threads synchronize by spinning and stall whenever the host has fewer free cores than threads.
void blas_threads() {
  static std::once_flag once;
  std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

void call(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  scipy_cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void call(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  scipy_cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// How BLAS can read a matrix in place: row-major (trans=false) or column-major (trans=true).
template <class T> bool blas_form(const Mat<T>& m, bool* trans, int64_t* ld) {
  int64_t rs = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.rs;
  int64_t cs = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.cs;
  if ((cs == 1 || m.cols == 1) && rs >= std::max<int64_t>(1, m.cols)) {
    *trans = false;
    *ld = rs;
    return true;
  }
  if ((rs == 1 || m.rows == 1) && cs >= std::max<int64_t>(1, m.rows)) {
    *trans = true;
    *ld = cs;
    return true;
  }
  return false;
}

template <class T> void pack(const Mat<const T>& m, T* dst) {
  for (int64_t i = 0; i < m.rows; i++) {
    const T* src = m.p + i * m.rs;
    T* row = dst + i * m.cols;
#pragma omp simd
    for (int64_t j = 0; j < m.cols; j++) row[j] = src[j * m.cs];
  }
}

}  // namespace

template <class T>
VESIMresult gemm(VESIMkernel_ctx* kc, Mat<const T> a, Mat<const T> b, Mat<T> c, T alpha, T beta,
                 T* scratch, bool serial) {
  int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0) return VESIM_SUCCESS;
  blas_threads();
  bool ta, tb, tc;
  int64_t lda, ldb, ldc;
  T* next = scratch;
  if (!blas_form(a, &ta, &lda)) {
    pack(a, next);
    a = {next, a.rows, a.cols, std::max<int64_t>(k, 1), 1};
    next += m * k;
    ta = false;
    lda = std::max<int64_t>(k, 1);
  }
  if (!blas_form(b, &tb, &ldb)) {
    pack(b, next);
    b = {next, b.rows, b.cols, std::max<int64_t>(n, 1), 1};
    next += k * n;
    tb = false;
    ldb = std::max<int64_t>(n, 1);
  }
  bool direct = blas_form(Mat<const T>{c.p, c.rows, c.cols, c.rs, c.cs}, &tc, &ldc) && !tc;
  T* out = c.p;
  if (!direct) {
    out = next;
    ldc = std::max<int64_t>(n, 1);
    if (beta != T(0)) pack(Mat<const T>{c.p, m, n, c.rs, c.cs}, out);
  }
  if (k == 0) {  // BLAS leaves C alone when k = 0 only if beta = 1; make it explicit
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) out[i * ldc + j] = beta == T(0) ? T(0) : beta * out[i * ldc + j];
  } else {  // blocks of C's rows (or columns, when it has more) on the cores
    bool rows = m >= n;
    auto part = [&](int64_t i, int64_t e) {
      const T *pa = a.p + (rows ? i * (ta ? 1 : lda) : 0), *pb = b.p + (rows ? 0 : i * (tb ? ldb : 1));
      call(ta, tb, int(rows ? e - i : m), int(rows ? n : e - i), int(k), alpha, pa, int(lda), pb,
           int(ldb), beta, out + (rows ? i * ldc : i), int(ldc));
    };
    if (serial) part(0, rows ? m : n);
    else if (VESIMresult r = parallel(kc, rows ? m : n, 32, part)) return r;
  }
  if (!direct) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c.p[i * c.rs + j * c.cs] = out[i * ldc + j];
  }
  return VESIM_SUCCESS;
}

template VESIMresult gemm<float>(VESIMkernel_ctx*, Mat<const float>, Mat<const float>, Mat<float>,
                                 float, float, float*, bool);
template VESIMresult gemm<double>(VESIMkernel_ctx*, Mat<const double>, Mat<const double>,
                                  Mat<double>, double, double, double*, bool);

namespace {

template <class T> struct Matmul {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_MATMUL);
    const UD_Tensor &A = ck.in(UD_IN_MATMUL_A), &B = ck.in(UD_IN_MATMUL_B), &O = ck.out(UD_OUT_MATMUL_OUT);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(A, "a", 2, kMaxDims))
      return ck.take();
    int nd = A.ndim;
    if (!ck.ndim(B, "b", nd, nd) || !ck.ndim(O, "out", nd, nd)) return ck.take();
    for (int d = 0; d < nd - 2; d++)
      if (!ck.dim(B, "b", d, A.shape[d]) || !ck.dim(O, "out", d, A.shape[d])) return ck.take();
    if (!ck.dim(B, "b", nd - 2, A.shape[nd - 1]) || !ck.dim(O, "out", nd - 2, A.shape[nd - 2]) ||
        !ck.dim(O, "out", nd - 1, B.shape[nd - 1]))
      return ck.take();
    for (int d = nd - 2; d < nd; d++)
      if (A.shape[d] > kBlasMax || B.shape[d] > kBlasMax)
        return ud_kit_error(UD_ERR_UNSUPPORTED, "matmul: matrix dims above 2^31-1");
    return launch(a, make_call(a, UD_OP_MATMUL, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &A = c.in[UD_IN_MATMUL_A], &B = c.in[UD_IN_MATMUL_B];
    Tensor& O = c.out[UD_OUT_MATMUL_OUT];
    int nd = O.ndim;
    int64_t m = O.shape[nd - 2], n = O.shape[nd - 1], kk = A.shape[nd - 1];
    if (O.numel() == 0) return VESIM_SUCCESS;
    T* scratch = static_cast<T*>(vesimDevScratch(k, gemm_scratch_bytes(m, n, kk, sizeof(T))));
    if (!scratch) return VESIM_ERROR_OUT_OF_MEMORY;
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) batch *= O.shape[d];
    for (int64_t i = 0; i < batch; i++) {
      const T* pa = A.ptr<const T>() + (A.data ? offset_of(i, nd - 2, O.shape, A.strides) : 0);
      const T* pb = B.ptr<const T>() + (B.data ? offset_of(i, nd - 2, O.shape, B.strides) : 0);
      T* po = O.ptr<T>() + offset_of(i, nd - 2, O.shape, O.strides);
      if (VESIMresult r = gemm<T>(k, {pa, m, kk, A.strides[nd - 2], A.strides[nd - 1]},
                                  {pb, kk, n, B.strides[nd - 2], B.strides[nd - 1]},
                                  {po, m, n, O.strides[nd - 2], O.strides[nd - 1]}, T(1), T(0), scratch))
        return r;
    }
    return VESIM_SUCCESS;
  }
};

template <class T> struct Gemm {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_GEMM);
    const UD_Tensor &A = ck.in(UD_IN_GEMM_A), &B = ck.in(UD_IN_GEMM_B), &C = ck.in(UD_IN_GEMM_C),
                    &O = ck.out(UD_OUT_GEMM_OUT);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(A, "a", 2, 2) ||
        !ck.ndim(B, "b", 2, 2) || !ck.ndim(O, "out", 2, 2) || !ck.dim(B, "b", 0, A.shape[1]) ||
        !ck.dim(O, "out", 0, A.shape[0]) || !ck.dim(O, "out", 1, B.shape[1]))
      return ck.take();
    if (C.ndim >= 0 && !ck.same_shape(C, "c", O, "out")) return ck.take();
    for (const UD_Tensor* t : {&A, &B})
      if (t->shape[0] > kBlasMax || t->shape[1] > kBlasMax)
        return ud_kit_error(UD_ERR_UNSUPPORTED, "gemm: matrix dims above 2^31-1");
    return launch(a, make_call(a, UD_OP_GEMM, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &A = c.in[UD_IN_GEMM_A], &B = c.in[UD_IN_GEMM_B], &C = c.in[UD_IN_GEMM_C];
    Tensor& O = c.out[UD_OUT_GEMM_OUT];
    int64_t m = O.shape[0], n = O.shape[1], kk = A.shape[1];
    if (O.numel() == 0) return VESIM_SUCCESS;
    T alpha = T(c.attrs[UD_ATTR_GEMM_ALPHA].f);
    T beta = C.present() ? T(c.attrs[UD_ATTR_GEMM_BETA].f) : T(0);
    T* scratch = static_cast<T*>(vesimDevScratch(k, gemm_scratch_bytes(m, n, kk, sizeof(T))));
    if (!scratch) return VESIM_ERROR_OUT_OF_MEMORY;
    Tensor* src[1] = {&c.in[UD_IN_GEMM_C]};  // out = c first, then out = alpha a b + beta out
    if (beta != T(0))
      if (VESIMresult r = map_views<T, T>(k, O, src, [](T v) { return v; })) return r;
    return gemm<T>(k, {A.ptr<const T>(), m, kk, A.strides[0], A.strides[1]},
                   {B.ptr<const T>(), kk, n, B.strides[0], B.strides[1]},
                   {O.ptr<T>(), m, n, O.strides[0], O.strides[1]}, alpha, beta, scratch);
  }
};

const RegisterTypes<Matmul, float, double> reg_matmul(UD_OP_MATMUL);
const RegisterTypes<Gemm, float, double> reg_gemm(UD_OP_GEMM);

}  // namespace

}  // namespace aurora
