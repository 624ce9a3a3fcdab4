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

// Fast rows: x's rows unit-stride, stride 1 or 2 (2 with dilation 1). A chunk of programCount
// outputs from ow0 whose windows lie inside the row reads contiguous vectors: stride 2 loads
// two and deinterleaves them with shuffles, even lanes for tap s, odd ones for tap s + 1.
static inline uniform bool ud_pool_fast(Geom g) {
  return g->xs[1] == 1 && (g->sw == 1 || (g->sw == 2 && g->dw == 1)) &&
         g->kh * g->dh * g->w + g->kw * g->dw < (1ll << 30); /* window offsets in int32 */
}
// The last element past a chunk's first input column that a fast chunk reads.
static inline uniform int64 ud_pool_reach(Geom g) {
  return g->sw == 1 ? (g->kw - 1) * g->dw + programCount - 1
                    : ((g->kw - 1) & ~1) + 2 * programCount - 1;
}
// The end of the run of fast chunks from ow0 (windows inside the row, whole chunks).
static inline uniform int64 ud_pool_fast_end(Geom g, uniform int64 ow0) {
  if (!ud_pool_fast(g)) return ow0;
  uniform int64 ow = ow0;
  while (ow + programCount <= g->ow && ow * g->sw - g->pw >= 0 &&
         ow * g->sw - g->pw + ud_pool_reach(g) < g->w)
    ow += programCount;
  return ow;
}
// The first output whose window starts inside the row (fast chunks start there).
static inline uniform int64 ud_pool_first(Geom g) {
  return min(g->ow, (g->pw + g->sw - 1) / g->sw);
}
// TAP(v, s) for every tap s of a fast chunk whose first input column is at `row`.
#define UD_POOL_TAPS(T, TAP)                                                               \
  if (g->sw == 1) {                                                                        \
    for (uniform int64 s = 0; s < g->kw; s++) {                                            \
      const T v = row[s * g->dw + programIndex];                                           \
      TAP(v, s)                                                                            \
    }                                                                                      \
  } else {                                                                                 \
    for (uniform int64 s = 0; s < g->kw; s += 2) {                                         \
      const T v0 = row[s + programIndex], v1 = row[s + programCount + programIndex];      \
      const T even = shuffle(v0, v1, 2 * programIndex);                                    \
      TAP(even, s)                                                                         \
      if (s + 1 < g->kw) {                                                                 \
        const T odd = shuffle(v0, v1, 2 * programIndex + 1);                               \
        TAP(odd, s + 1)                                                                    \
      }                                                                                    \
    }                                                                                      \
  }
// max: the first tap seen, then a larger value or a nan takes it; the winner's offset in the
// plane from the chunk's first window corner, r dh W + s dw, is kept (one int32 select).
#define UD_MAX_TAP(v, s)                                                                   \
  {                                                                                        \
    const uniform int32 off = (int32)(r * g->dh * g->w + (s) * g->dw);                     \
    if (!any) {                                                                            \
      best = v;                                                                            \
      bo = off;                                                                            \
      any = true;                                                                          \
    } else {                                                                               \
      const bool take = v > best || v != v;                                                \
      best = take ? v : best;                                                              \
      bo = take ? off : bo;                                                                \
    }                                                                                      \
  }
#define UD_SUM_TAP(v, s) sum += (double)v;
// out[oh, ow0 + lane] = v: a vector store when the row is unit-stride (else a scatter)
#define UD_POOL_STORE(out, st, v)                                                          \
  if (g->st[1] == 1)                                                                       \
    out[oh * g->st[0] + ow0 + programIndex] = v;                                           \
  else                                                                                     \
    out[oh * g->st[0] + (ow0 + programIndex) * g->st[1]] = v;
// gx = 0 over the plane, row by row (vector stores for unit-stride rows)
#define UD_POOL_ZERO(T, gx)                                                                 \
  for (uniform int64 h = 0; h < g->h; h++) {                                               \
    uniform T *uniform row = gx + h * g->xs[0];                                            \
    if (g->xs[1] == 1)                                                                     \
      foreach (w = 0 ... g->w) row[w] = 0;                                                 \
    else                                                                                   \
      foreach (w = 0 ... g->w) row[(int64)w * g->xs[1]] = 0;                               \
  }
