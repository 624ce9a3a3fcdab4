// program.ispc — elementwise_program's interpreter (the kernel_lookup kernel, and kernel_compile's
// where no ISPC runs): the program parsed by src/program.c, token by token over a block of n <= cap
// contiguous elements, each token one vectorized loop over the block. This file includes itself
// once per dtype (UD_T) for the body.
#ifndef UD_T
#include "program.isph"

struct UD_ProgTok {  // plugin_kit.h's UD_KitInstr
  int32 kind;    // UD_KIT_PI_*: input, const, store, load, output, op
  int32 arg;     // k of i<k> s<k> r<k> o<k>, or the operator (UD_PROG_*, program_ops.def's order)
  double value;  // c<num>
};
#define UD_POP(N, A, E) UD_PO_##N,
enum UD_ProgOp {
#include "program_ops.def"
};
#undef UD_POP
static const uniform int32 g_arity[] = {
#define UD_POP(N, A, E) A,
#include "program_ops.def"
#undef UD_POP
};
#define UD_CAT(a, b) a##b
#define UD_NAME(a, b) UD_CAT(a, b)
#define UD_T float
#define UD_SFX f32
#include "program.ispc"
#undef UD_T
#undef UD_SFX
#define UD_T double
#define UD_SFX f64
#include "program.ispc"
#else

// scratch: the stack's slots, then the 16 registers, then the outputs (cap elements each); the
// outputs stay in scratch (the caller copies them out) so an output may be an input's memory
export void UD_NAME(ud_prog_interp_, UD_SFX)(uniform int64 n, const uniform UD_ProgTok *uniform p,
                                               uniform int32 ntok, void *uniform *uniform xs,
                                               void *uniform scratch, uniform int64 cap,
                                               uniform int32 max_stack) {
  typedef UD_T T;
  uniform T *uniform s = (uniform T * uniform) scratch;
  uniform T *uniform reg = s + max_stack * cap;
  uniform T *uniform out = reg + 16 * cap;
  const uniform T *uniform stk[64];
  uniform int d = 0;
  for (uniform int t = 0; t < ntok; t++) {
    const uniform int k = p[t].kind, arg = p[t].arg;
    uniform T *uniform r = s + d * cap; /* a pushed value's slot */
    if (k == 0) {
      stk[d++] = (const uniform T *uniform)xs[arg];
    } else if (k == 1) {
      const uniform T v = (uniform T)p[t].value;
      foreach (j = 0 ... n) r[j] = v;
      stk[d++] = r;
    } else if (k == 3) {
      foreach (j = 0 ... n) r[j] = reg[arg * cap + j];
      stk[d++] = r;
    } else if (k == 2 || k == 4) {
      uniform T *uniform dst = (k == 2 ? reg : out) + arg * cap;
      const uniform T *uniform src = stk[--d];
      foreach (j = 0 ... n) dst[j] = src[j];
    } else {
      const uniform int ar = g_arity[arg];
      d -= ar;
      r = s + d * cap;
      const uniform T *uniform pa = stk[d], *uniform pb = stk[ar > 1 ? d + 1 : d];
      const uniform T *uniform pc = stk[ar > 2 ? d + 2 : d];
      switch (arg) {
#define UD_POP(N, A, E)                 \
  case UD_PO_##N:                       \
    foreach (j = 0 ... n) {             \
      T a = pa[j], b = pb[j], c = pc[j]; \
      r[j] = E;                         \
    }                                   \
    break;
#include "program_ops.def"
#undef UD_POP
      }
      stk[d++] = r;
    }
  }
}
#endif
