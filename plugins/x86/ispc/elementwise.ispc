// elementwise.ispc — every elementwise op of elementwise.def, one contiguous-loop function per
// dtype. Strides, broadcasting and threading are the C side's (src/elementwise.c): it packs
// strided operands into contiguous tiles first, so these loops only see unit strides.
#include "common.isph"

// ISPC's float pow is exp(y * log(x)): NaN for every negative base. Integral exponents of a
// negative base are defined (the sign follows the exponent's parity); others stay NaN.
static inline float ud_pow(float x, float y) {
    float r = pow(abs(x), y);
    if (x < 0) {
        if (floor(y) != y) return floatbits(0x7fc00000u);
        if (floor(0.5f * y) != 0.5f * y) r = -r;
    }
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
    return s + 2 * x * s * (e * s) * (T)0.79788456080286536d * (1 + (T)0.134145d * x * x); \
  }
UD_GELU(float)
UD_GELU(double)

#define UD_STAMP_U(sfx, TT, NAME, OT, E)                               \
  export void ud_##NAME##_##sfx(UD_EW_ARGS) {                          \
    typedef TT T;                                                      \
    UD_PARAMS(T)                                                       \
    uniform OT *uniform o = (uniform OT * uniform) o_;                 \
    const uniform T *uniform a = (const uniform T *uniform)a_;         \
    foreach (i = 0 ... n) {                                            \
      T x = a[i];                                                      \
      o[i] = (OT)(E);                                                  \
    }                                                                  \
  }
#define UD_STAMP_B(sfx, TT, NAME, OT, E)                               \
  export void ud_##NAME##_##sfx(UD_EW_ARGS) {                          \
    typedef TT T;                                                      \
    UD_PARAMS(T)                                                       \
    uniform OT *uniform o = (uniform OT * uniform) o_;                 \
    const uniform T *uniform a = (const uniform T *uniform)a_;         \
    const uniform T *uniform b = (const uniform T *uniform)b_;         \
    foreach (i = 0 ... n) {                                            \
      T x = a[i], y = b[i];                                            \
      o[i] = (OT)(E);                                                  \
    }                                                                  \
  }
#define UD_STAMP_T(sfx, TT, NAME, CT, E)                               \
  export void ud_##NAME##_##sfx(UD_EW_ARGS) {                          \
    typedef TT T;                                                      \
    UD_PARAMS(T)                                                       \
    uniform T *uniform o = (uniform T * uniform) o_;                   \
    const uniform T *uniform a = (const uniform T *uniform)a_;         \
    const uniform T *uniform b = (const uniform T *uniform)b_;         \
    const uniform CT *uniform c = (const uniform CT *uniform)c_;       \
    foreach (i = 0 ... n) {                                            \
      T x = a[i], y = b[i];                                            \
      CT z = c[i];                                                     \
      o[i] = (T)(E);                                                   \
    }                                                                  \
  }
#define UD_SAME_U(sfx, TT, NAME, E) UD_STAMP_U(sfx, TT, NAME, TT, E)
#define UD_BOOL_U(sfx, TT, NAME, E) UD_STAMP_U(sfx, TT, NAME, bool8, E)
#define UD_SAME_B(sfx, TT, NAME, E) UD_STAMP_B(sfx, TT, NAME, TT, E)
#define UD_BOOL_B(sfx, TT, NAME, E) UD_STAMP_B(sfx, TT, NAME, bool8, E)
#define UD_SAME_T(sfx, TT, NAME, E) UD_STAMP_T(sfx, TT, NAME, TT, E)
#define UD_COND_T(sfx, TT, NAME, E) UD_STAMP_T(sfx, TT, NAME, bool8, E)

#define U_F(NAME, SIG, ARGS, E) UD_FLOATS(UD_SAME_U, NAME, E)
#define U_N(NAME, SIG, ARGS, E) UD_NUMERIC(UD_SAME_U, NAME, E)
#define U_A2B(NAME, SIG, ARGS, E) UD_ALL(UD_BOOL_U, NAME, E)
#define B_F(NAME, SIG, ARGS, E) UD_FLOATS(UD_SAME_B, NAME, E)
#define B_N(NAME, SIG, ARGS, E) UD_NUMERIC(UD_SAME_B, NAME, E)
#define B_A(NAME, SIG, ARGS, E) UD_ALL(UD_SAME_B, NAME, E)
#define B_N2B(NAME, SIG, ARGS, E) UD_NUMERIC(UD_BOOL_B, NAME, E)
#define B_A2B(NAME, SIG, ARGS, E) UD_ALL(UD_BOOL_B, NAME, E)
#define T_F(NAME, SIG, ARGS, E) UD_FLOATS(UD_SAME_T, NAME, E)
#define T_W(NAME, SIG, ARGS, E) UD_ALL(UD_COND_T, NAME, E)
#include "elementwise.def"

// Strided operands <-> contiguous tiles, by element size (stride 0 = broadcast one element).
#define UD_STAMP_PACK(sfx, T)                                                              \
  export void ud_pack_##sfx(uniform int64 n, void *uniform d_, const void *uniform s_,     \
                            uniform int64 st) {                                            \
    uniform T *uniform d = (uniform T * uniform) d_;                                       \
    const uniform T *uniform s = (const uniform T *uniform)s_;                             \
    if (st == 0) {                                                                         \
      const uniform T v = s[0];                                                            \
      foreach (i = 0 ... n) d[i] = v;                                                      \
    } else if (st == 1) {                                                                  \
      foreach (i = 0 ... n) d[i] = s[i];                                                   \
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