// The adds of a fast chunk's gradient v (one per output lane) into the input row at `row`:
// stride 1 adds it per tap; stride 2 interleaves two taps' values into two vector adds.
#define UD_POOL_SPREAD(T, v)                                                               \
  if (g->sw == 1) {                                                                        \
    for (uniform int64 s = 0; s < g->kw; s++) row[s + programIndex] += v;                  \
  } else {                                                                                 \
    const int32 lo = (programIndex & 1) * programCount + (programIndex >> 1);              \
    const int32 hi = lo + programCount / 2;                                                \
    for (uniform int64 s = 0; s < g->kw; s += 2) {                                         \
      const T odd = s + 1 < g->kw ? v : (T)0;                                              \
      row[s + programIndex] += shuffle(v, odd, lo);                                        \
      row[s + programCount + programIndex] += shuffle(v, odd, hi);                         \
    }                                                                                      \
  }

#define UD_POOL(sfx, T, _)                                                                 \
  /* max over each window; indices are h * W + w; a larger value or a nan takes the tap */  \
  static inline void ud_max_pool_cells_##sfx(Geom g, const uniform T *uniform x,           \
                                             uniform T *uniform y, uniform int64 *uniform idx, \
                                             uniform int64 oh, uniform int64 from,         \
                                             uniform int64 to) {                           \
    foreach (ow = from ... to) {                                                           \
      T best = 0;                                                                          \
      int64 at = -1;                                                                       \
      for (uniform int64 r = 0; r < g->kh; r++) {                                          \
        const uniform int64 h = oh * g->sh - g->ph + r * g->dh;                            \
        if (h < 0 || h >= g->h) continue;                                                  \
        for (uniform int64 s = 0; s < g->kw; s++) {                                        \
          const int32 w = ow * (int32)g->sw - (int32)g->pw + (int32)(s * g->dw);           \
          if (w >= 0 && w < g->w) {                                                        \
            T v = x[h * g->xs[0] + (int64)w * g->xs[1]];                                   \
            if (at < 0 || v > best || v != v) {                                           \
              best = v;                                                                    \
              at = h * g->w + w;                                                           \
            }                                                                              \
          }                                                                                \
        }                                                                                  \
      }                                                                                    \
      y[oh * g->ys[0] + ow * g->ys[1]] = best;                                             \
      idx[oh * g->is[0] + ow * g->is[1]] = at;                                             \
    }                                                                                      \
  }                                                                                        \
  export void ud_max_pool_##sfx(Geom geom, const void *uniform x_, void *uniform y_,           \
                                uniform int64 *uniform idx) {                              \
    /* a local copy: stores through x, y, idx cannot alias it (fields stay in registers) */ \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    const uniform int64 first = ud_pool_first(g);                                          \
    const uniform int64 fast_end = ud_pool_fast_end(g, first);                             \
    for (uniform int64 oh = 0; oh < g->oh; oh++) {                                         \
      if (first > 0) ud_max_pool_cells_##sfx(g, x, y, idx, oh, 0, first);                  \
      uniform int64 ow0 = first;                                                           \
      for (; ow0 < fast_end; ow0 += programCount) {                                        \
        T best = 0;                                                                        \
        int32 bo = 0;                                                                      \
        uniform bool any = false;                                                          \
        for (uniform int64 r = 0; r < g->kh; r++) {                                        \
          const uniform int64 h = oh * g->sh - g->ph + r * g->dh;                          \
          if (h < 0 || h >= g->h) continue;                                                \
          const uniform T *uniform row = x + h * g->xs[0] + ow0 * g->sw - g->pw;           \
          UD_POOL_TAPS(T, UD_MAX_TAP)                                                      \
        }                                                                                  \
        /* the window corner of lane ow0 + i: (oh sh - ph) W + (ow0 + i) sw - pw */        \
        const uniform int64 corner = (oh * g->sh - g->ph) * g->w + ow0 * g->sw - g->pw;    \
        const int64 at = any ? corner + (int64)(programIndex * (int32)g->sw + bo) : -1;    \
        UD_POOL_STORE(y, ys, best)                                                         \
        UD_POOL_STORE(idx, is, at)                                                         \
      }                                                                                    \
      if (ow0 < g->ow) ud_max_pool_cells_##sfx(g, x, y, idx, oh, ow0, g->ow);              \
    }                                                                                      \
  }                                                                                        \
  /* gx = 0, then gx[idx] += gy; false (*bad = the index) at an index outside the plane */ \
  export uniform int32 ud_max_pool_backward_##sfx(Geom geom, void *uniform gx_,               \
                                                 const void *uniform gy_,                  \
                                                 const uniform int64 *uniform idx,         \
                                                 uniform int64 *uniform bad) {             \
    /* a local copy: stores through x, y, idx cannot alias it (fields stay in registers) */ \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    const uniform int64 cells = g->h * g->w;                                               \
    const uniform bool dense = g->xs[1] == 1 && g->xs[0] == g->w; /* i is the offset */    \
    UD_POOL_ZERO(T, gx)                                                                    \
    for (uniform int64 oh = 0; oh < g->oh; oh++) {                                         \
      const uniform T *uniform gyr = gy + oh * g->ys[0];                                   \
      const uniform int64 *uniform ir = idx + oh * g->is[0];                               \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        const uniform int64 i = ir[ow * g->is[1]];                                         \
        if (i < 0 || i >= cells) {                                                         \
          *bad = i;                                                                        \
          return 0;                                                                        \
        }                                                                                  \
        gx[dense ? i : (i / g->w) * g->xs[0] + (i % g->w) * g->xs[1]] += gyr[ow * g->ys[1]]; \
      }                                                                                    \
    }                                                                                      \
    return 1;                                                                              \
  }                                                                                        \
  /* average over each window (avg_pool2d and adaptive_avg_pool2d, see ud_window) */        \
  static inline void ud_avg_pool_cells_##sfx(Geom g, const uniform T *uniform x,           \
                                             uniform T *uniform y, uniform int64 oh,       \
                                             uniform int64 from, uniform int64 to) {       \
    foreach (ow = from ... to) {                                                           \
      int64 h0, h1, w0, w1;                                                                \
      double div, sum = 0;                                                                 \
      ud_window(g, (int64)oh, (int64)ow, h0, h1, w0, w1, div);                             \
      for (int64 h = h0; h < h1; h++)                                                      \
        for (int64 w = w0; w < w1; w++) sum += x[h * g->xs[0] + w * g->xs[1]];             \
      y[oh * g->ys[0] + ow * g->ys[1]] = div > 0 ? (T)(sum / div) : 0;                     \
    }                                                                                      \
  }                                                                                        \
  export void ud_avg_pool_##sfx(Geom geom, const void *uniform x_, void *uniform y_) {         \
    /* a local copy: stores through x, y, idx cannot alias it (fields stay in registers) */ \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    /* wide windows (adaptive ones, e.g. a global average): lanes along each window's row */ \
    const uniform bool wide = g->adaptive ? g->w >= programCount * g->ow : g->kw >= programCount; \
    const uniform int64 first = wide || g->adaptive ? 0 : ud_pool_first(g);                \
    const uniform int64 fast_end = wide || g->adaptive ? 0 : ud_pool_fast_end(g, first);   \
    for (uniform int64 oh = 0; oh < g->oh; oh++) {                                         \
      if (wide) {                                                                          \
        for (uniform int64 ow = 0; ow < g->ow; ow++) {                                     \
          uniform int64 h0, h1, w0, w1;                                                    \
          uniform double div;                                                              \
          double sum = 0;                                                                  \
          ud_window(g, oh, ow, h0, h1, w0, w1, div);                                       \
          for (uniform int64 h = h0; h < h1; h++) {                                        \
            const uniform T *uniform row = x + h * g->xs[0];                               \
            if (g->xs[1] == 1)                                                             \
              foreach (w = w0 ... w1) sum += row[w];                                       \
            else                                                                           \
              foreach (w = w0 ... w1) sum += row[(int64)w * g->xs[1]];                     \
          }                                                                                \
          const uniform double total = reduce_add(sum);                                    \
          y[oh * g->ys[0] + ow * g->ys[1]] = div > 0 ? (uniform T)(total / div) : 0;       \
        }                                                                                  \
        continue;                                                                          \
      }                                                                                    \
      uniform int64 ow0 = first;                                                           \
      if (first > 0) ud_avg_pool_cells_##sfx(g, x, y, oh, 0, first);                       \
      for (; ow0 < fast_end; ow0 += programCount) {                                        \
        /* whole windows along the row: the divisor is the row's */                        \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow0, h0, h1, w0, w1, div);                                        \
        double sum = 0;                                                                    \
        for (uniform int64 h = h0; h < h1; h++) {                                          \
          const uniform T *uniform row = x + h * g->xs[0] + ow0 * g->sw - g->pw;           \
          UD_POOL_TAPS(T, UD_SUM_TAP)                                                      \
        }                                                                                  \
        const T mean = div > 0 ? (T)(sum / div) : 0;                                       \
        UD_POOL_STORE(y, ys, mean)                                                         \
      }                                                                                    \
      if (ow0 < g->ow) ud_avg_pool_cells_##sfx(g, x, y, oh, ow0, g->ow);                   \
    }                                                                                      \
  }                                                                                        \
  export void ud_avg_pool_backward_##sfx(Geom geom, void *uniform gx_, const void *uniform gy_) { \
    /* a local copy: stores through x, y, idx cannot alias it (fields stay in registers) */ \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    UD_POOL_ZERO(T, gx)                                                                    \
    const uniform bool wide = g->adaptive || g->kw >= programCount;                        \
    const uniform int64 first = wide ? 0 : ud_pool_first(g);                               \
    const uniform int64 fast_end = wide ? 0 : ud_pool_fast_end(g, first);                  \
    for (uniform int64 oh = 0; oh < g->oh; oh++) {                                         \
      for (uniform int64 ow0 = first; ow0 < fast_end; ow0 += programCount) {               \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow0, h0, h1, w0, w1, div); /* the row's, as in the forward */     \
        if (div <= 0) continue;                                                            \
        const T v = (T)(gy[oh * g->ys[0] + (ow0 + programIndex) * g->ys[1]] / div);        \
        for (uniform int64 h = h0; h < h1; h++) {                                          \
          uniform T *uniform row = gx + h * g->xs[0] + ow0 * g->sw - g->pw;                \
          UD_POOL_SPREAD(T, v)                                                             \
        }                                                                                  \
      }                                                                                    \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        if (ow == first && fast_end > first) { /* done above */                            \
          ow = fast_end - 1;                                                               \
          continue;                                                                        \
        }                                                                                  \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow, h0, h1, w0, w1, div);                                         \
        if (div <= 0) continue;                                                            \
        uniform T v = (uniform T)(gy[oh * g->ys[0] + ow * g->ys[1]] / div);                \
        for (uniform int64 h = h0; h < h1; h++) {                                          \
          uniform T *uniform row = gx + h * g->xs[0];                                      \
          if (g->xs[1] == 1)                                                               \
            foreach (w = w0 ... w1) row[w] += v;                                           \
          else                                                                             \
            foreach (w = w0 ... w1) row[(int64)w * g->xs[1]] += v;                         \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }
