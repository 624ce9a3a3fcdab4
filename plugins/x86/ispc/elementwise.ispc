// elementwise.ispc — every elementwise op of elementwise.def, one contiguous-loop function per
// dtype. Strides, broadcasting and threading are the C side's (src/elementwise.c): it packs
// strided operands into contiguous tiles first, so these loops only see unit strides.
#include "common.isph"

// ISPC's float pow is exp(y * log(x)): NaN for every negative base. Integral exponents of a
// negative base are defined (the sign follows the exponent's parity); others stay NaN. Zero,
// subnormal and non-finite bases, non-finite exponents and large results take libm's powf.
static inline float ud_pow(float x, float y) {
    float r = pow(abs(x), y);
    if (x < 0) {
        if (floor(y) != y) r = floatbits(0x7fc00000u);
        else if (floor(0.5f * y) != 0.5f * y) r = -r;
    }
    /* |result| outside [2^-8, 2^8]: y log x is large, and so is exp's amplified error */
    if (!(abs(x) >= UD_FLT_MIN && abs(x) < floatbits(0x7f800000u) &&
          abs(y) < floatbits(0x7f800000u) && abs(r) >= 0x1p-8f && abs(r) <= 0x1p8f))
        foreach_active(l) { r = insert(r, l, powf(extract(x, l), extract(y, l))); }
    return r;
}
static inline double ud_pow(double x, double y) { return pow(x, y); }

// gelu through erfc and the logistic form of 0.5 (1 + tanh u), which keep their precision where
// 1 + erf or 1 + tanh would cancel (large negative x).
#define UD_GELU(T)                                                                        \
  static inline T ud_phi(T x) { return (T)0.5d * ud_erfc(x * (T)-0.70710678118654752d); }  \
  static inline T ud_gelu_erf(T x) { return x * ud_phi(x); }                             \
  static inline T ud_gelu_erf_grad(T x) {                                                 \
    return ud_phi(x) + x * exp((T)-0.5d * x * x) * (T)0.39894228040143268d;               \
  }                                                                                       \
  static inline T ud_gelu_u(T x) {                                                        \
    return (T)0.79788456080286536d * (x + (T)0.044715d * x * x * x);                      \
  }                                                                                       \
  static inline T ud_gelu_tanh(T x) { return x / (1 + exp(-2 * ud_gelu_u(x))); }          \
  static inline T ud_gelu_tanh_grad(T x) {                                                \
    T e = exp(-2 * ud_gelu_u(x));                                                         \
    T s = 1 / (1 + e);                                                                    \
    T es = e < (T)UD_INF ? s * (e * s) : 0; /* e/(1+e)^2 -> 0, not inf * 0 */             \
    return s + 2 * x * es * (T)0.79788456080286536d * (1 + (T)0.134145d * x * x);         \
  }
UD_GELU(float)
UD_GELU(double)

// One function per op and dtype T: output type OT, the third input's type CT (bool for where).
// Every input pointer is valid (the C side passes the first input for the ones an op lacks),
// so the loop reads all three and the compiler drops the loads an expression does not use.
// p[1] == 2 says b is one value broadcast over the run (e.g. param.mul_(scalar)): it is read
// once instead of being packed into a tile, so such calls run at the speed of one input.
#define UD_Y_EACH(j) b[j]
#define UD_Y_ONE(j) b0
#define UD_STAMP(sfx, TT, NAME, OT, CT, E)                             \
  export void ud_##NAME##_##sfx(UD_EW_ARGS) {                          \
    typedef TT T;                                                      \
    UD_PARAMS(T)                                                       \
    uniform OT *uniform o = (uniform OT * uniform) o_;                 \
    const uniform T *uniform a = (const uniform T *uniform)a_;         \
    const uniform T *uniform b = (const uniform T *uniform)b_;         \
    const uniform CT *uniform c = (const uniform CT *uniform)c_;       \
    const uniform T b0 = b[0];                                         \
    if (p[1] == 2) {                                                   \
      UD_EW_LOOP(UD_Y_ONE, OT, CT, E)                                  \
    } else {                                                           \
      UD_EW_LOOP(UD_Y_EACH, OT, CT, E)                                 \
    }                                                                  \
  }

#include "elementwise_kinds.h"
#define UD_FLOAT UD_FLOATS
#define UD_EW(NAME, E, NIN, GROUP, OT, CT) UD_##GROUP(UD_STAMP, NAME, OT, CT, E)
#include "elementwise.def"

// mse_loss's tiles (src/nn.c): o = (x - t)^2 and o = p0 (x - t) g.
UD_FLOATS(UD_STAMP, mse, T, T, (x - y) * (x - y))
UD_FLOATS(UD_STAMP, mse_backward, T, T, p0 * (x - y) * z)

// Strided operands <-> contiguous tiles, by element size (stride 0 = broadcast one element).
#define UD_STAMP_PACK(sfx, T)                                                              \
  export void ud_pack_##sfx(uniform int64 n, void *uniform d_, const void *uniform s_,     \
                            uniform int64 st) {                                            \
    uniform T *uniform d = (uniform T * uniform) d_;                                       \
    const uniform T *uniform s = (const uniform T *uniform)s_;                             \
    if (st == 0) {                                                                         \
      const uniform T v = s[0];                                                            \
      foreach (i = 0 ... n) d[i] = v;                                                      \
    } else if (st == 1) { /* a foreach becomes memcpy plus an empty loop over n */         \
      memcpy64(d_, (void *uniform)s_, n * (uniform int64)sizeof(uniform T));               \
    } else {                                                                               \
      foreach (i = 0 ... n) d[i] = s[(int64)i * st];                                       \
    }                                                                                      \
  }                                                                                        \
  export void ud_unpack_##sfx(uniform int64 n, void *uniform d_, const void *uniform s_,   \
                              uniform int64 st) {                                          \
    uniform T *uniform d = (uniform T * uniform) d_;                                       \
    const uniform T *uniform s = (const uniform T *uniform)s_;                             \
    foreach (i = 0 ... n) d[(int64)i * st] = s[i];                                         \
  }
UD_STAMP_PACK(1, uint8)
UD_STAMP_PACK(2, uint16)
UD_STAMP_PACK(4, uint32)
UD_STAMP_PACK(8, uint64)
