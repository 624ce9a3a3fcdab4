/* program_kit.h — tier-4 helpers for plugin authors (included by plugin_kit.h; optional).
 *
 * elementwise_program's one C parser, the same grammar and messages as the Python one
 * (unidev/core/program.py), so every plugin refuses the same programs naming the same token:
 *
 *     UD_KitProgram* p = (UD_KitProgram*)malloc(sizeof *p);        // ~16 KiB, no pointers
 *     UD_KIT_TRY(ud_kit_program_check_call(a, p, &shape));         // a whole call, or
 *     UD_KIT_TRY(ud_kit_program_parse("elementwise_program", text, n_in, n_out, p));
 *     for each element: ud_kit_program_eval_f64(p, in, out);       // or generate code from p
 *
 * The scalar semantics of every operator (ud_kit_program_op_f64/_f32) are UD_KIT_HD, so CUDA
 * device code can call them; generated code must compute the same functions. The fused ops'
 * epilogue (bias, residual, activation): ud_kit_check_epilogue and ud_kit_activation_f64/_f32.
 */
#ifndef UNIDEV_PROGRAM_KIT_H_
#define UNIDEV_PROGRAM_KIT_H_

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_kit.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define UD_KIT_HD __host__ __device__
#else
#define UD_KIT_HD
#endif

typedef enum UD_KitInstrKind {
  UD_KIT_PI_INPUT = 0,  /* push input `arg` */
  UD_KIT_PI_CONST = 1,  /* push `value` */
  UD_KIT_PI_STORE = 2,  /* pop into register `arg` */
  UD_KIT_PI_LOAD = 3,   /* push register `arg` */
  UD_KIT_PI_OUTPUT = 4, /* pop into output `arg` */
  UD_KIT_PI_OP = 5,     /* apply operator `arg` (a UD_ProgramOpId) */
} UD_KitInstrKind;

typedef struct UD_KitInstr {
  int32_t kind;
  int32_t arg;
  double value;
} UD_KitInstr;

/* A validated program. Plain data (no pointers): copy it anywhere, e.g. to device memory. */
typedef struct UD_KitProgram {
  int32_t num_instrs;
  int32_t num_inputs;
  int32_t num_outputs;
  int32_t max_stack;      /* deepest the stack gets (<= UD_PROGRAM_MAX_STACK) */
  uint32_t registers;     /* bit k: register k is written */
  uint64_t inputs_read;   /* bit k: input k is read */
  UD_KitInstr instrs[UD_PROGRAM_MAX_TOKENS];
} UD_KitProgram;

/* ---- the grammar ------------------------------------------------------------------------- */

/* an index: 0 or [1-9][0-9]{0,5} (no sign, no leading zeros) */
static inline int ud_kit_prog_index_(const char* s, size_t n, int32_t* k) {
  if (n == 0 || n > 6 || (s[0] == '0' && n > 1)) return 0;
  int32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    v = v * 10 + (s[i] - '0');
  }
  *k = v;
  return 1;
}

/* [+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)? | inf | -inf | nan */
static inline int ud_kit_prog_number_(const char* s, size_t n, double* v) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (!strcmp(buf, "inf")) return *v = INFINITY, 1;
  if (!strcmp(buf, "-inf")) return *v = -INFINITY, 1;
  if (!strcmp(buf, "nan")) return *v = NAN, 1;
  size_t i = 0, digits = 0;
  if (buf[i] == '+' || buf[i] == '-') i++;
  while (buf[i] >= '0' && buf[i] <= '9') i++, digits++;
  if (buf[i] == '.') {
    i++;
    while (buf[i] >= '0' && buf[i] <= '9') i++, digits++;
  }
  if (!digits) return 0;
  if (buf[i] == 'e' || buf[i] == 'E') {
    size_t e = 0;
    i++;
    if (buf[i] == '+' || buf[i] == '-') i++;
    while (buf[i] >= '0' && buf[i] <= '9') i++, e++;
    if (!e) return 0;
  }
  if (i != n) return 0;
  *v = strtod(buf, NULL); /* the grammar is a subset of strtod's: same value as Python's float */
  return 1;
}