UD_FLOATS(UD_POOL, _)

// Batch-norm sums run over a 2-d [rows, n] view (row stride r*, element stride s*): one call per
// channel. Unit strides accumulate in T, two independent accumulators (add latency), folded
// into double after about 64 vectors per lane: across rows, as rows are often short (8x8
// planes: a fold per row would cost more than the row).
#define UD_BN_FOLD 64
// The body of a sum over [rows, n]: A(i) and B(i) accumulate elements i (uniform base) of the
// current row (of type BT) into a1, a2 (two unit-stride vectors: i and i + programCount), S(j) one element
// j (any stride) into s1, s2 in double.
#define UD_BN_SUMS(T, UNIT, ROW, A, S)                                                     \
  double s1 = 0, s2 = 0;                                                                   \
  T a1 = 0, a2 = 0, b1 = 0, b2 = 0;                                                        \
  uniform int64 pending = 0;                                                               \
  for (uniform int64 r = 0; r < rows; r++) {                                               \
    ROW;                                                                                   \
    uniform int64 i = 0;                                                                   \
    if (UNIT) {                                                                            \
      for (; i + 2 * programCount <= n; i += 2 * programCount) {                           \
        A(i, a1, a2)                                                                       \
        A(i + programCount, b1, b2)                                                        \
      }                                                                                    \
      pending += n / (2 * programCount);                                                   \
      if (pending >= UD_BN_FOLD || r == rows - 1) {                                        \
        s1 += (double)(a1 + b1);                                                           \
        s2 += (double)(a2 + b2);                                                           \
        a1 = a2 = b1 = b2 = 0;                                                             \
        pending = 0;                                                                       \
      }                                                                                    \
    }                                                                                      \
    if (i < n) {                                                                           \
      foreach (j = i ... n) { S(j) }                                                       \
    }                                                                                      \
  }                                                                                        \
  sums[0] += reduce_add(s1);                                                               \
  sums[1] += reduce_add(s2);

