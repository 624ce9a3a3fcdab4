// conv_algos.h — the conv2d problem and the portable algorithms that solve it (direct,
// im2col+GEMM, Winograd F(2x2,3x3)). They take dense NCHW / KCRS buffers, fully overwrite their
// output, use OpenMP and OpenBLAS only, and are shared with the arm64 plugin.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ud_dense {

// x [n, c, h, w], weight [k, c/g, r, s], y [n, k, oh, ow]; symmetric padding. cl: x, y and
// their gradients are dense channels-last (im2col, and direct for depthwise; else NCHW).
struct ConvShape {
  int64_t n, c, h, w;
  int64_t k, r, s;
  int64_t oh, ow;
  int64_t sh, sw, ph, pw, dh, dw, g;
  bool cl;
  int64_t cg() const { return c / g; }
  int64_t kg() const { return k / g; }
};

enum class ConvDir { forward, backward_input, backward_weight };

// One algorithm: forward (bias may be null), grad of the input, grad of the weight.
template <class T>
struct ConvAlgo {
  void (*forward)(const ConvShape& p, const T* x, const T* w, const T* bias, T* y);
  void (*backward_input)(const ConvShape& p, const T* gy, const T* w, T* gx);
  void (*backward_weight)(const ConvShape& p, const T* gy, const T* x, T* gw);
};

template <class T>
ConvAlgo<T> conv_direct();
template <class T>
ConvAlgo<T> conv_im2col();
template <class T>
ConvAlgo<T> conv_winograd();

// Defines NAME<T>() for T = float and double from the forward, backward_input and
// backward_weight templates of the file that expands it.
#define UD_CONV_ALGO(NAME)                                      \
  template <class T>                                            \
  ConvAlgo<T> NAME() {                                          \
    return {forward<T>, backward_input<T>, backward_weight<T>}; \
  }                                                             \
  template ConvAlgo<float> NAME<float>();                       \
  template ConvAlgo<double> NAME<double>();

// Output positions o in [0, n_out) whose input position o * stride + off lies in [0, n_in).
inline void valid_range(int64_t n_out, int64_t stride, int64_t off, int64_t n_in, int64_t* lo,
                        int64_t* hi) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  *lo = off >= 0 ? 0 : ceil_div(-off, stride);
  *hi = std::clamp(ceil_div(n_in - off, stride), int64_t(0), n_out);
  *lo = std::min(*lo, *hi);
}

// For kernel tap (i, j): calls f(oh, ih, lo, hi, off) for every output row oh whose tap lies in
// input row ih; output columns [lo, hi) read input columns ow * sw + off, the others padding.
template <class F>
inline void for_tap_rows(const ConvShape& p, int64_t i, int64_t j, F&& f) {
  const int64_t off = j * p.dw - p.pw;
  int64_t lo, hi;
  valid_range(p.ow, p.sw, off, p.w, &lo, &hi);
  for (int64_t oh = 0; oh < p.oh; oh++) {
    const int64_t ih = oh * p.sh - p.ph + i * p.dh;
    if (ih >= 0 && ih < p.h) f(oh, ih, lo, hi, off);
  }
}

inline bool winograd_applies(const ConvShape& p) {
  return p.r == 3 && p.s == 3 && p.sh == 1 && p.sw == 1 && p.dh == 1 && p.dw == 1;
}

}  // namespace ud_dense