static inline int ud_kit_prog_space_(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

#define UD_KIT_PROG_BAD_(...) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* Parse and validate `text` for n_inputs inputs and exactly n_outputs outputs (n_outputs < 0: as
 * many as it writes) into *out. On error: UD_ERR_INVALID_ARGUMENT, "OP: attribute 'program':
 * token 3 'foo': unknown token; ..." (the Python parser's messages). Allocates nothing on
 * success. */
static inline UD_Error* ud_kit_program_parse(const char* op, const char* text, int32_t n_inputs,
                                             int32_t n_outputs, UD_KitProgram* out) {
  if (!op) op = "elementwise_program";
  if (!text) UD_KIT_PROG_BAD_("%s: attribute 'program' is NULL, expected a str", op);
  if (n_inputs < 1 || n_inputs > UD_PROGRAM_MAX_INPUTS)
    UD_KIT_PROG_BAD_("%s: input 'xs' has %d tensors, expected 1 to %d", op, (int)n_inputs,
                     UD_PROGRAM_MAX_INPUTS);
  if (n_outputs == 0 || n_outputs > UD_PROGRAM_MAX_OUTPUTS)
    UD_KIT_PROG_BAD_("%s: output 'ys' has %d tensors, expected 1 to %d", op, (int)n_outputs,
                     UD_PROGRAM_MAX_OUTPUTS);
  int total = 0;
  for (const char* c = text; *c; c++) {
    const unsigned char u = (unsigned char)*c;
    if (u >= 127 || (u < 32 && !ud_kit_prog_space_(*c)))
      UD_KIT_PROG_BAD_("%s: attribute 'program' has a character outside printable ASCII and "
                       "the separators space, tab, newline", op);
    if (!ud_kit_prog_space_(*c) && (c == text || ud_kit_prog_space_(c[-1]))) total++;
  }
  if (total == 0)
    UD_KIT_PROG_BAD_("%s: attribute 'program' is empty; expected postfix tokens that write at "
                     "least output o0", op);
  if (total > UD_PROGRAM_MAX_TOKENS)
    UD_KIT_PROG_BAD_("%s: attribute 'program' has %d tokens, at most %d", op, total,
                     UD_PROGRAM_MAX_TOKENS);
  memset(out, 0, offsetof(UD_KitProgram, instrs));
  const int32_t max_out = n_outputs < 0 ? UD_PROGRAM_MAX_OUTPUTS : n_outputs;
  uint32_t written = 0;
  int depth = 0, pos = 0;
  const char* p = text;
  const char* last = NULL;
  size_t last_n = 0;
  for (;; pos++) {
    while (*p && ud_kit_prog_space_(*p)) p++;
    if (!*p) break;
    const char* tok = p;
    while (*p && !ud_kit_prog_space_(*p)) p++;
    const size_t n = (size_t)(p - tok);
    const int tn = n > 64 ? 64 : (int)n; /* tokens quoted in messages: at most 64 characters */
    last = tok;
    last_n = n;
    UD_KitInstr* in = &out->instrs[pos];
    in->value = 0.0;
    const int opid = ud_program_op_id(tok, n);
    int32_t k = 0;
    if (opid >= 0) {
      const int arity = ud_program_op_arity(opid);
      if (depth < arity)
        UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': needs %d operand(s), the "
                         "stack holds %d", op, pos, tn, tok, arity, depth);
      depth -= arity - 1;
      in->kind = UD_KIT_PI_OP;
      in->arg = opid;
    } else if (tok[0] == 'c' && n > 1) {
      if (!ud_kit_prog_number_(tok + 1, n - 1, &in->value))
        UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': is not a constant; expected "
                         "c followed by a decimal number (c2.5, c-1e-3) or cinf, c-inf, cnan",
                         op, pos, tn, tok);
      depth++;
      in->kind = UD_KIT_PI_CONST;
    } else if ((tok[0] == 'i' || tok[0] == 's' || tok[0] == 'r' || tok[0] == 'o') &&
               ud_kit_prog_index_(tok + 1, n - 1, &k)) {
      in->arg = k;
      if (tok[0] == 'i') {
        if (k >= n_inputs)
          UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': reads input %d, but there "
                           "are %d input(s) (i0..i%d)", op, pos, tn, tok, (int)k, (int)n_inputs,
                           (int)n_inputs - 1);
        depth++;
        in->kind = UD_KIT_PI_INPUT;
        out->inputs_read |= 1ull << k;
      } else if (tok[0] == 's' || tok[0] == 'r') {
        if (k >= UD_PROGRAM_MAX_REGISTERS)
          UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': register %d is out of "
                           "range, expected < %d", op, pos, tn, tok, (int)k,
                           UD_PROGRAM_MAX_REGISTERS);
        if (tok[0] == 's') {
          if (depth < 1)
            UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': stores from an empty "
                             "stack", op, pos, tn, tok);
          depth--;
          out->registers |= 1u << k;
          in->kind = UD_KIT_PI_STORE;
        } else {
          if (!(out->registers & (1u << k)))
            UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': reads register %d before "
                             "any s%d", op, pos, tn, tok, (int)k, (int)k);
          depth++;
          in->kind = UD_KIT_PI_LOAD;
        }
      } else {
        if (k >= max_out)
          UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': writes output %d, but "
                           "there are %d output(s) (o0..o%d)", op, pos, tn, tok, (int)k,
                           (int)max_out, (int)max_out - 1);
        if (written & (1u << k))
          UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': writes output %d a second "
                           "time; expected each output written exactly once", op, pos, tn, tok,
                           (int)k);
        if (depth < 1)
          UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': writes an output from an "
                           "empty stack", op, pos, tn, tok);
        depth--;
        written |= 1u << k;
        in->kind = UD_KIT_PI_OUTPUT;
      }
    } else {
      UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': unknown token; expected i<k>, "
                       "c<num>, s<k>, r<k>, o<k> or an operator of "
                       "unidev.contract.opset.PROGRAM_OPS", op, pos, tn, tok);
    }
    if (depth > UD_PROGRAM_MAX_STACK)
      UD_KIT_PROG_BAD_("%s: attribute 'program': token %d '%.*s': the stack grows past %d values",
                       op, pos, tn, tok, UD_PROGRAM_MAX_STACK);
    if (depth > out->max_stack) out->max_stack = depth;
  }
  if (depth)
    UD_KIT_PROG_BAD_("%s: attribute 'program': %d value(s) left on the stack after the last "
                     "token '%.*s'; expected every value consumed (write it with o<k> or drop "
                     "it)", op, depth, last_n > 64 ? 64 : (int)last_n, last);
  int count = n_outputs;
  if (count < 0) {
    count = 0;
    for (int b = 0; b < UD_PROGRAM_MAX_OUTPUTS; b++)
      if (written & (1u << b)) count = b + 1;
  }
  for (int b = 0; b < (count ? count : 1); b++)
    if (!(written & (1u << b)))
      UD_KIT_PROG_BAD_("%s: attribute 'program': output(s) o%d never written; expected each of "
                       "o0..o%d exactly once", op, b, (count ? count : 1) - 1);
  out->num_instrs = pos;
  out->num_inputs = n_inputs;
  out->num_outputs = count;
  return NULL;
}

