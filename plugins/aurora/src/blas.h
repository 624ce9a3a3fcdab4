// blas.h — matrix products through the BLAS standing in for the vendor's (OpenBLAS,
// scipy_-prefixed), with strided operands packed only when BLAS cannot take them as they are.
#pragma once

#include "aurora.h"

namespace aurora {

// A row-major matrix view on the device: element (i, j) at p[i * rs + j * cs].
template <class T> struct Mat {
  T* p;
  int64_t rows, cols, rs, cs;
};

// C = alpha * A @ B + beta * C for any strides (scratch holds packed copies; it must have room
// for rows*cols of A, B and C). beta == 0 ignores C's old contents, nan included. `serial`: on
// the calling core only (inside a parallel region).
template <class T>
VESIMresult gemm(VESIMkernel_ctx* k, Mat<const T> a, Mat<const T> b, Mat<T> c, T alpha, T beta,
                 T* scratch, bool serial = false);

// Bytes of scratch gemm() may need for these shapes.
inline uint64_t gemm_scratch_bytes(int64_t m, int64_t n, int64_t k, int64_t itemsize) {
  return uint64_t(m * k + k * n + m * n) * uint64_t(itemsize) + 256;
}

// Largest extent BLAS (32-bit ints) accepts.
constexpr int64_t kBlasMax = 0x7fffffff;

}  // namespace aurora
