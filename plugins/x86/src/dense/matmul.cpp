// matmul.cpp — matmul and gemm over OpenBLAS. Transposed operands are read through their strides
// (CblasTrans + leading dimension), batches loop over the batch dims (stride 0 included);
// only layouts BLAS cannot express (e.g. both strides > 1) are copied into a dense buffer.
#include <memory>

#include "dense_common.h"  // and x86.h

namespace ud_dense {
namespace {

struct Mat {  // a matrix view: extents and element strides
  int64_t rows, cols, rs, cs;
  Mat t() const { return {cols, rows, cs, rs}; }
};

// Whether BLAS can read `m` in place: row-major with leading dimension `ld`, or transposed.
bool blas_form(const Mat& m, bool* trans, int64_t* ld) {
  if ((m.cols == 1 || m.cs == 1) && (m.rows == 1 || m.rs >= m.cols)) {
    *trans = false;
    *ld = m.rows == 1 ? m.cols : m.rs;
  } else if ((m.rows == 1 || m.rs == 1) && (m.cols == 1 || m.cs >= m.rows)) {
    *trans = true;
    *ld = m.cols == 1 ? m.rows : m.cs;
  } else {
    return false;
  }
  return *ld <= INT32_MAX;
}

template <class T>
void copy2d(T* dst, const Mat& d, const T* src, const Mat& s) {
  const int64_t shape[2] = {d.rows, d.cols}, ds[2] = {d.rs, d.cs}, ss[2] = {s.rs, s.cs};
  strided_copy(dst, ds, src, ss, 2, shape);
}

// c = beta * c, where beta == 0 writes zeros (also over NaN).
template <class T>
void scale2d(T* c, const Mat& C, T beta) {
  for (int64_t i = 0; i < C.rows; i++)
    for (int64_t j = 0; j < C.cols; j++)
      c[i * C.rs + j * C.cs] = beta == T(0) ? T(0) : beta * c[i * C.rs + j * C.cs];
}

// c = alpha * a @ b + beta * c for views with m, n, k > 0.
template <class T>
void mm(const T* a, Mat A, const T* b, Mat B, T* c, Mat C, T alpha, T beta) {
  bool tc, ta, tb;
  int64_t ldc, lda, ldb;
  if (!blas_form(C, &tc, &ldc)) {  // e.g. a strided or broadcast output: go through a buffer
    const Mat D{C.rows, C.cols, C.cols, 1};
    std::unique_ptr<T[]> tmp(new T[C.rows * C.cols]);
    if (beta != T(0)) copy2d(tmp.get(), D, c, C);
    mm(a, A, b, B, tmp.get(), D, alpha, beta);
    copy2d(c, C, tmp.get(), D);
    return;
  }
  if (tc) return mm(b, B.t(), a, A.t(), c, C.t(), alpha, beta);  // column-major: c^T = b^T a^T
  std::unique_ptr<T[]> abuf, bbuf;
  auto dense = [](const T*& p, const Mat& m, std::unique_ptr<T[]>& buf, bool* t, int64_t* ld) {
    if (blas_form(m, t, ld)) return;
    buf.reset(new T[m.rows * m.cols]);
    copy2d(buf.get(), Mat{m.rows, m.cols, m.cols, 1}, p, m);
    p = buf.get(), *t = false, *ld = m.cols;
  };
  dense(a, A, abuf, &ta, &lda);
  dense(b, B, bbuf, &tb, &ldb);
  gemm(ta, tb, C.rows, C.cols, A.cols, alpha, a, lda, b, ldb, beta, c, ldc);
}

Mat mat_of(const UD_Tensor& t) {
  const int d = t.ndim;
  return {t.shape[d - 2], t.shape[d - 1], t.strides[d - 2], t.strides[d - 1]};
}

// a [.., m, k] @ b [.., k, n] -> out [.., m, n] with equal batch dims (stride 0 broadcasts).
UD_Error* check_shapes(const char* op, const UD_Tensor& a, const UD_Tensor& b,
                       const UD_Tensor& out) {
  const int d = a.ndim;
  for (int i = 0; i < d - 2; i++)
    UD_KIT_REQUIRE(b.shape[i] == a.shape[i] && out.shape[i] == a.shape[i],
                   UD_ERR_INVALID_ARGUMENT,
                   "%s: batch dim %d is %lld/%lld/%lld for a/b/out, expected equal (broadcast "
                   "batches come with stride 0)", op, i, ll(a.shape[i]), ll(b.shape[i]),
                   ll(out.shape[i]));
  const int64_t m = a.shape[d - 2], k = a.shape[d - 1], n = b.shape[d - 1];
  UD_KIT_REQUIRE(b.shape[d - 2] == k && out.shape[d - 2] == m && out.shape[d - 1] == n,
                 UD_ERR_INVALID_ARGUMENT,
                 "%s: a [.., %lld, %lld] @ b [.., %lld, %lld] -> out [.., %lld, %lld], expected "
                 "b [.., %lld, N] and out [.., %lld, N]", op, ll(m), ll(k), ll(b.shape[d - 2]),
                 ll(n), ll(out.shape[d - 2]), ll(out.shape[d - 1]), ll(k), ll(m));
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: m=%lld n=%lld k=%lld exceed BLAS's int32", op,
                        ll(m), ll(n), ll(k));
  return nullptr;
}

// out = alpha * a @ b (+ beta * c, gemm) for every batch index; c is 2-D.
template <class T>
void run(const UD_Tensor& a, const UD_Tensor& b, const UD_Tensor* c, const UD_Tensor& out,
         double alpha, double beta) {
  const int nb = a.ndim - 2;
  const Mat A = mat_of(a), B = mat_of(b), C = mat_of(out);
  int64_t batch = 1, idx[UD_KIT_MAX_DIMS] = {0};
  for (int i = 0; i < nb; i++) batch *= out.shape[i];
  if (batch == 0 || C.rows == 0 || C.cols == 0) return;
  const bool use_c = c && beta != 0.0;  // beta == 0 ignores c, as BLAS and addmm do
  for (int64_t it = 0; it < batch; it++) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (int i = 0; i < nb; i++)
      oa += idx[i] * a.strides[i], ob += idx[i] * b.strides[i], oc += idx[i] * out.strides[i];
    T* o = data_ptr<T>(out) + oc;
    if (use_c) copy2d(o, C, data_ptr<T>(*c), mat_of(*c));
    if (A.cols == 0 || alpha == 0.0)
      scale2d(o, C, T(use_c ? beta : 0.0));
    else
      mm(data_ptr<T>(a) + oa, A, data_ptr<T>(b) + ob, B, o, C, T(alpha), T(use_c ? beta : 0.0));
    for (int i = nb - 1; i >= 0 && ++idx[i] == out.shape[i]; i--) idx[i] = 0;
  }
}

