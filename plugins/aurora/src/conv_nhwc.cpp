// conv_nhwc.cpp — conv2d and its gradients on channels-last tensors, vectorized the way VE code
// is: along channels.
//
// A dense NHWC batch is a matrix [N*H*W pixels, C]. conv2d is then one GEMM per group over
// [N*OH*OW, R*S*C/g] x [R*S*C/g, K/g] written straight into y's rows: its left operand is
// lowered in blocks of output pixels (a row is the R*S taps' runs of channels, each copied
// whole) or, for a 1x1 unit-stride conv, is x itself; no transpose anywhere. The gradients are
// the same products turned around. "direct" keeps one pixel's channels as the vector and adds a
// tap's channel at a time ("auto" takes it for depthwise layers, whose GEMMs are one column).
#include "conv.h"

namespace aurora {

namespace {

constexpr int64_t kRowBlock = int64_t(1) << 18;  // elements of a core's lowered rows

template <class T> T* scratch(VESIMkernel_ctx* k, int64_t n) {
  return static_cast<T*>(vesimDevScratch(k, uint64_t(std::max<int64_t>(n, 1)) * sizeof(T)));
}

// Weights as wd[(r, s, c)][k] (c within the group, k over all K): a group's GEMM operand is
// the block of its output channels' columns; "direct" reads one row per tap and channel.
template <class T> T* pack_weight(VESIMkernel_ctx* k, const Geo& g, const Tensor& w) {
  T* wd = scratch<T>(k, g.k * g.rows());
  const T* p = w.ptr<const T>();
  const int64_t* st = w.strides;
  if (wd)
    for (int64_t r = 0, j = 0; r < g.r; r++)
      for (int64_t s = 0; s < g.s; s++)
        for (int64_t c = 0; c < g.cg; c++, j++)
          for (int64_t ko = 0; ko < g.k; ko++) wd[j * g.k + ko] = p[ko * st[0] + c * st[1] + r * st[2] + s * st[3]];
  return wd;
}

// Output pixels per block: the work spread over the cores, a core's lowered rows < kRowBlock.
int64_t block_rows(VESIMkernel_ctx* k, const Geo& g, int64_t m) {
  const int64_t cores = vesimDevCores(k), fit = std::max<int64_t>(16, kRowBlock / std::max<int64_t>(g.rows(), 1));
  return std::max<int64_t>(1, std::min((m + cores - 1) / cores, fit));
}

bool pointwise(const Geo& g) {  // y's pixels are x's: the GEMM reads x as it is
  return g.r == 1 && g.s == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Lowered rows of output pixels [m0, m1) and group gi: col[m - m0][(r, s, c)] = x[n, ih, iw,
// gi * cg + c], 0 in the padding. kScatter: the reverse, x[...] += col[...] (grad of x), for
// input rows [h0, h1) only.
template <bool kScatter, class T, class X, class Col>
void lower(const Geo& g, X* x, int64_t gi, int64_t m0, int64_t m1, Col* col, int64_t h0 = 0, int64_t h1 = 0) {
  for (int64_t m = m0; m < m1; m++) {
    const int64_t n = m / g.plane(), oh = m / g.ow % g.oh, ow = m % g.ow;
    Col* o = col + (m - m0) * g.rows();
    for (int64_t r = 0; r < g.r; r++) {
      const int64_t ih = oh * g.sh - g.ph + r * g.dh;
      for (int64_t s = 0; s < g.s; s++, o += g.cg) {
        const int64_t iw = ow * g.sw - g.pw + s * g.dw;
        if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w || (kScatter && (ih < h0 || ih >= h1))) {
          if constexpr (!kScatter) std::fill_n(o, g.cg, T(0));
          continue;
        }
        X* in = x + ((n * g.h + ih) * g.w + iw) * g.c + gi * g.cg;
        if constexpr (kScatter) {
#pragma omp simd
          for (int64_t c = 0; c < g.cg; c++) in[c] += o[c];
        } else {
#pragma omp simd
          for (int64_t c = 0; c < g.cg; c++) o[c] = in[c];
        }
      }
    }
  }
}

// out[ko] += x[(ko's group) * cg + c] * v[ko] for every output channel ko: vectors along K.
template <class T> inline void group_axpy(const Geo& g, const T* x, int64_t c, const T* v, T* out) {
  if (g.g == 1) {
    const T xv = x[c];
#pragma omp simd
    for (int64_t ko = 0; ko < g.k; ko++) out[ko] += xv * v[ko];
  } else if (g.cg == 1 && g.kg == 1) {  // depthwise
#pragma omp simd
    for (int64_t ko = 0; ko < g.k; ko++) out[ko] += x[ko] * v[ko];
  } else {
    for (int64_t gi = 0; gi < g.g; gi++) {
      const T xv = x[gi * g.cg + c];
#pragma omp simd
      for (int64_t kk = 0; kk < g.kg; kk++) out[gi * g.kg + kk] += xv * v[gi * g.kg + kk];
    }
  }
}

// Calls f(r, s, ih, iw) for the taps of output pixel m that fall inside the input.
template <class F> inline void taps(const Geo& g, int64_t m, F&& f) {
  const int64_t oh = m / g.ow % g.oh, ow = m % g.ow;
  for (int64_t r = 0; r < g.r; r++) {
    const int64_t ih = oh * g.sh - g.ph + r * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (int64_t s = 0; s < g.s; s++) {
      const int64_t iw = ow * g.sw - g.pw + s * g.dw;
      if (iw >= 0 && iw < g.w) f(r, s, ih, iw);
    }
  }
}

}  // namespace

template <class T>
VESIMresult nhwc_conv(VESIMkernel_ctx* k, const Geo& g, const T* x, const Tensor& w, const T* bias,
                      const Epi<T>& epi, T* y) {
  const T* wd = pack_weight<T>(k, g, w);
  if (!wd) return VESIM_ERROR_OUT_OF_MEMORY;
  const int64_t m = g.n * g.plane(), rows = g.rows();
  if (g.algo == kDirect)
    return parallel(k, m, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i++) {
        T* out = y + i * g.k;
        for (int64_t ko = 0; ko < g.k; ko++) out[ko] = bias ? bias[ko] : T(0);
        taps(g, i, [&](int64_t r, int64_t s, int64_t ih, int64_t iw) {
          const T* in = x + ((i / g.plane() * g.h + ih) * g.w + iw) * g.c;
          for (int64_t c = 0; c < g.cg; c++) group_axpy(g, in, c, wd + ((r * g.s + s) * g.cg + c) * g.k, out);
        });
        if (epi.active()) epilogue(epi, y, i * g.k, 1, g.k, g.k, (const T*)nullptr, (const T*)nullptr);
      }
    });
  const bool direct_a = pointwise(g);
  const int64_t bm = block_rows(k, g, m), blocks = (m + bm - 1) / bm;
  T* buf = direct_a ? nullptr : scratch<T>(k, vesimDevCores(k) * bm * rows);
  if (!direct_a && !buf) return VESIM_ERROR_OUT_OF_MEMORY;
  return parallel_chunks(k, blocks * g.g, 1, [&](int64_t b, int64_t e, int chunk) {
    for (int64_t i = b; i < e; i++) {
      const int64_t gi = i % g.g, m0 = i / g.g * bm, m1 = std::min(m, m0 + bm);
      Mat<const T> a{x + m0 * g.c + gi * g.cg, m1 - m0, rows, g.c, 1};
      if (!direct_a) {
        T* col = buf + chunk * bm * rows;
        lower<false, T>(g, x, gi, m0, m1, col);
        a = {col, m1 - m0, rows, rows, 1};
      }
      T* yt = y + m0 * g.k + gi * g.kg;
      gemm<T>(k, a, {wd + gi * g.kg, rows, g.kg, g.k, 1}, {yt, m1 - m0, g.kg, g.k, 1}, T(1), T(0), nullptr, true);
      if (bias || epi.active())  // on the tile just written, while it is in cache
        epilogue(epi, y, yt - y, m1 - m0, g.kg, g.k, (const T*)nullptr, bias ? bias + gi * g.kg : nullptr);
    }
  });
}

