// program.ispc — elementwise_program's interpreter (the kernel_lookup kernel, and kernel_compile's
// where no ISPC runs): the program parsed by plugin_kit.h (src/program.c), token by token over a
// block of n <= cap contiguous elements, each token one vectorized loop over the block.
#include "program.isph"

struct UD_ProgTok {  // plugin_kit.h's UD_KitInstr
  int32 kind;    // UD_KIT_PI_*: 0 input, 1 const, 2 store, 3 load, 4 output, 5 operator
  int32 arg;     // k of i<k> s<k> r<k> o<k>, or the operator (UD_PROG_*: program_ops.def's order)
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

// scratch: the stack's slots, then the 16 registers, then the outputs (cap elements each); the
// outputs stay in scratch (the caller copies them out), so an output may be an input's memory
template <typename T>
static void interpret(uniform int64 n, const uniform UD_ProgTok *uniform p, uniform int32 ntok,
                      void *uniform *uniform xs, uniform T *uniform s, uniform int64 cap,
                      uniform int32 max_stack) {
  uniform T *uniform reg = s + max_stack * cap;
  const uniform T *uniform stk[65];
  uniform int d = 0;
  for (uniform int t = 0; t < ntok; t++) {
    const uniform int k = p[t].kind, arg = p[t].arg;
    const uniform int ar = k == 5 ? g_arity[arg] : 0;
    const uniform int o = d - ar; /* an operator's operands: stk[o...] */
    uniform T *uniform r = s + o * cap; /* where a pushed value or a result goes */
    const uniform T *uniform pa = stk[o], *uniform pb = stk[ar > 1 ? o + 1 : o];
    const uniform T *uniform pc = stk[ar > 2 ? o + 2 : o], *uniform top = stk[d > 0 ? d - 1 : 0];
    if (k == 0) r = (uniform T * uniform) xs[arg];
    if (k == 1) foreach (j = 0 ... n) r[j] = (uniform T)p[t].value;
    if (k == 3) foreach (j = 0 ... n) r[j] = reg[arg * cap + j];
    if (k == 2 || k == 4) { /* outputs after the registers */
      uniform T *uniform dst = reg + (k == 2 ? arg : 16 + arg) * cap;
      foreach (j = 0 ... n) dst[j] = top[j];
      d--;
      continue;
    }
    switch (k == 5 ? arg : -1) {
#define UD_POP(N, A, E)                  \
  case UD_PO_##N:                        \
    foreach (j = 0 ... n) {              \
      T a = pa[j], b = pb[j], c = pc[j]; \
      r[j] = E;                          \
    }                                    \
    break;
#include "program_ops.def"
#undef UD_POP
    }
    d -= ar;
    stk[d++] = r;
  }
}
#define UD_ARGS                                                                             \
  uniform int64 n, const uniform UD_ProgTok *uniform p, uniform int32 ntok,                 \
      void *uniform *uniform xs, void *uniform s, uniform int64 cap, uniform int32 max_stack
export void ud_prog_interp_f32(UD_ARGS) {
  interpret<float>(n, p, ntok, xs, (uniform float *uniform)s, cap, max_stack);
}
export void ud_prog_interp_f64(UD_ARGS) {
  interpret<double>(n, p, ntok, xs, (uniform double *uniform)s, cap, max_stack);
}