// matmul: a [.., m, k] @ b [.., k, n]; gemm: 2-D, alpha * a @ b + beta * c; gemm_bias_act:
// act(alpha * a @ b + bias + residual), the residual as gemm's c (beta 1), then one epilogue pass.
template <int id>
UD_Error* k_matmul(const UD_KernelArgs* args) {
  const bool is_gemm = id != UD_OP_MATMUL, fused = id == UD_OP_GEMM_BIAS_ACT;
  const char* op = ud_op_info(id)->name;
  int act = UD_ACT_NONE;
  UD_KIT_TRY(ud_x86_check_args(id, args));
  if (fused) UD_KIT_TRY(ud_kit_check_epilogue(id, args, &act));
  UD_X86_SAME_POS(UD_IN_MATMUL_A, UD_IN_GEMM_A);
  UD_X86_SAME_POS(UD_IN_MATMUL_B, UD_IN_GEMM_B);
  UD_X86_SAME_POS(UD_IN_GEMM_BIAS_ACT_A, UD_IN_GEMM_A);
  UD_X86_SAME_POS(UD_IN_GEMM_BIAS_ACT_B, UD_IN_GEMM_B);
  UD_X86_SAME_POS(UD_ATTR_GEMM_BIAS_ACT_ALPHA, UD_ATTR_GEMM_ALPHA);
  const UD_Tensor &a = args->inputs[UD_IN_GEMM_A], &b = args->inputs[UD_IN_GEMM_B];
  const UD_Tensor& out = args->outputs[UD_OUT_GEMM_OUT];
  UD_KIT_TRY(check_input(op, "a", a, is_gemm ? 2 : -1, nullptr));
  UD_KIT_REQUIRE(a.ndim >= 2, UD_ERR_INVALID_ARGUMENT, "matmul: 'a' has ndim %d, expected >= 2",
                 a.ndim);
  UD_KIT_TRY(check_input(op, "b", b, a.ndim, &a.dtype));
  UD_KIT_TRY(check_input(op, "out", out, a.ndim, &a.dtype));
  UD_KIT_TRY(check_shapes(op, a, b, out));
  const int cpos = fused ? UD_IN_GEMM_BIAS_ACT_RESIDUAL : UD_IN_GEMM_C;
  const UD_Tensor* c = is_gemm && ud_kit_present(&args->inputs[cpos]) ? &args->inputs[cpos]
                                                                      : nullptr;
  if (c) {  // unidev.ops broadcasts c to [M, N] (stride 0)
    UD_KIT_TRY(check_input(op, fused ? "residual" : "c", *c, 2, &a.dtype));
    UD_KIT_TRY(ud_kit_check_same_shape(op, fused ? "residual" : "c", c, &out));
  }
  const UD_Tensor* bias = fused && ud_kit_present(&args->inputs[UD_IN_GEMM_BIAS_ACT_BIAS])
                              ? &args->inputs[UD_IN_GEMM_BIAS_ACT_BIAS]
                              : nullptr;
  const double alpha = is_gemm ? args->attrs[UD_ATTR_GEMM_ALPHA].value.f : 1.0;
  const double beta = fused ? 1.0 : is_gemm ? args->attrs[UD_ATTR_GEMM_BETA].value.f : 0.0;
  return by_dtype(op, a.dtype, [&](auto t) {
    using T = decltype(t);
    run<T>(a, b, c, out, alpha, beta);
    std::unique_ptr<T[]> bb(bias ? new T[bias->shape[0]] : nullptr);
    if (bias) pack(*bias, bb.get(), false);
    if (fused && (bias || act != UD_ACT_NONE)) epilogue<T>(out, bb.get(), nullptr, act);
  });
}

