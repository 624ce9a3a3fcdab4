// conv_im2col.cpp — convolution as GEMM: each image's receptive fields are unrolled into a
// column matrix col [c/g * r * s, oh * ow] and multiplied with the weight matrix by OpenBLAS.
// A 1x1, stride-1, unpadded conv uses the input itself as the column matrix.
#include <algorithm>

#include "conv_algos.h"
#include "dense_common.h"

namespace ud_dense {
namespace {

bool is_pointwise(const ConvShape& p) {
  return p.r == 1 && p.s == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0;
}

// col[(c * r + i) * s + j][oh * ow] = x[c, oh * sh - ph + i * dh, ow * sw - pw + j * dw] or 0.
template <class T>
void im2col(const ConvShape& p, const T* x, T* col) {
  const int64_t plane = p.oh * p.ow;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.cg() * p.r * p.s; row++) {
    const T* src = x + row / (p.r * p.s) * p.h * p.w;
    T* dst = col + row * plane;
    std::fill(dst, dst + plane, T(0));
    for_tap_rows(p, row / p.s % p.r, row % p.s,
                 [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
                   for (int64_t ow = lo; ow < hi; ow++)
                     dst[oh * p.ow + ow] = src[ih * p.w + ow * p.sw + off];
                 });
  }
}

// The adjoint of im2col: gx (cg planes, zeroed here) += every column entry at its input position.
template <class T>
void col2im(const ConvShape& p, const T* col, T* gx) {
  const int64_t plane = p.oh * p.ow;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.cg(); c++) {
    T* dst = gx + c * p.h * p.w;
    std::fill(dst, dst + p.h * p.w, T(0));
    for (int64_t i = 0; i < p.r; i++)
      for (int64_t j = 0; j < p.s; j++) {
        const T* src = col + ((c * p.r + i) * p.s + j) * plane;
        for_tap_rows(p, i, j, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
          for (int64_t ow = lo; ow < hi; ow++)
            dst[ih * p.w + ow * p.sw + off] += src[oh * p.ow + ow];
        });
      }
  }
}

template <class T>
void forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      const T* xg = x + (n * p.c + g * cg) * p.h * p.w;
      T* yg = y + (n * p.k + g * kg) * plane;
      if (!direct) im2col(p, xg, col);
      if (bias)
        for (int64_t k = 0; k < kg; k++)
          for (int64_t i = 0; i < plane; i++) yg[k * plane + i] = bias[g * kg + k];
      gemm(false, false, kg, plane, rows, T(1), w + g * kg * rows, rows, direct ? xg : col, plane,
           T(bias ? 1 : 0), yg, plane);
    }
}

template <class T>
void backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      T* gxg = gx + (n * p.c + g * cg) * p.h * p.w;
      gemm(true, false, rows, plane, kg, T(1), w + g * kg * rows, rows,
           gy + (n * p.k + g * kg) * plane, plane, T(0), direct ? gxg : col, plane);
      if (!direct) col2im(p, col, gxg);
    }
}

template <class T>
void backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      const T* xg = x + (n * p.c + g * cg) * p.h * p.w;
      if (!direct) im2col(p, xg, col);
      gemm(false, true, kg, rows, plane, T(1), gy + (n * p.k + g * kg) * plane, plane,
           direct ? xg : col, plane, T(n ? 1 : 0), gw + g * kg * rows, rows);
    }
}

}  // namespace

UD_CONV_ALGO(conv_im2col)

}  // namespace ud_dense
