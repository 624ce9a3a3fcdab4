// conv_im2col.cpp — convolution as GEMM: each image's receptive fields are unrolled into a
// column matrix col [c/g * r * s, oh * ow] and multiplied with the weight matrix by OpenBLAS.
// A 1x1, stride-1, unpadded conv uses the input itself as the column matrix. Channels-last
// activations (p.cl) are read and written in place: x, y and their gradients are then [pixels,
// channels] matrices, so the same products run with transposed operands (ld = channels).
#include <algorithm>

#include "conv_algos.h"
#include "dense_common.h"

namespace ud_dense {
namespace {

bool is_pointwise(const ConvShape& p) {
  return p.r == 1 && p.s == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0;
}

// col[(c * r + i) * s + j][oh * ow] = x[c, oh * sh - ph + i * dh, ow * sw - pw + j * dw] or 0.
// Element strides of the channels, rows and columns of an activation [chans, h, w] (one image).
struct Strides {
  int64_t c, h, w;
  Strides(bool cl, int64_t chans, int64_t h_, int64_t w_)
      : c(cl ? 1 : h_ * w_), h(cl ? w_ * chans : w_), w(cl ? chans : 1) {}
};

template <class T>
void im2col(const ConvShape& p, const T* x, T* col) {
  const int64_t plane = p.oh * p.ow;
  const Strides st(p.cl, p.c, p.h, p.w);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.cg() * p.r * p.s; row++) {
    const T* src = x + row / (p.r * p.s) * st.c;
    T* dst = col + row * plane;
    std::fill(dst, dst + plane, T(0));
    for_tap_rows(p, row / p.s % p.r, row % p.s,
                 [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
                   for (int64_t ow = lo; ow < hi; ow++)
                     dst[oh * p.ow + ow] = src[ih * st.h + (ow * p.sw + off) * st.w];
                 });
  }
}

// The adjoint of im2col: gx (cg channels, zeroed by the caller) += every column entry at its
// input position.
template <class T>
void col2im(const ConvShape& p, const T* col, T* gx) {
  const int64_t plane = p.oh * p.ow;
  const Strides st(p.cl, p.c, p.h, p.w);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.cg(); c++) {
    T* dst = gx + c * st.c;
    for (int64_t i = 0; i < p.r; i++)
      for (int64_t j = 0; j < p.s; j++) {
        const T* src = col + ((c * p.r + i) * p.s + j) * plane;
        for_tap_rows(p, i, j, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
          for (int64_t ow = lo; ow < hi; ow++)
            dst[ih * st.h + (ow * p.sw + off) * st.w] += src[oh * p.ow + ow];
        });
      }
  }
}

template <class T>
void forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  const Strides sx(p.cl, p.c, p.h, p.w), sy(p.cl, p.k, p.oh, p.ow);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      const T* xg = x + n * p.c * p.h * p.w + g * cg * sx.c;
      T* yg = y + n * p.k * plane + g * kg * sy.c;
      if (!direct) im2col(p, xg, col);
      if (bias)
        for (int64_t k = 0; k < kg; k++)
          for (int64_t i = 0; i < plane; i++) yg[k * sy.c + i * sy.w] = bias[g * kg + k];
      const T* wg = w + g * kg * rows;
      const T beta = T(bias ? 1 : 0);
      if (!p.cl)
        gemm(false, false, kg, plane, rows, T(1), wg, rows, direct ? xg : col, plane, beta, yg,
             plane);
      else  // y^T [plane, kg] = col^T @ w^T (x itself is col^T [plane, cg], ld c)
        gemm(!direct, true, plane, kg, rows, T(1), direct ? xg : col, direct ? p.c : plane, wg,
             rows, beta, yg, p.k);
    }
}

template <class T>
void backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  const Strides sx(p.cl, p.c, p.h, p.w), sy(p.cl, p.k, p.oh, p.ow);
  if (!direct) std::fill(gx, gx + p.n * p.c * p.h * p.w, T(0));
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      T* gxg = gx + n * p.c * p.h * p.w + g * cg * sx.c;
      const T *wg = w + g * kg * rows, *gyg = gy + n * p.k * plane + g * kg * sy.c;
      if (!p.cl)
        gemm(true, false, rows, plane, kg, T(1), wg, rows, gyg, plane, T(0), direct ? gxg : col,
             plane);
      else if (direct)  // gx^T [plane, cg] = gy^T @ w
        gemm(false, false, plane, cg, kg, T(1), gyg, p.k, wg, rows, T(0), gxg, p.c);
      else  // col = w^T @ (gy^T)^T
        gemm(true, true, rows, plane, kg, T(1), wg, rows, gyg, p.k, T(0), col, plane);
      if (!direct) col2im(p, col, gxg);
    }
}

template <class T>
void backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, rows = cg * p.r * p.s;
  const bool direct = is_pointwise(p);
  T* col = direct ? nullptr : scratch<T>(0, rows * plane);
  const Strides sx(p.cl, p.c, p.h, p.w), sy(p.cl, p.k, p.oh, p.ow);
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t g = 0; g < p.g; g++) {
      const T* xg = x + n * p.c * p.h * p.w + g * cg * sx.c;
      const T* gyg = gy + n * p.k * plane + g * kg * sy.c;
      if (!direct) im2col(p, xg, col);
      // channels-last: gy^T [plane, kg] (ld k), and x itself is col^T [plane, cg] (ld c)
      gemm(p.cl, !(p.cl && direct), kg, rows, plane, T(1), gyg, p.cl ? p.k : plane,
           direct ? xg : col, p.cl && direct ? p.c : plane, T(n ? 1 : 0), gw + g * kg * rows,
           rows);
    }
}

}  // namespace

UD_CONV_ALGO(conv_im2col)

}  // namespace ud_dense