template <class T>
VESIMresult nhwc_grad_x(VESIMkernel_ctx* k, const Geo& g, const T* gy, const Tensor& w, T* gx) {
  const T* wd = pack_weight<T>(k, g, w);
  if (!wd) return VESIM_ERROR_OUT_OF_MEMORY;
  const int64_t rows = g.rows(), plane = g.plane();
  if (g.algo == kDirect)  // gathers per input pixel: grad_x[c] = sum of grad_y . w over its taps
    return parallel(k, g.n * g.h * g.w, 4, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; p++) {
        const int64_t n = p / (g.h * g.w), ih = p / g.w % g.h, iw = p % g.w;
        T* out = gx + p * g.c;
        for (int64_t r = 0; r < g.r; r++) {
          const int64_t th = ih + g.ph - r * g.dh, oh = th / g.sh;
          if (th < 0 || th % g.sh || oh >= g.oh) continue;
          for (int64_t s = 0; s < g.s; s++) {
            const int64_t tw = iw + g.pw - s * g.dw, ow = tw / g.sw;
            if (tw < 0 || tw % g.sw || ow >= g.ow) continue;
            const T* gr = gy + ((n * g.oh + oh) * g.ow + ow) * g.k;
            const T* wr = wd + (r * g.s + s) * g.cg * g.k;
            if (g.cg == 1 && g.kg == 1) {
#pragma omp simd
              for (int64_t c = 0; c < g.c; c++) out[c] += gr[c] * wr[c];
              continue;
            }
            for (int64_t gi = 0; gi < g.g; gi++)
              for (int64_t c = 0; c < g.cg; c++) {
                const T* row = wr + c * g.k + gi * g.kg;
                T acc = 0;
#pragma omp simd reduction(+ : acc)
                for (int64_t kk = 0; kk < g.kg; kk++) acc += gr[gi * g.kg + kk] * row[kk];
                out[gi * g.cg + c] += acc;
              }
          }
        }
      }
    });
  // col = grad_y's rows @ wd_g^T, scattered onto the taps' input pixels. A part is a band of
  // input rows of one (image, group): no two cores scatter onto the same values; the output rows
  // whose taps reach two bands are multiplied for both (fewer pairs than cores only).
  const int64_t cores = vesimDevCores(k), pairs = g.n * g.g;
  const int64_t bands = std::min(g.h, std::max<int64_t>(1, (cores + pairs - 1) / std::max<int64_t>(pairs, 1)));
  const int64_t bm = std::min(plane, std::max<int64_t>(16, kRowBlock / std::max<int64_t>(rows, 1)));
  T* buf = scratch<T>(k, cores * bm * rows);
  if (!buf) return VESIM_ERROR_OUT_OF_MEMORY;
  return parallel_chunks(k, pairs * bands, 1, [&](int64_t b, int64_t e, int chunk) {
    T* col = buf + chunk * bm * rows;
    for (int64_t i = b; i < e; i++) {
      const int64_t n = i / bands / g.g, gi = i / bands % g.g, h0 = i % bands * g.h / bands,
                    h1 = (i % bands + 1) * g.h / bands, t = h0 + g.ph - g.dh * (g.r - 1);
      const int64_t oh0 = t <= 0 ? 0 : (t + g.sh - 1) / g.sh, oh1 = std::min(g.oh, (h1 - 1 + g.ph) / g.sh + 1);
      for (int64_t m0 = n * plane + oh0 * g.ow; m0 < n * plane + oh1 * g.ow; m0 += bm) {
        const int64_t m1 = std::min(n * plane + oh1 * g.ow, m0 + bm);
        gemm<T>(k, {gy + m0 * g.k + gi * g.kg, m1 - m0, g.kg, g.k, 1}, {wd + gi * g.kg, g.kg, rows, 1, g.k},
                {col, m1 - m0, rows, rows, 1}, T(1), T(0), nullptr, true);
        lower<true, T>(g, gx, gi, m0, m1, static_cast<const T*>(col), h0, h1);
      }
    }
  });
}