// sums[0] += sum(x - shift), sums[1] += sum((x - shift)^2); shift is a T value (the C side
// rounds it), so x - shift is exact near the mean.
#define UD_BN_MOM_A(i, p1, p2)                                                             \
  {                                                                                        \
    const BT u = x[(i) + programIndex] - sh;                                                \
    p1 += u;                                                                               \
    p2 += u * u;                                                                           \
  }
#define UD_BN_MOM_S(j)                                                                     \
  const double d = (double)x[(int64)j * sx] - (double)sh;                                  \
  s1 += d;                                                                                 \
  s2 += d * d;
#define UD_BN_GRAD_A(i, p1, p2)                                                            \
  {                                                                                        \
    const BT gu = g[(i) + programIndex];                                                    \
    p1 += gu;                                                                              \
    p2 += gu * (x[(i) + programIndex] - m);                                                \
  }
#define UD_BN_GRAD_S(j)                                                                    \
  const double gi = g[(int64)j * sg];                                                      \
  s1 += gi;                                                                                \
  s2 += gi * ((double)x[(int64)j * sx] - (double)m);

#define UD_BN(sfx, T, _)                                                                   \
  export void ud_bn_moments_##sfx(uniform int64 rows, uniform int64 n, const void *uniform x_, \
                                  uniform int64 rs, uniform int64 sx, uniform double shift,  \
                                  uniform double *uniform sums) {                           \
    typedef T BT;                                                                          \
    const uniform T sh = (uniform T)shift;                                                 \
    const uniform T *uniform x;                                                            \
    UD_BN_SUMS(T, sx == 1, x = (const uniform T *uniform)x_ + r * rs, UD_BN_MOM_A,        \
               UD_BN_MOM_S)                                                                \
  }                                                                                        \
  /* sums[0] += sum(g), sums[1] += sum(g (x - mean)) (mean: a T value, as shift above) */  \
  export void ud_bn_grad_sums_##sfx(uniform int64 rows, uniform int64 n,                   \
                                    const void *uniform g_, uniform int64 rg, uniform int64 sg, \
                                    const void *uniform x_, uniform int64 rx, uniform int64 sx, \
                                    uniform double mean, uniform double *uniform sums) {   \
    typedef T BT;                                                                          \
    const uniform T m = (uniform T)mean;                                                   \
    const uniform T *uniform g;                                                            \
    const uniform T *uniform x;                                                            \
    UD_BN_SUMS(T, sx == 1 && sg == 1,                                                      \
               g = (const uniform T *uniform)g_ + r * rg;                                  \
               x = (const uniform T *uniform)x_ + r * rx, UD_BN_GRAD_A, UD_BN_GRAD_S)      \
  }                                                                                        \
  /* o = p (u - m) + q v + k; o = p (u - m) + k when v is NULL */                          \
  export void ud_bn_affine_##sfx(uniform int64 rows, uniform int64 n, void *uniform o_,    \
                                 uniform int64 ro, uniform int64 so, const void *uniform u_, \
                                 uniform int64 ru, uniform int64 su, const void *uniform v_, \
                                 uniform int64 rv, uniform int64 sv, uniform double p,     \
                                 uniform double m, uniform double q, uniform double k) {   \
    const uniform T tp = (T)p, tm = (T)m, tq = (T)q, tk = (T)k;                            \
    for (uniform int64 r = 0; r < rows; r++) {                                             \
      uniform T *uniform o = (uniform T * uniform) o_ + r * ro;                            \
      const uniform T *uniform u = (const uniform T *uniform)u_ + r * ru;                  \
      const uniform T *uniform v = v_ ? (const uniform T *uniform)v_ + r * rv : NULL;      \
      if (v == NULL && so == 1 && su == 1) {                                               \
        foreach (i = 0 ... n) o[i] = tp * (u[i] - tm) + tk;                                \
      } else if (v == NULL) {                                                              \
        foreach (i = 0 ... n) o[(int64)i * so] = tp * (u[(int64)i * su] - tm) + tk;        \
      } else if (so == 1 && su == 1 && sv == 1) {                                          \
        foreach (i = 0 ... n) o[i] = tp * (u[i] - tm) + tq * v[i] + tk;                    \
      } else {                                                                             \
        foreach (i = 0 ... n)                                                              \
          o[(int64)i * so] = tp * (u[(int64)i * su] - tm) + tq * v[(int64)i * sv] + tk;    \
      }                                                                                    \
    }                                                                                      \
  }