/* ---- the operators' scalar semantics ------------------------------------------------------
 * One definition per precision. Compares give 1 or 0; where(a, b, c) = c != 0 ? a : b. */
#define UD_KIT_PROG_GELU_K_ 0.7978845608028654 /* sqrt(2 / pi) */
#define UD_KIT_PROG_SQRT1_2_ 0.7071067811865476

#define UD_KIT_DEFINE_PROGRAM_OP_(SUFFIX, T, F)                                                \
  static inline UD_KIT_HD T ud_kit_sigmoid_##SUFFIX(T x) { return (T)1 / ((T)1 + exp##F(-x)); } \
  static inline UD_KIT_HD T ud_kit_program_op_##SUFFIX(int op, T a, T b, T c) {                 \
    switch (op) {                                                                               \
      case UD_PROG_NEG: return -a;                                                              \
      case UD_PROG_ABS: return fabs##F(a);                                                      \
      case UD_PROG_EXP: return exp##F(a);                                                       \
      case UD_PROG_LOG: return log##F(a);                                                       \
      case UD_PROG_SQRT: return sqrt##F(a);                                                     \
      case UD_PROG_RSQRT: return (T)1 / sqrt##F(a);                                             \
      case UD_PROG_RECIPROCAL: return (T)1 / a;                                                 \
      case UD_PROG_SIN: return sin##F(a);                                                       \
      case UD_PROG_COS: return cos##F(a);                                                       \
      case UD_PROG_TANH: return tanh##F(a);                                                     \
      case UD_PROG_SIGMOID: return ud_kit_sigmoid_##SUFFIX(a);                                  \
      case UD_PROG_RELU: return a < (T)0 ? (T)0 : a;                                            \
      case UD_PROG_GELU: return (T)0.5 * a * ((T)1 + erf##F(a * (T)UD_KIT_PROG_SQRT1_2_));      \
      case UD_PROG_GELU_TANH:                                                                   \
        return (T)0.5 * a *                                                                     \
               ((T)1 + tanh##F((T)UD_KIT_PROG_GELU_K_ * (a + (T)0.044715 * a * a * a)));        \
      case UD_PROG_SILU: return a * ud_kit_sigmoid_##SUFFIX(a);                                 \
      case UD_PROG_ERF: return erf##F(a);                                                       \
      case UD_PROG_FLOOR: return floor##F(a);                                                   \
      case UD_PROG_CEIL: return ceil##F(a);                                                     \
      case UD_PROG_ROUND: return rint##F(a); /* half to even in the default rounding mode */    \
      case UD_PROG_SIGN: return (T)(a > (T)0) - (T)(a < (T)0);                                  \
      case UD_PROG_SQUARE: return a * a;                                                        \
      case UD_PROG_ADD: return a + b;                                                           \
      case UD_PROG_SUB: return a - b;                                                           \
      case UD_PROG_MUL: return a * b;                                                           \
      case UD_PROG_DIV: return a / b;                                                           \
      case UD_PROG_POW: return pow##F(a, b);                                                    \
      case UD_PROG_MAXIMUM: return a != a || b != b ? a + b : a > b ? a : b;                    \
      case UD_PROG_MINIMUM: return a != a || b != b ? a + b : a < b ? a : b;                    \
      case UD_PROG_EQ: return (T)(a == b);                                                      \
      case UD_PROG_NE: return (T)(a != b);                                                      \
      case UD_PROG_LT: return (T)(a < b);                                                       \
      case UD_PROG_LE: return (T)(a <= b);                                                      \
      case UD_PROG_GT: return (T)(a > b);                                                       \
      case UD_PROG_GE: return (T)(a >= b);                                                      \
      case UD_PROG_WHERE: return c != (T)0 ? a : b;                                             \
      default: return (T)NAN;                                                                   \
    }                                                                                           \
  }

UD_KIT_DEFINE_PROGRAM_OP_(f64, double, )
UD_KIT_DEFINE_PROGRAM_OP_(f32, float, f)

/* One element: in[k] is input k's value, out[k] receives output k. The stack lives in
 * UD_PROGRAM_MAX_STACK values of the caller's frame; registers likewise. */
#define UD_KIT_DEFINE_PROGRAM_EVAL_(SUFFIX, T)                                                 \
  static inline UD_KIT_HD void ud_kit_program_eval_##SUFFIX(const UD_KitProgram* p,             \
                                                            const T* in, T* out) {              \
    T stack[UD_PROGRAM_MAX_STACK + 1], regs[UD_PROGRAM_MAX_REGISTERS];                          \
    int top = 0;                                                                                \
    for (int i = 0; i < p->num_instrs; i++) {                                                   \
      const UD_KitInstr* ins = &p->instrs[i];                                                   \
      switch (ins->kind) {                                                                      \
        case UD_KIT_PI_INPUT: stack[top++] = in[ins->arg]; break;                               \
        case UD_KIT_PI_CONST: stack[top++] = (T)ins->value; break;                              \
        case UD_KIT_PI_STORE: regs[ins->arg] = stack[--top]; break;                             \
        case UD_KIT_PI_LOAD: stack[top++] = regs[ins->arg]; break;                              \
        case UD_KIT_PI_OUTPUT: out[ins->arg] = stack[--top]; break;                             \
        default: {                                                                              \
          const int n = ud_program_op_arity(ins->arg);                                          \
          T a = stack[top - n], b = n > 1 ? stack[top - n + 1] : (T)0,                          \
            c = n > 2 ? stack[top - n + 2] : (T)0;                                              \
          top -= n;                                                                             \
          stack[top++] = ud_kit_program_op_##SUFFIX(ins->arg, a, b, c);                         \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }

#if !defined(__CUDACC__) /* ud_program_op_arity is a host table: device code has its own loop */
UD_KIT_DEFINE_PROGRAM_EVAL_(f64, double)
UD_KIT_DEFINE_PROGRAM_EVAL_(f32, float)
#endif

/* ---- a whole elementwise_program call ------------------------------------------------------ */

/* Validates a call: the signature, one FLOAT dtype for every input and output, every input of
 * one shape S (pre-broadcast), the program (parsed into *prog for num_inputs/num_outputs), the
 * reduction (`reduce` id into *reduce, the number of reduced trailing axes into *reduced) and
 * each output's shape (S, or S without its last *reduced axes). Cheap enough per call; a plugin
 * that caches parsed programs (kernel_compile) may call ud_kit_program_check_shapes instead. */
static inline UD_Error* ud_kit_program_check_shapes(const UD_KernelArgs* a, int* reduce,
                                                     int* reduced) {
  const char* op = "elementwise_program";
  UD_KIT_TRY(ud_kit_check_signature(UD_OP_ELEMENTWISE_PROGRAM, a));
  UD_KIT_TRY(ud_kit_check_choice(UD_OP_ELEMENTWISE_PROGRAM, a,
                                 UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE, reduce));
  const UD_Tensor* x0 = &a->inputs[0];
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "xs[0]", x0, UD_DTM_FLOAT_GROUP, NULL));
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor* t = &a->inputs[i];
    if (!ud_kit_dtype_eq(t->dtype, x0->dtype))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'xs[%d]' has dtype %s, expected %s like "
                          "xs[0]", op, i, ud_kit_dtype_name(t->dtype),
                          ud_kit_dtype_name(x0->dtype));
    if (!ud_kit_same_shape(t, x0))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'xs[%d]' has %d dims or another shape "
                          "than xs[0]; expected every input pre-broadcast to one shape", op, i,
                          (int)t->ndim);
  }
  const UD_Attr* axes = &a->attrs[UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE_AXES];
  const int64_t n = axes->value.ints.len, nd = x0->ndim;
  if (*reduce == UD_RED_NONE ? n != 0 : (n < 1 || n > nd))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute 'reduce_axes' has %lld axes for "
                        "reduce '%s' over %d dims; expected %s", op, (long long)n,
                        ud_kit_attr_str(a, UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE), (int)nd,
                        *reduce == UD_RED_NONE ? "none" : "1 or more trailing axes");
  for (int64_t j = 0; j < n; j++)
    if (axes->value.ints.data[j] != nd - n + j)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute 'reduce_axes'[%lld] = %lld; "
                          "expected the sorted trailing axes %lld..%lld", op, (long long)j,
                          (long long)axes->value.ints.data[j], (long long)(nd - n),
                          (long long)(nd - 1));
  *reduced = (int)n;
  for (int k = 0; k < a->num_outputs; k++) {
    const UD_Tensor* y = &a->outputs[k];
    if (!ud_kit_dtype_eq(y->dtype, x0->dtype))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'ys[%d]' has dtype %s, expected %s", op,
                          k, ud_kit_dtype_name(y->dtype), ud_kit_dtype_name(x0->dtype));
    int ok = y->ndim == nd - n;
    for (int d = 0; ok && d < y->ndim; d++) ok = y->shape[d] == x0->shape[d];
    if (!ok)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'ys[%d]' has %d dims or another shape; "
                          "expected the inputs' shape%s", op, k, (int)y->ndim,
                          n ? " without the reduced trailing axes" : "");
    if ((*reduce == UD_RED_MAX || *reduce == UD_RED_MIN) && ud_kit_numel(y) > 0)
      for (int64_t j = nd - n; j < nd; j++)
        if (x0->shape[j] == 0)
          return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: reduce '%s' over an empty axis %lld",
                              op, ud_kit_attr_str(a, UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE),
                              (long long)j);
  }
  return NULL;
}