// Products of at most 2^16 multiply-adds per batch index: each is one single-threaded BLAS call
// (gemm's split starts at 2^18; oneDNN's sgemm runs such sizes on one thread, without a parallel
// region), and the copies around it are plain loops, so no OpenMP region opens. Malformed
// arguments run inline too: the kernel refuses them before any work.
bool small_product(const UD_KernelArgs* args) {
  const UD_Tensor* t = args->num_inputs >= 2 ? args->inputs : nullptr;
  if (!t || !t[0].shape || !t[1].shape || t[0].ndim < 2 || t[1].ndim < 2) return true;
  const int64_t *a = t[0].shape + t[0].ndim - 2, *b = t[1].shape + t[1].ndim - 2;
  return double(a[0]) * a[1] * b[1] <= 65536.0;
}

}  // namespace
}  // namespace ud_dense

using namespace ud_dense;  // the tables below name its kernels

extern "C" const UD_X86Kernel ud_x86_matmul_kernels[] = {
    {UD_OP_MATMUL, UD_X86_FLOAT, omp_kernel<k_matmul<UD_OP_MATMUL>, small_product>},
    {UD_OP_GEMM, UD_X86_FLOAT, omp_kernel<k_matmul<UD_OP_GEMM>, small_product>},
    {UD_OP_GEMM_BIAS_ACT, UD_X86_FLOAT, omp_kernel<k_matmul<UD_OP_GEMM_BIAS_ACT>>},
    {0, 0, nullptr},
};