UD_FLOATS(UD_BN, _)

// Channels-last pooling (dense NHWC, or any h / w strides with unit channel stride): one image's
// block of nc channels per call, element (h, w, c) at h xs[0] + w xs[1] + c; the channels run in
// the lanes, so every tap is one unit-stride vector and no window needs a gather.
#define UD_POOL_CL(sfx, T, _)                                                              \
  export void ud_max_pool_cl_##sfx(Geom geom, uniform int64 nc, const void *uniform x_,        \
                                   void *uniform y_, uniform int64 *uniform idx) {         \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        uniform T *uniform yo = y + oh * g->ys[0] + ow * g->ys[1];                         \
        uniform int64 *uniform io = idx + oh * g->is[0] + ow * g->is[1];                   \
        foreach (c = 0 ... nc) {                                                           \
          T best = 0;                                                                      \
          int64 at = -1;                                                                   \
          for (uniform int64 r = 0; r < g->kh; r++) {                                      \
            const uniform int64 h = oh * g->sh - g->ph + r * g->dh;                        \
            if (h < 0 || h >= g->h) continue;                                              \
            for (uniform int64 s = 0; s < g->kw; s++) {                                    \
              const uniform int64 w = ow * g->sw - g->pw + s * g->dw;                      \
              if (w < 0 || w >= g->w) continue;                                            \
              const T v = x[h * g->xs[0] + w * g->xs[1] + c];                              \
              const bool take = at < 0 || v > best || v != v;                              \
              best = take ? v : best;                                                      \
              at = take ? h * g->w + w : at;                                               \
            }                                                                              \
          }                                                                                \
          yo[c] = best;                                                                    \
          io[c] = at;                                                                      \
        }                                                                                  \
      }                                                                                    \
  }                                                                                        \
  /* gx = 0 over the block, then gx[idx] += gy; false (*bad = an index) outside the plane */ \
  export uniform int32 ud_max_pool_backward_cl_##sfx(Geom geom, uniform int64 nc,             \
                                                    void *uniform gx_, const void *uniform gy_, \
                                                    const uniform int64 *uniform idx,      \
                                                    uniform int64 *uniform bad) {          \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    const uniform int64 cells = g->h * g->w;                                               \
    uniform bool ok = true;                                                                \
    /* windows that do not overlap: every tap is written once (its gradient or 0), no      \
     * scatter; the zero pass only for cells outside every window. An index outside its     \
     * window (a bad input) falls back to the scatter below, which checks it. */            \
    uniform bool tiled = g->dh == 1 && g->dw == 1 && g->kh <= g->sh && g->kw <= g->sw;     \
    const uniform bool cover = g->kh == g->sh && g->kw == g->sw && g->ph == 0 &&           \
                               g->pw == 0 && g->oh * g->sh == g->h && g->ow * g->sw == g->w; \
    const uniform bool tried = tiled;                                                      \
    for (uniform int64 h = 0; h < g->h && !(tried && cover); h++)                          \
      for (uniform int64 w = 0; w < g->w; w++) {                                           \
        uniform T *uniform o = gx + h * g->xs[0] + w * g->xs[1];                           \
        foreach (c = 0 ... nc) o[c] = 0;                                                   \
      }                                                                                    \
    for (uniform int64 oh = 0; oh < g->oh && tiled; oh++)                                  \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        const uniform T *uniform go = gy + oh * g->ys[0] + ow * g->ys[1];                  \
        const uniform int64 *uniform io = idx + oh * g->is[0] + ow * g->is[1];             \
        foreach (c = 0 ... nc) {                                                           \
          const int64 i = io[c];                                                           \
          bool hit = false;                                                                \
          for (uniform int64 h = max(oh * g->sh - g->ph, 0);                               \
               h < min(oh * g->sh - g->ph + g->kh, g->h); h++)                             \
            for (uniform int64 w = max(ow * g->sw - g->pw, 0);                             \
                 w < min(ow * g->sw - g->pw + g->kw, g->w); w++) {                         \
              hit = hit || i == h * g->w + w;                                              \
              gx[h * g->xs[0] + w * g->xs[1] + c] = i == h * g->w + w ? go[c] : 0;         \
            }                                                                              \
          if (any(!hit)) tiled = false;                                                    \
        }                                                                                  \
      }                                                                                    \
    if (tiled) return 1;                                                                   \
    for (uniform int64 h = 0; h < g->h && tried; h++) /* the fallback starts from zeros */ \
      for (uniform int64 w = 0; w < g->w; w++) {                                           \
        uniform T *uniform o = gx + h * g->xs[0] + w * g->xs[1];                           \
        foreach (c = 0 ... nc) o[c] = 0;                                                   \
      }                                                                                    \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        const uniform T *uniform go = gy + oh * g->ys[0] + ow * g->ys[1];                  \
        const uniform int64 *uniform io = idx + oh * g->is[0] + ow * g->is[1];             \
        foreach (c = 0 ... nc) {                                                           \
          const int64 i = io[c];                                                           \
          const bool out = i < 0 || i >= cells;                                            \
          if (any(out)) {                                                                  \
            ok = false;                                                                    \
            *bad = reduce_min(out ? i : cells);                                            \
            if (*bad == cells) *bad = reduce_max(out ? i : -1);                            \
          }                                                                                \
          if (!out) gx[(i / g->w) * g->xs[0] + (i % g->w) * g->xs[1] + c] += go[c];        \
        }                                                                                  \
      }                                                                                    \
    return ok ? 1 : 0;                                                                     \
  }                                                                                        \
  export void ud_avg_pool_cl_##sfx(Geom geom, uniform int64 nc, const void *uniform x_,        \
                                   void *uniform y_) {                                     \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    uniform T *uniform y = (uniform T * uniform) y_;                                       \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow, h0, h1, w0, w1, div);                                         \
        uniform T *uniform yo = y + oh * g->ys[0] + ow * g->ys[1];                         \
        foreach (c = 0 ... nc) {                                                           \
          double sum = 0;                                                                  \
          for (uniform int64 h = h0; h < h1; h++)                                          \
            for (uniform int64 w = w0; w < w1; w++) sum += x[h * g->xs[0] + w * g->xs[1] + c]; \
          yo[c] = div > 0 ? (T)(sum / div) : 0;                                            \
        }                                                                                  \
      }                                                                                    \
  }                                                                                        \
  export void ud_avg_pool_backward_cl_##sfx(Geom geom, uniform int64 nc, void *uniform gx_,    \
                                            const void *uniform gy_) {                     \
    uniform struct UD_Pool2d geo = *geom;                                                 \
    Geom g = &geo;                                                                        \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                     \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                           \
    for (uniform int64 h = 0; h < g->h; h++)                                               \
      for (uniform int64 w = 0; w < g->w; w++) {                                           \
        uniform T *uniform o = gx + h * g->xs[0] + w * g->xs[1];                           \
        foreach (c = 0 ... nc) o[c] = 0;                                                   \
      }                                                                                    \
    for (uniform int64 oh = 0; oh < g->oh; oh++)                                           \
      for (uniform int64 ow = 0; ow < g->ow; ow++) {                                       \
        uniform int64 h0, h1, w0, w1;                                                      \
        uniform double div;                                                                \
        ud_window(g, oh, ow, h0, h1, w0, w1, div);                                         \
        if (div <= 0) continue;                                                            \
        const uniform T *uniform go = gy + oh * g->ys[0] + ow * g->ys[1];                  \
        foreach (c = 0 ... nc) {                                                           \
          const T v = (T)(go[c] / div);                                                    \
          for (uniform int64 h = h0; h < h1; h++)                                          \
            for (uniform int64 w = w0; w < w1; w++) gx[h * g->xs[0] + w * g->xs[1] + c] += v; \
        }                                                                                  \
      }                                                                                    \
  }
