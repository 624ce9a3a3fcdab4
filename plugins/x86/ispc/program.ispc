// program.ispc — elementwise_program's interpreter (the kernel_lookup kernel, and kernel_compile's
// where no ISPC runs): the program parsed by plugin_kit.h (src/program.c), token by token over a
// block of n <= cap contiguous elements, each token one vectorized loop over the block; and the
// conv/gemm fused ops' epilogue (bias, residual, activation) through the same operators.
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

// r[j] = op(pa[j], pb[j], pc[j]) for j < n (r may be an operand)
template <typename T>
static inline void apply(uniform int op, uniform int64 n, uniform T *uniform r,
                         const uniform T *uniform pa, const uniform T *uniform pb,
                         const uniform T *uniform pc) {
  switch (op) {
#define UD_POP(N, A, E) \
  case UD_PO_##N: foreach (j = 0 ... n) { T a = pa[j], b = pb[j], c = pc[j]; r[j] = E; } break;
#include "program_ops.def"
#undef UD_POP
  }
}

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
    if (k == 2 || k == 4) /* a store or an output pops (outputs after the registers) */
      foreach (j = 0 ... n) reg[(k == 2 ? arg : 16 + arg) * cap + j] = top[j];
    if (k == 5) apply<T>(arg, n, r, pa, pb, pc);
    if (k == 2 || k == 4) d--;
    else d -= ar, stk[d++] = r;
  }
}
#define UD_INTERP(T, SFX)                                                                   \
  export void ud_prog_interp_##SFX(uniform int64 n, const uniform UD_ProgTok *uniform p,    \
                                   uniform int32 ntok, void *uniform *uniform xs,          \
                                   void *uniform s, uniform int64 cap, uniform int32 max_stack) { \
    interpret<T>(n, p, ntok, xs, (uniform T *uniform)s, cap, max_stack);                     \
  }
UD_INTERP(float, f32)
UD_INTERP(double, f64)

// The fused ops' epilogue (src/dense/dense_common.h) over n contiguous elements of y:
// y = act(y + bias + r) in T, op a UD_PROG_* operator of arity 1 (-1: none); bias null, one
// value (per_elem 0) or one per element; r null or contiguous. A few passes over a row in cache.
#define UD_EPI(T, SFX)                                                                         \
  export void ud_epilogue_##SFX(uniform int64 n, uniform T *uniform y,                        \
                                const uniform T *uniform b, uniform int32 per_elem,            \
                                const uniform T *uniform r, uniform int32 op) {                \
    if (per_elem) foreach (j = 0 ... n) y[j] += b[j];                                          \
    else if (b != NULL) foreach (j = 0 ... n) y[j] += b[0];                                    \
    if (r != NULL) foreach (j = 0 ... n) y[j] += r[j];                                         \
    apply<T>(op, n, y, y, y, y);                                                               \
  }
UD_EPI(float, f32)
UD_EPI(double, f64)