static inline UD_Error* ud_kit_program_check_call(const UD_KernelArgs* a, UD_KitProgram* prog,
                                                  int* reduce, int* reduced) {
  UD_KIT_TRY(ud_kit_program_check_shapes(a, reduce, reduced));
  return ud_kit_program_parse("elementwise_program",
                              ud_kit_attr_str(a, UD_ATTR_ELEMENTWISE_PROGRAM_PROGRAM),
                              a->num_inputs, a->num_outputs, prog);
}

/* ---- the fused ops' epilogue --------------------------------------------------------------- */

/* The program operator an activation (UD_ActivationId other than none) applies. */
static inline UD_KIT_HD int ud_kit_activation_op(int act) {
  return act == UD_ACT_RELU ? UD_PROG_RELU
       : act == UD_ACT_GELU ? UD_PROG_GELU
       : act == UD_ACT_GELU_TANH ? UD_PROG_GELU_TANH
       : act == UD_ACT_SIGMOID ? UD_PROG_SIGMOID
       : act == UD_ACT_TANH ? UD_PROG_TANH
       : UD_PROG_SILU;
}

static inline UD_KIT_HD double ud_kit_activation_f64(int act, double v) {
  return act == UD_ACT_NONE ? v : ud_kit_program_op_f64(ud_kit_activation_op(act), v, 0, 0);
}