UD_FLOATS(UD_POOL_CL, _)

// Channels-last batch norm: a block of rows of a [rows, nc] view (row stride r*, unit channel
// stride), the channels in the lanes; one value per channel in the arrays. Sums go straight to
// double (the C side adds the blocks' sums in a fixed order).
// g NULL: s1 += x - shift, s2 += (x - shift)^2 (x - shift in T: exact near the mean);
// else:   s1 += g, s2 += g (x - shift) (shift: the saved mean).
#define UD_BN_CL(sfx, T, _)                                                                \
  export void ud_bn_cl_sums_##sfx(uniform int64 rows, uniform int64 nc, const void *uniform x_, \
                                  uniform int64 rx, const void *uniform g_, uniform int64 rg, \
                                  const uniform double shift[], uniform double s1[],       \
                                  uniform double s2[]) {                                   \
    const uniform T *uniform x = (const uniform T *uniform)x_;                             \
    const uniform T *uniform g = (const uniform T *uniform)g_;                             \
    foreach (c = 0 ... nc) { /* rows inner: the sums stay in registers */                   \
      const T sh = (T)shift[c];                                                            \
      double a1 = 0, a2 = 0;                                                               \
      for (uniform int64 r = 0; r < rows; r++) {                                           \
        const double d = (double)(x[r * rx + c] - sh);                                     \
        const double gi = g == NULL ? d : (double)g[r * rg + c];                           \
        a1 += gi;                                                                          \
        a2 += gi * d;                                                                      \
      }                                                                                    \
      s1[c] += a1;                                                                         \
      s2[c] += a2;                                                                         \
    }                                                                                      \
  }                                                                                        \
  /* o = p (u - m) + q v + k per channel; o = p (u - m) + k when v is NULL */              \
  export void ud_bn_cl_affine_##sfx(uniform int64 rows, uniform int64 nc, void *uniform o_,  \
                                    uniform int64 ro, const void *uniform u_, uniform int64 ru, \
                                    const void *uniform v_, uniform int64 rv,              \
                                    const uniform double p[], const uniform double m[],    \
                                    const uniform double q[], const uniform double k[]) {  \
    uniform T *uniform o = (uniform T * uniform) o_;                                       \
    const uniform T *uniform u = (const uniform T *uniform)u_;                             \
    const uniform T *uniform v = (const uniform T *uniform)v_;                             \
    foreach (c = 0 ... nc) {                                                               \
      const T pc = (T)p[c], mc = (T)m[c], qc = (T)q[c], kc = (T)k[c];                      \
      if (v == NULL)                                                                       \
        for (uniform int64 r = 0; r < rows; r++) o[r * ro + c] = pc * (u[r * ru + c] - mc) + kc; \
      else                                                                                 \
        for (uniform int64 r = 0; r < rows; r++)                                           \
          o[r * ro + c] = pc * (u[r * ru + c] - mc) + qc * v[r * rv + c] + kc;             \
    }                                                                                      \
  }
UD_FLOATS(UD_BN_CL, _)
