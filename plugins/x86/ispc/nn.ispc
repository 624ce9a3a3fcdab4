// nn.ispc — pooling over one [H, W] plane, and batch-norm rows. The C side
// (src/nn.c) validates, walks planes, channels and rows, and splits them over cores.
#include "common.isph"
#include "pool2d.h"

typedef uniform struct UD_Pool2d *uniform Geom;

// The input window [h0, h1) x [w0, w1) of output cell (oh, ow) and its divisor (0: no input).
// Average pooling follows torch: the window clipped to the padded input, then to the input,
// divided by either size (count_include_pad); adaptive cell i covers
// [floor(i H / oh), ceil((i + 1) H / oh)).
#define UD_WINDOW(Q)                                                                      \
  static inline void ud_window(Geom g, Q int64 oh, Q int64 ow, Q int64 &h0, Q int64 &h1,  \
                               Q int64 &w0, Q int64 &w1, Q double &div) {                 \
    if (g->adaptive) {                                                                    \
      h0 = oh * g->h / g->oh;                                                             \
      h1 = ((oh + 1) * g->h + g->oh - 1) / g->oh;                                         \
      w0 = ow * g->w / g->ow;                                                             \
      w1 = ((ow + 1) * g->w + g->ow - 1) / g->ow;                                         \
      div = (double)((h1 - h0) * (w1 - w0));                                              \
      return;                                                                             \
    }                                                                                     \
    h0 = oh * g->sh - g->ph;                                                              \
    w0 = ow * g->sw - g->pw;                                                              \
    h1 = min(h0 + g->kh, g->h + g->ph);                                                   \
    w1 = min(w0 + g->kw, g->w + g->pw);                                                   \
    Q int64 padded = (h1 - h0) * (w1 - w0);                                               \
    h0 = max(h0, (Q int64)0);                                                             \
    w0 = max(w0, (Q int64)0);                                                             \
    h1 = min(h1, g->h);                                                                   \
    w1 = min(w1, g->w);                                                                   \
    Q int64 inside = max(h1 - h0, (Q int64)0) * max(w1 - w0, (Q int64)0);                 \
    div = inside == 0 ? 0.0d : (double)(g->count_include_pad ? padded : inside);          \
  }
UD_WINDOW(varying)
UD_WINDOW(uniform)

#define UD_POOL(sfx, T, _)                                                                 \
  /* max over each window; indices are h * W + w; a larger value or a nan takes the tap */  \
  export void ud_max_pool_##sfx(Geom g, const void *uniform x_, void *uniform y_,           \
                                uniform int64 *uniform idx) {                              \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    for (uniform int64 oh = 0; oh < g->oh; oh++) /* rows uniform: scalar row arithmetic */ \
      foreach (ow = 0 ... g->ow) {                                                         \
        T best = 0;                                                                        \
        int64 at = -1;                                                                     \
        for (uniform int64 r = 0; r < g->kh; r++) {                                        \
          const uniform int64 h = oh * g->sh - g->ph + r * g->dh;                          \
          if (h < 0 || h >= g->h) continue;                                                \
          for (uniform int64 s = 0; s < g->kw; s++) {                                      \
            const int32 w = ow * (int32)g->sw - (int32)g->pw + (int32)(s * g->dw);         \
            if (w >= 0 && w < g->w) {                                                      \
              T v = x[h * g->xs[0] + (int64)w * g->xs[1]];                                 \
              if (at < 0 || v > best || v != v) {                                         \
                best = v;                                                                  \
                at = h * g->w + w;                                                         \
              }                                                                            \
            }                                                                              \
          }                                                                                \
        }                                                                                  \
        y[oh * g->ys[0] + ow * g->ys[1]] = best;                                           \
        idx[oh * g->is[0] + ow * g->is[1]] = at;                                           \
      }                                                                                    \
  }                                                                                        \
  /* gx = 0, then gx[idx] += gy; false (*bad = the index) at an index outside the plane */ \
  export uniform int32 ud_max_pool_backward_##sfx(Geom g, void *uniform gx_,               \
                                                 const void *uniform gy_,                  \
                                                 const uniform int64 *uniform idx,         \
                                                 uniform int64 *uniform bad) {             \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    foreach (h = 0 ... g->h, w = 0 ... g->w) gx[h * g->xs[0] + w * g->xs[1]] = 0;          \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        uniform int64 i = idx[oh * g->is[0] + ow * g->is[1]];                              \
        if (i < 0 || i >= g->h * g->w) {                                                   \
          *bad = i;                                                                        \
          return 0;                                                                        \
        }                                                                                  \
        gx[(i / g->w) * g->xs[0] + (i % g->w) * g->xs[1]] += gy[oh * g->ys[0] + ow * g->ys[1]]; \
      }                                                                                    \
    return 1;                                                                              \
  }                                                                                        \
  /* average over each window (avg_pool2d and adaptive_avg_pool2d, see ud_window) */        \
  export void ud_avg_pool_##sfx(Geom g, const void *uniform x_, void *uniform y_) {         \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    foreach (oh = 0 ... g->oh, ow = 0 ... g->ow) {                                         \
      int64 h0, h1, w0, w1;                                                                \
      double div, sum = 0;                                                                 \
      ud_window(g, oh, ow, h0, h1, w0, w1, div);                                           \
      for (int64 h = h0; h < h1; h++)                                                      \
        for (int64 w = w0; w < w1; w++) sum += x[h * g->xs[0] + w * g->xs[1]];             \
      y[oh * g->ys[0] + ow * g->ys[1]] = div > 0 ? (T)(sum / div) : 0;                     \
    }                                                                                      \
  }                                                                                        \
  export void ud_avg_pool_backward_##sfx(Geom g, void *uniform gx_, const void *uniform gy_) { \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    foreach (h = 0 ... g->h, w = 0 ... g->w) gx[h * g->xs[0] + w * g->xs[1]] = 0;          \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow, h0, h1, w0, w1, div);                                         \
        if (div <= 0) continue;                                                            \
        uniform T v = (uniform T)(gy[oh * g->ys[0] + ow * g->ys[1]] / div);                \
        for (uniform int64 h = h0; h < h1; h++)                                            \
          foreach (w = w0 ... w1) gx[h * g->xs[0] + w * g->xs[1]] += v;                    \
      }                                                                                    \
  }
