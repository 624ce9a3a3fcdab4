// reduce.ispc — reductions of one strided row into an accumulator (double for float dtypes,
// int64 for integer ones), column accumulation for reductions over outer dimensions, and the
// final conversion. The C side (src/reduce.c) picks the layout and splits the work.
#include "common.isph"

// acc = COMBINE(acc, v); max/min keep a nan once they have seen one.
#define UD_ADD(a, v) ((a) + (v))
#define UD_MUL(a, v) ((a) * (v))
#define UD_MAX(a, v) ((((a) != (a)) | ((v) != (v))) ? (a) + (v) : max(a, v))
#define UD_MIN(a, v) ((((a) != (a)) | ((v) != (v))) ? (a) + (v) : min(a, v))
// argmax/argmin: does v beat the best so far b (a nan beats any number; ties keep the first)?
#define UD_ARGMAX_BEATS(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define UD_ARGMIN_BEATS(v, b) ((v) < (b) || ((v) != (v) && (b) == (b)))

#define UD_ROW_ARGS                                                                  \
  uniform int64 n, const void *uniform x_, uniform int64 st, void *uniform acc_,     \
      uniform int64 base, uniform int64 *uniform where

// *acc = COMBINE(*acc, x[i * st] for i < n). Unit strides run four accumulators of type VT
// (the dtype itself where it is exact or accurate enough over one block: sum of floats, max,
// min) to hide COMBINE's latency, folding them into the ACC total every block.
#define UD_ROW(OP, COMBINE, IDENT, sfx, T, ACC, VT, LANES)                        \
  export void ud_row_##OP##_##sfx(UD_ROW_ARGS) {                                  \
    const uniform T *uniform x = (const uniform T *uniform)x_;                    \
    uniform ACC *uniform acc = (uniform ACC * uniform) acc_;                      \
    if (n <= 0) return;                                                           \
    varying ACC a = (ACC)(VT)IDENT;                                               \
    uniform int64 i = 0;                                                          \
    if (st == 1) {                                                                \
      const uniform int64 step = 4 * programCount;                                \
      while (i + step <= n) {                                                     \
        varying VT b = (VT)IDENT;                                                 \
        varying VT c = b, d = b, e = b;                                           \
        const uniform int64 stop = min(n - step, i + 64 * step);                  \
        for (; i <= stop; i += step) {                                            \
          b = COMBINE(b, (VT)x[i + programIndex]);                                \
          c = COMBINE(c, (VT)x[i + programCount + programIndex]);                 \
          d = COMBINE(d, (VT)x[i + 2 * programCount + programIndex]);             \
          e = COMBINE(e, (VT)x[i + 3 * programCount + programIndex]);             \
        }                                                                         \
        a = COMBINE(a, (ACC)COMBINE(COMBINE(b, c), COMBINE(d, e)));               \
      }                                                                           \
    }                                                                             \
    foreach (j = i ... n) a = COMBINE(a, (ACC)x[(int64)j * st]);                  \
    *acc = COMBINE(*acc, LANES(a));                                               \
  }                                                                               \
  export void ud_col_##OP##_##sfx(uniform int64 n, void *uniform acc_, const void *uniform x_) { \
    const uniform T *uniform x = (const uniform T *uniform)x_;                    \
    uniform ACC *uniform acc = (uniform ACC * uniform) acc_;                      \
    foreach (i = 0 ... n) acc[i] = COMBINE(acc[i], (ACC)x[i]);                    \
  }

