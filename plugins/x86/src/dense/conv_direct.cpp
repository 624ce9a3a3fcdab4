// conv_direct.cpp — direct convolution: plain loops over output planes, no extra memory. Best
// for depthwise and other small-group shapes where a GEMM would be tiny. Inner loops run along
// output rows so the compiler vectorizes them for stride 1.
#include "conv_algos.h"

namespace ud_dense {
namespace {

template <class T>
void forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t k = 0; k < p.k; k++) {
      T* yo = y + (n * p.k + k) * plane;
      for (int64_t i = 0; i < plane; i++) yo[i] = bias ? bias[k] : T(0);
      for (int64_t c = 0; c < cg; c++)
        for (int64_t r = 0; r < p.r; r++)
          for (int64_t s = 0; s < p.s; s++) {
            const T wv = w[((k * cg + c) * p.r + r) * p.s + s];
            const T* xc = x + (n * p.c + k / kg * cg + c) * hw;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              const T* xr = xc + ih * p.w;
              T* yr = yo + oh * p.ow;
              if (p.sw == 1)  // the common case, written so that it vectorizes
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
              else
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * p.sw + off];
            });
          }
    }
}

template <class T>
void backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t c = 0; c < p.c; c++) {
      T* gxo = gx + (n * p.c + c) * hw;
      for (int64_t i = 0; i < hw; i++) gxo[i] = T(0);
      for (int64_t k = c / cg * kg; k < (c / cg + 1) * kg; k++)
        for (int64_t r = 0; r < p.r; r++)
          for (int64_t s = 0; s < p.s; s++) {
            const T wv = w[((k * cg + c % cg) * p.r + r) * p.s + s];
            const T* gyo = gy + (n * p.k + k) * plane;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              T* gxr = gxo + ih * p.w;
              const T* gyr = gyo + oh * p.ow;
              if (p.sw == 1)
                for (int64_t ow = lo; ow < hi; ow++) gxr[ow + off] += wv * gyr[ow];
              else
                for (int64_t ow = lo; ow < hi; ow++) gxr[ow * p.sw + off] += wv * gyr[ow];
            });
          }
    }
}

template <class T>
void backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = 0; k < p.k; k++)
    for (int64_t cl = 0; cl < cg; cl++)
      for (int64_t r = 0; r < p.r; r++)
        for (int64_t s = 0; s < p.s; s++) {
          T acc = T(0);
          for (int64_t n = 0; n < p.n; n++) {
            const T* xc = x + (n * p.c + k / kg * cg + cl) * hw;
            const T* gyo = gy + (n * p.k + k) * plane;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              for (int64_t ow = lo; ow < hi; ow++)
                acc += gyo[oh * p.ow + ow] * xc[ih * p.w + ow * p.sw + off];
            });
          }
          gw[((k * cg + cl) * p.r + r) * p.s + s] = acc;
        }
}

}  // namespace

UD_CONV_ALGO(conv_direct)

}  // namespace ud_dense