UD_FLOATS(UD_POOL, _)

#define UD_BN(sfx, T, _)                                                                   \
  /* sums[0] += sum(x - shift), sums[1] += sum((x - shift)^2), in double */                 \
  export void ud_bn_moments_##sfx(uniform int64 n, const void *uniform x_, uniform int64 sx, \
                                  uniform double shift, uniform double *uniform sums) {    \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    double s1 = 0, s2 = 0;                                                                 \
    foreach (i = 0 ... n) {                                                                \
      double d = (double)x[(int64)i * sx] - shift;                                         \
      s1 += d;                                                                             \
      s2 += d * d;                                                                         \
    }                                                                                      \
    sums[0] += reduce_add(s1);                                                             \
    sums[1] += reduce_add(s2);                                                             \
  }                                                                                        \
  /* sums[0] += sum(g), sums[1] += sum(g (x - mean)) */                                    \
  export void ud_bn_grad_sums_##sfx(uniform int64 n, const void *uniform g_, uniform int64 sg, \
                                    const void *uniform x_, uniform int64 sx,              \
                                    uniform double mean, uniform double *uniform sums) {   \
    const uniform T *uniform g = (const uniform T *uniform)g_;                             \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    double s1 = 0, s2 = 0;                                                                 \
    foreach (i = 0 ... n) {                                                                \
      double gi = g[(int64)i * sg];                                                        \
      s1 += gi;                                                                            \
      s2 += gi * ((double)x[(int64)i * sx] - mean);                                        \
    }                                                                                      \
    sums[0] += reduce_add(s1);                                                             \
    sums[1] += reduce_add(s2);                                                             \
  }                                                                                        \
  /* o = p (u - m) + q v + k; o = p (u - m) + k when v is NULL */                          \
  export void ud_bn_affine_##sfx(uniform int64 n, void *uniform o_, uniform int64 so,      \
                                 const void *uniform u_, uniform int64 su,                 \
                                 const void *uniform v_, uniform int64 sv, uniform double p, \
                                 uniform double m, uniform double q, uniform double k) {   \
    uniform T *uniform o = (uniform T * uniform) o_;                                       \
    const uniform T *uniform u = (const uniform T *uniform)u_;                             \
    const uniform T *uniform v = (const uniform T *uniform)v_;                             \
    const uniform T tp = (T)p, tm = (T)m, tq = (T)q, tk = (T)k;                            \
    if (v == NULL && so == 1 && su == 1) {                                                 \
      foreach (i = 0 ... n) o[i] = tp * (u[i] - tm) + tk;                                  \
    } else if (v == NULL) {                                                                \
      foreach (i = 0 ... n) o[(int64)i * so] = tp * (u[(int64)i * su] - tm) + tk;          \
    } else if (so == 1 && su == 1 && sv == 1) {                                            \
      foreach (i = 0 ... n) o[i] = tp * (u[i] - tm) + tq * v[i] + tk;                      \
    } else {                                                                               \
      foreach (i = 0 ... n)                                                                \
        o[(int64)i * so] = tp * (u[(int64)i * su] - tm) + tq * v[(int64)i * sv] + tk;      \
    }                                                                                      \
  }

UD_FLOATS(UD_BN, _)