// (*acc, *where) = the best of (*acc, *where) and (x[i * st], base + i): first best wins.
#define UD_ARGROW(OP, BEATS, sfx, T, ACC)                                         \
  export void ud_row_##OP##_##sfx(UD_ROW_ARGS) {                                  \
    const uniform T *uniform x = (const uniform T *uniform)x_;                    \
    uniform ACC *uniform acc = (uniform ACC * uniform) acc_;                      \
    varying ACC best = 0;                                                         \
    varying int64 at = -1;                                                        \
    foreach (i = 0 ... n) {                                                       \
      ACC v = (ACC)x[(int64)i * st];                                              \
      if (at < 0 || BEATS(v, best)) {                                             \
        best = v;                                                                 \
        at = i;                                                                   \
      }                                                                           \
    }                                                                             \
    uniform ACC rb = *acc;                                                        \
    uniform int64 ri = *where;                                                    \
    uniform int64 local = -1;                                                     \
    uniform ACC lb = 0;                                                           \
    for (uniform int l = 0; l < programCount; l++) {                              \
      uniform int64 i = extract(at, l);                                           \
      uniform ACC v = extract(best, l);                                           \
      if (i >= 0 && (local < 0 || BEATS(v, lb) || (!BEATS(lb, v) && i < local))) { \
        lb = v;                                                                   \
        local = i;                                                                \
      }                                                                           \
    }                                                                             \
    if (local >= 0 && (ri < 0 || BEATS(lb, rb))) {                                \
      *acc = lb;                                                                  \
      *where = base + local;                                                      \
    }                                                                             \
  }

// One value from the lanes of a varying accumulator (every lane holds data or the identity):
// the hardware's horizontal ops, a nan found first for max/min (a row's fixed cost matters).
#define UD_LANES_SUM(a) reduce_add(a)
#define UD_LANES_MAX(a) (any((a) != (a)) ? reduce_add(a) : reduce_max(a))
#define UD_LANES_MIN(a) (any((a) != (a)) ? reduce_add(a) : reduce_min(a))
#define UD_LANES_PROD(a) ud_lanes_prod(a)
#define UD_PROD_LANES(ACC) static inline uniform ACC ud_lanes_prod(varying ACC a) { \
  uniform ACC r = 1; for (uniform int l = 0; l < programCount; l++) r *= extract(a, l); return r; }
UD_PROD_LANES(double)
UD_PROD_LANES(int64)

#define UD_REDUCTIONS(sfx, T, ACC, SUM)                    \
  UD_ROW(sum, UD_ADD, 0, sfx, T, ACC, SUM, UD_LANES_SUM)    \
  UD_ROW(prod, UD_MUL, 1, sfx, T, ACC, ACC, UD_LANES_PROD)  \
  UD_ROW(max, UD_MAX, x[0], sfx, T, ACC, T, UD_LANES_MAX)   \
  UD_ROW(min, UD_MIN, x[0], sfx, T, ACC, T, UD_LANES_MIN)   \
  UD_ARGROW(argmax, UD_ARGMAX_BEATS, sfx, T, ACC) \
  UD_ARGROW(argmin, UD_ARGMIN_BEATS, sfx, T, ACC)
#define UD_REDUCTIONS_F(sfx, T, _) UD_REDUCTIONS(sfx, T, double, T)
#define UD_REDUCTIONS_I(sfx, T, _) UD_REDUCTIONS(sfx, T, int64, int64)
UD_FLOATS(UD_REDUCTIONS_F, _)
UD_INTS(UD_REDUCTIONS_I, _)

// out[i * st] = acc[i] (/ div for float dtypes: the mean).
#define UD_FINISH(sfx, T, ACC, CONV)                                                         \
  export void ud_finish_##sfx(uniform int64 n, void *uniform out_, uniform int64 st,         \
                              const void *uniform acc_, uniform double div) {                \
    uniform T *uniform out = (uniform T * uniform) out_;                                     \
    const uniform ACC *uniform acc = (const uniform ACC *uniform)acc_;                       \
    foreach (i = 0 ... n) out[(int64)i * st] = CONV;                                         \
  }
#define UD_FINISH_F(sfx, T, _) UD_FINISH(sfx, T, double, (T)(acc[i] / div))
#define UD_FINISH_I(sfx, T, _) UD_FINISH(sfx, T, int64, (T)acc[i])
UD_FLOATS(UD_FINISH_F, _)
UD_INTS(UD_FINISH_I, _)
