// conv_dw.ispc — the inner loops of the depthwise convolution (src/dense/conv_direct.cpp): one
// image plane at a time, output columns in the vector lanes. A tap is a weight and an offset
// into a source plane, so the forward (taps into the phase-split padded input), the backward
// input (taps into zero-margined grad_y) and the backward weight share them.
#include "common.isph"

// out[q * so_r + j] = init + sum_t w[t] * src[base[t] + q * ld + j] for q < rows, j < cols.
// Eight rows at a time: eight independent FMA chains per tap (one chain's latency bounded it),
// and each tap's weight and offset are loaded once for eight vectors. Rows past the end repeat
// the last row: the same value stored twice.
#define UD_DW_ACC(i) a##i += wt * s[d##i + j];
#define UD_DW_ST(i) out[r##i * so_r + j] = a##i;
#define UD_DW_ROWS(sfx, T, _u)                                                                  \
  export void ud_conv_dw_rows_##sfx(uniform int64 rows, uniform int32 cols,                    \
                                    const uniform T src[], uniform int64 ld,                   \
                                    const uniform int64 base[], const uniform T w[],           \
                                    uniform int32 ntaps, uniform T init, uniform T out[],      \
                                    uniform int64 so_r) {                                      \
    for (uniform int64 q = 0; q < rows; q += 8) {                                               \
      uniform int64 r0 = q, r1 = min(q + 1, rows - 1), r2 = min(q + 2, rows - 1),               \
                    r3 = min(q + 3, rows - 1), r4 = min(q + 4, rows - 1),                       \
                    r5 = min(q + 5, rows - 1), r6 = min(q + 6, rows - 1),                       \
                    r7 = min(q + 7, rows - 1);                                                  \
      uniform int64 d0 = 0, d1 = (r1 - q) * ld, d2 = (r2 - q) * ld, d3 = (r3 - q) * ld,         \
                    d4 = (r4 - q) * ld, d5 = (r5 - q) * ld, d6 = (r6 - q) * ld,                 \
                    d7 = (r7 - q) * ld;                                                         \
      foreach (j = 0 ... cols) {                                                                \
        T a0 = init, a1 = init, a2 = init, a3 = init, a4 = init, a5 = init, a6 = init,          \
          a7 = init;                                                                            \
        for (uniform int32 t = 0; t < ntaps; t++) {                                             \
          const uniform T* uniform s = src + base[t] + q * ld;                                  \
          const uniform T wt = w[t];                                                            \
          UD_DW_ACC(0) UD_DW_ACC(1) UD_DW_ACC(2) UD_DW_ACC(3)                                   \
          UD_DW_ACC(4) UD_DW_ACC(5) UD_DW_ACC(6) UD_DW_ACC(7)                                   \
        }                                                                                       \
        UD_DW_ST(0) UD_DW_ST(1) UD_DW_ST(2) UD_DW_ST(3)                                         \
        UD_DW_ST(4) UD_DW_ST(5) UD_DW_ST(6) UD_DW_ST(7)                                         \
      }                                                                                         \
    }                                                                                           \
  }
UD_FLOATS(UD_DW_ROWS, _)

// acc[t] += sum_{q < rows, j < cols} g[q * sg_r + j * sg_c] * src[base[t] + q * ld + j]: four
// taps at a time share each load of g (taps past the end repeat the last and are dropped).
// Partial sums stay in T over one plane; acc (double) adds the planes.
#define UD_DW_DOT(sfx, T, _u)                                                                     \
  export void ud_conv_dw_dot_##sfx(uniform int64 rows, uniform int32 cols, const uniform T g[], \
                                   uniform int64 sg_r, uniform int64 sg_c,                      \
                                   const uniform T src[], uniform int64 ld,                     \
                                   const uniform int64 base[], uniform int32 ntaps,             \
                                   uniform double acc[]) {                                      \
    for (uniform int32 t = 0; t < ntaps; t += 4) {                                              \
      const uniform T* uniform s0 = src + base[t];                                              \
      const uniform T* uniform s1 = src + base[min(t + 1, ntaps - 1)];                          \
      const uniform T* uniform s2 = src + base[min(t + 2, ntaps - 1)];                          \
      const uniform T* uniform s3 = src + base[min(t + 3, ntaps - 1)];                          \
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                         \
      for (uniform int64 q = 0; q < rows; q++) {                                                \
        const uniform int64 o = q * ld;                                                         \
        foreach (j = 0 ... cols) {                                                              \
          const T gv = sg_c == 1 ? g[q * sg_r + j] : g[q * sg_r + j * sg_c];                    \
          a0 += gv * s0[o + j];                                                                 \
          a1 += gv * s1[o + j];                                                                 \
          a2 += gv * s2[o + j];                                                                 \
          a3 += gv * s3[o + j];                                                                 \
        }                                                                                       \
      }                                                                                         \
      acc[t] += reduce_add(a0);                                                                 \
      if (t + 1 < ntaps) acc[t + 1] += reduce_add(a1);                                          \
      if (t + 2 < ntaps) acc[t + 2] += reduce_add(a2);                                          \
      if (t + 3 < ntaps) acc[t + 3] += reduce_add(a3);                                          \
    }                                                                                           \
  }
UD_FLOATS(UD_DW_DOT, _)