static inline UD_KIT_HD float ud_kit_activation_f32(int act, float v) {
  return act == UD_ACT_NONE ? v : ud_kit_program_op_f32(ud_kit_activation_op(act), v, 0, 0);
}

/* conv2d_bias_act / gemm_bias_act (op: UD_OP_CONV2D_BIAS_ACT or UD_OP_GEMM_BIAS_ACT): the
 * signature, the activation (UD_ActivationId into *act), and the epilogue operands against the
 * output: bias present => 1-D of the output's channel count (dim 1) and its dtype; residual
 * present => the output's shape and dtype. The conv/gemm part is the plugin's own check. */
static inline UD_Error* ud_kit_check_epilogue(int op, const UD_KernelArgs* a, int* act) {
  UD_KIT_TRY(ud_kit_check_signature(op, a));
  const int conv = op == UD_OP_CONV2D_BIAS_ACT;
  if (!conv && op != UD_OP_GEMM_BIAS_ACT)
    return ud_kit_error(UD_ERR_INTERNAL, "ud_kit_check_epilogue: op %d is not a fused op", op);
  const char* name = ud_op_info(op)->name;
  UD_KIT_TRY(ud_kit_check_choice(op, a, conv ? UD_ATTR_CONV2D_BIAS_ACT_ACTIVATION
                                             : UD_ATTR_GEMM_BIAS_ACT_ACTIVATION, act));
  const UD_Tensor* y = &a->outputs[0];
  const UD_Tensor* bias = &a->inputs[conv ? UD_IN_CONV2D_BIAS_ACT_BIAS : UD_IN_GEMM_BIAS_ACT_BIAS];
  const UD_Tensor* res =
      &a->inputs[conv ? UD_IN_CONV2D_BIAS_ACT_RESIDUAL : UD_IN_GEMM_BIAS_ACT_RESIDUAL];
  UD_KIT_TRY(ud_kit_check_dtype_in(name, ud_op_info(op)->output_names[0], y, UD_DTM_FLOAT_GROUP,
                                   NULL));
  if (y->ndim != (conv ? 4 : 2))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: output has %d dims, expected %d", name,
                        (int)y->ndim, conv ? 4 : 2);
  if (ud_kit_present(bias)) {
    UD_KIT_TRY(ud_kit_check_dtype(name, "bias", bias, y->dtype));
    if (bias->ndim != 1 || bias->shape[0] != y->shape[1])
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'bias' has %d dims (first %lld), "
                          "expected 1 of %lld", name, (int)bias->ndim,
                          (long long)(bias->ndim > 0 ? bias->shape[0] : -1),
                          (long long)y->shape[1]);
  }
  if (ud_kit_present(res)) {
    UD_KIT_TRY(ud_kit_check_dtype(name, "residual", res, y->dtype));
    UD_KIT_TRY(ud_kit_check_same_shape(name, "residual", res, y));
  }
  return NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* UNIDEV_PROGRAM_KIT_H_ */