template <class T>
VESIMresult nhwc_grad_w(VESIMkernel_ctx* k, const Geo& g, const T* gy, const T* x, Tensor& gw) {
  const int64_t m = g.n * g.plane(), rows = g.rows(), cores = vesimDevCores(k), per = rows * g.k;
  VESIMresult res = VESIM_SUCCESS;
  T* sum = scratch<T>(k, per);  // grad_w as wd[(r, s, c)][k]
  if (!sum) return VESIM_ERROR_OUT_OF_MEMORY;
  std::fill_n(sum, per, T(0));
  if (g.algo == kDirect) {  // one row of wd per part: a sum over every output pixel
    res = parallel(k, rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; j++) {
        const int64_t r = j / (g.s * g.cg), s = j / g.cg % g.s, c = j % g.cg;
        for (int64_t i = 0; i < m; i++) {
          const int64_t oh = i / g.ow % g.oh, ow = i % g.ow, ih = oh * g.sh - g.ph + r * g.dh,
                        iw = ow * g.sw - g.pw + s * g.dw;
          if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
            group_axpy(g, x + ((i / g.plane() * g.h + ih) * g.w + iw) * g.c, c, gy + i * g.k, sum + j * g.k);
        }
      }
    });
  } else {  // each core adds col^T @ grad_y of its blocks into its own wd; those are added up
    const bool direct_a = pointwise(g);
    const int64_t bm = block_rows(k, g, m), blocks = (m + bm - 1) / bm, lowered = direct_a ? 0 : bm * rows;
    T* buf = scratch<T>(k, cores * (lowered + per));
    if (!buf) return VESIM_ERROR_OUT_OF_MEMORY;
    std::fill_n(buf, cores * (lowered + per), T(0));
    res = parallel_chunks(k, blocks * g.g, 1, [&](int64_t b, int64_t e, int chunk) {
      T *col = buf + chunk * (lowered + per), *part = col + lowered;
      for (int64_t i = b; i < e; i++) {
        const int64_t gi = i % g.g, m0 = i / g.g * bm, m1 = std::min(m, m0 + bm);
        Mat<const T> at{x + m0 * g.c + gi * g.cg, rows, m1 - m0, 1, g.c};
        if (!direct_a) {
          lower<false, T>(g, x, gi, m0, m1, col);
          at = {col, rows, m1 - m0, 1, rows};
        }
        gemm<T>(k, at, {gy + m0 * g.k + gi * g.kg, m1 - m0, g.kg, g.k, 1}, {part + gi * g.kg, rows, g.kg, g.k, 1},
                T(1), T(1), nullptr, true);
      }
    });
    for (int64_t c = 0; c < cores && !res; c++) {
      const T* part = buf + c * (lowered + per) + lowered;
#pragma omp simd
      for (int64_t i = 0; i < per; i++) sum[i] += part[i];
    }
  }
  T* p = gw.ptr<T>();
  const int64_t* st = gw.strides;
  for (int64_t j = 0; j < rows && !res; j++)
    for (int64_t ko = 0; ko < g.k; ko++)
      p[ko * st[0] + j % g.cg * st[1] + j / (g.s * g.cg) * st[2] + j / g.cg % g.s * st[3]] = sum[j * g.k + ko];
  return res;
}

#define INSTANTIATE(T)                                                                                     \
  template VESIMresult nhwc_conv<T>(VESIMkernel_ctx*, const Geo&, const T*, const Tensor&, const T*, const Epi<T>&, T*); \
  template VESIMresult nhwc_grad_x<T>(VESIMkernel_ctx*, const Geo&, const T*, const Tensor&, T*);         \
  template VESIMresult nhwc_grad_w<T>(VESIMkernel_ctx*, const Geo&, const T*, const T*, Tensor&);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace aurora
