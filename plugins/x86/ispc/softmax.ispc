// softmax.ispc — softmax, log_softmax and their backwards along one strided row. Sums are
// accumulated in double. The C side (src/softmax.c) walks the rows and splits them over cores.
#include "common.isph"

#define UD_MAXV(a, v) (((v) > (a) || (v) != (v)) ? (v) : (a))

// FORWARD(SX, SY) is the body for strides SX, SY: a unit-stride copy keeps loads contiguous.
#define UD_SOFTMAX_BODY(T, SX, SY)                                                \
  {                                                                               \
    varying T m = -(T)UD_INF;                                                   \
    foreach (i = 0 ... n) m = UD_MAXV(m, x[(int64)i * SX]);                       \
    uniform T mu = extract(m, 0);                                                 \
    for (uniform int l = 1; l < programCount; l++) mu = UD_MAXV(mu, extract(m, l)); \
    varying double s = 0; /* float sums over blocks, double across them */       \
    for (uniform int64 b = 0; b < n; b += 1024) {                                 \
      varying T sb = 0;                                                           \
      foreach (i = b ... min(b + 1024, n)) {                                      \
        T e = ud_exp(x[(int64)i * SX] - mu); /* subnormal results kept */         \
        if (!log_) y[(int64)i * SY] = e; /* exp once; y may be x itself */        \
        sb += e;                                                                  \
      }                                                                           \
      s += sb;                                                                    \
    }                                                                             \
    const uniform T total = (T)reduce_add(s);                                     \
    const uniform T shift = mu + ud_log(total), inv = 1 / total;                  \
    if (log_)                                                                     \
      foreach (i = 0 ... n) y[(int64)i * SY] = x[(int64)i * SX] - shift;          \
    else                                                                          \
      foreach (i = 0 ... n) y[(int64)i * SY] *= inv;                              \
  }

// softmax: gx = y (gy - sum(gy y));  log_softmax: gx = gy - exp(y) sum(gy)
#define UD_SOFTMAX_BACKWARD_BODY(T, SG, SGY, SY)                                  \
  {                                                                               \
    varying double s = 0;                                                         \
    if (log_)                                                                     \
      foreach (i = 0 ... n) s += (double)gy[(int64)i * SGY];                      \
    else                                                                          \
      foreach (i = 0 ... n) s += (double)(gy[(int64)i * SGY] * y[(int64)i * SY]); \
    const uniform T total = (T)reduce_add(s);                                     \
    if (log_)                                                                     \
      foreach (i = 0 ... n)                                                       \
        gx[(int64)i * SG] = gy[(int64)i * SGY] - ud_exp(y[(int64)i * SY]) * total; \
    else                                                                          \
      foreach (i = 0 ... n)                                                       \
        gx[(int64)i * SG] = y[(int64)i * SY] * (gy[(int64)i * SGY] - total);     \
  }

#define UD_SOFTMAX(sfx, T, _)                                                               \
  export void ud_softmax_row_##sfx(uniform int64 n, void *uniform y_, uniform int64 sy,     \
                                   const void *uniform x_, uniform int64 sx,                \
                                   uniform bool log_) {                                     \
    uniform T *uniform y = (uniform T * uniform) y_;                                        \
    const uniform T *uniform x = (const uniform T *uniform)x_;                              \
    if (sx == 1 && sy == 1)                                                                 \
      UD_SOFTMAX_BODY(T, 1, 1)                                                              \
    else                                                                                    \
      UD_SOFTMAX_BODY(T, sx, sy)                                                            \
  }                                                                                         \
  export void ud_softmax_backward_row_##sfx(                                                \
      uniform int64 n, void *uniform gx_, uniform int64 sg, const void *uniform gy_,        \
      uniform int64 sgy, const void *uniform y_, uniform int64 sy, uniform bool log_) {     \
    uniform T *uniform gx = (uniform T * uniform) gx_;                                      \
    const uniform T *uniform gy = (const uniform T *uniform)gy_;                            \
    const uniform T *uniform y = (const uniform T *uniform)y_;                              \
    if (sg == 1 && sgy == 1 && sy == 1)                                                     \
      UD_SOFTMAX_BACKWARD_BODY(T, 1, 1, 1)                                                  \
    else                                                                                    \
      UD_SOFTMAX_BACKWARD_BODY(T, sg, sgy, sy)                                              \
  }
UD_FLOATS(UD_SOFTMAX, _)
