// optim.ispc — one optimizer step over n contiguous elements of each tensor, one pass over
// memory, in the op's dtype with torch's fused-kernel order of operations. src/optim.c
// validates, reads the device scalars, computes the coefficients and splits the work.
#include "common.isph"
#include "optim.h"

typedef uniform struct UD_Optim *uniform Coef;

// max that propagates nan from either side (torch's vectorized maximum)
#define UD_NANMAX(a, b) ((a) != (a) || (b) != (b) ? (a) + (b) : max((a), (b)))

#define UD_OPTIM(sfx, T, _)                                                                    \
  static inline T ud_grad_##sfx(Coef c, uniform T *uniform g, int64 i) {                      \
    T v = g[i];                                                                               \
    if (c->has_scale) {                                                                       \
      v = v / (uniform T)c->scale;                                                            \
      g[i] = v; /* torch writes the unscaled gradient back */                                 \
    }                                                                                         \
    return c->maximize ? -v : v;                                                              \
  }                                                                                           \
  export void ud_sgd_step_##sfx(uniform int64 n, void *uniform p_, void *uniform g_,          \
                                void *uniform b_, Coef c) {                                   \
    uniform T *uniform p = (uniform T * uniform) p_;                                          \
    uniform T *uniform g = (uniform T * uniform) g_;                                          \
    uniform T *uniform b = (uniform T * uniform) b_;                                          \
    const uniform T wd = (T)c->wd, gain = (T)c->gain, mom = (T)c->momentum;                   \
    const uniform T damp1 = (T)c->damp1, lr = (T)c->lr;                                       \
    foreach (i = 0 ... n) {                                                                   \
      T v = ud_grad_##sfx(c, g, i);                                                           \
      if (c->wd != 0) v = v + p[i] * wd;                                                      \
      if (c->gain != 1) v = v * gain;                                                         \
      if (c->use_momentum) {                                                                  \
        const T buf = c->first ? v : b[i] * mom + v * damp1;                                  \
        b[i] = buf;                                                                           \
        v = c->nesterov ? v + buf * mom : buf;                                                \
      }                                                                                       \
      p[i] = p[i] - v * lr;                                                                   \
    }                                                                                         \
  }                                                                                           \
  export void ud_adam_step_##sfx(uniform int64 n, void *uniform p_, void *uniform g_,         \
                                 void *uniform m_, void *uniform v_, void *uniform vmax_,     \
                                 Coef c) {                                                    \
    uniform T *uniform p = (uniform T * uniform) p_;                                          \
    uniform T *uniform g = (uniform T * uniform) g_;                                          \
    uniform T *uniform m = (uniform T * uniform) m_;                                          \
    uniform T *uniform v = (uniform T * uniform) v_;                                          \
    uniform T *uniform vmax = (uniform T * uniform) vmax_;                                    \
    const uniform T wd = (T)c->wd, decay = (T)c->decay, b1 = (T)c->beta1, b2 = (T)c->beta2;   \
    const uniform T w = (T)c->one_minus_beta1, c2 = (T)c->one_minus_beta2;                   \
    const uniform T w1 = (T)1 - w;                                                            \
    const uniform T eps = (T)c->eps, ss = (T)c->step_size, bc2s = (T)c->bc2_sqrt;             \
    foreach (i = 0 ... n) {                                                                   \
      T gv = ud_grad_##sfx(c, g, i), pv = p[i], mv = m[i];                                    \
      if (c->wd != 0) {                                                                       \
        if (c->decoupled)                                                                     \
          pv = pv * decay;                                                                    \
        else                                                                                  \
          gv = gv + pv * wd;                                                                  \
      }                                                                                       \
      mv = c->lerp_small ? mv + w * (gv - mv) : gv - (gv - mv) * w1; /* torch's lerp */       \
      m[i] = mv;                                                                              \
      T vv = v[i] * b2 + c2 * gv * gv;                                                        \
      v[i] = vv;                                                                              \
      if (c->amsgrad) {                                                                       \
        vv = UD_NANMAX(vmax[i], vv);                                                          \
        vmax[i] = vv;                                                                         \
      }                                                                                       \
      if (c->nesterov) mv = mv * b1 + w * gv;                                                 \
      p[i] = pv - ss * mv / (sqrt(vv) / bc2s + eps);                                          \
    }                                                                                         \
  }

UD_FLOATS(UD_OPTIM, _)
