/* optim.h — one optimizer step's coefficients, computed once per call in double (as torch's
 * fused CPU kernels do) and shared by C and ISPC. */
#ifndef UD_OPTIM_H_
#define UD_OPTIM_H_
#ifdef ISPC
typedef int32 int32_t;
#else
#include <stdint.h>
#endif

struct UD_Optim {
  double scale;                      /* grad_scale's value (has_scale) */
  double wd, lr;                     /* weight decay; sgd: the step's factor (-1: lr_in_momentum) */
  double gain, momentum, damp1;      /* sgd: -lr (lr_in_momentum) or 1; momentum; 1 - dampening */
  double beta1, one_minus_beta1, beta2, one_minus_beta2, eps, decay, step_size, bc2_sqrt; /* adam */
  int32_t has_scale, maximize, nesterov, first, use_momentum, decoupled, amsgrad, lerp_small;
};
#endif
