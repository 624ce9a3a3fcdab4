/* plugin_kit.h — optional header-only helpers for plugin authors (errors, signatures, strides).
 *
 * Nothing here is part of the contract; a plugin may ignore it. Include it in exactly the
 * translation units that need it: every function is `static inline`. It includes the generated
 * ops.h (op ids, signatures, the dtype table).
 *
 *   #include <unidev/plugin_kit.h>
 *   ... api.error_code = ud_kit_error_code; api.error_message = ud_kit_error_message;
 *       api.error_destroy = ud_kit_error_destroy;
 *   static UD_Error* add_f32(const UD_KernelArgs* a) {
 *     UD_KIT_TRY(ud_kit_check_signature(UD_OP_ADD, a));      // counts, attrs, every tensor
 *     const UD_Tensor* y = &a->inputs[UD_IN_ADD_Y];
 *     UD_KIT_REQUIRE(ud_kit_dtype_eq(y->dtype, a->inputs[0].dtype), UD_ERR_INVALID_ARGUMENT,
 *                    "add: 'y' has dtype %s, expected %s", ...);
 *     UD_KIT_TRY(ud_kit_check_scalars(UD_OP_ADD, a, y->dtype)); // alpha fits the dtype
 *     double alpha = ud_kit_attr_float(a, UD_ATTR_ADD_ALPHA); ...
 *   (string attributes: ud_kit_check_choice(UD_OP_GELU, a, UD_ATTR_GELU_APPROXIMATE, &index))
 */
#ifndef UNIDEV_PLUGIN_KIT_H_
#define UNIDEV_PLUGIN_KIT_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "unidev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define UD_KIT_MAX_DIMS 16

/* ---- errors ---------------------------------------------------------------------------------
 * The kit's error object: a code and a message in one allocation (the text follows the struct;
 * a pointer, not a flexible array member, so the header is also ISO C++). */
struct UD_Error {
  UD_ErrorCode code;
  const char* message;
};

/* Returned when the host cannot even allocate the error message; never freed. */
static inline UD_Error* ud_kit_host_oom_error(void) {
  static UD_Error oom = {UD_ERR_OUT_OF_MEMORY, "out of host memory"};
  return &oom;
}

static inline UD_Error* ud_kit_error(UD_ErrorCode code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  UD_Error* e = (UD_Error*)malloc(sizeof(UD_Error) + (size_t)n + 1);
  if (!e) return ud_kit_host_oom_error();
  char* text = (char*)(e + 1);
  e->code = code;
  e->message = text;
  va_start(ap, fmt);
  vsnprintf(text, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return e;
}

/* Return the UD_Error* that `expr` evaluates to when it is non-NULL. */
#define UD_KIT_TRY(expr)                 \
  do {                                   \
    UD_Error* ud_kit_try_e_ = (expr);    \
    if (ud_kit_try_e_) return ud_kit_try_e_; \
  } while (0)

/* Unless `cond`, return ud_kit_error(code, fmt, ...); the message starts with the op name. */
#define UD_KIT_REQUIRE(cond, code, ...)                         \
  do {                                                          \
    if (!(cond)) return ud_kit_error((code), __VA_ARGS__);      \
  } while (0)

static inline UD_ErrorCode ud_kit_error_code(const UD_Error* e) { return e ? e->code : UD_OK; }
static inline const char* ud_kit_error_message(const UD_Error* e) { return e ? e->message : ""; }
static inline void ud_kit_error_destroy(UD_Error* e) {
  if (e != ud_kit_host_oom_error()) free(e);
}

/* ---- dtypes --------------------------------------------------------------------------------- */

static inline UD_DType ud_kit_dtype(uint8_t code, uint8_t bits) {
  UD_DType d = {code, bits, 1};
  return d;
}

static inline int ud_kit_dtype_eq(UD_DType a, UD_DType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/* old name of ops.h's ud_dtype_name */
static inline const char* ud_kit_dtype_name(UD_DType d) { return ud_dtype_name(d); }

static inline int64_t ud_kit_itemsize(UD_DType d) { return (int64_t)(d.bits / 8) * d.lanes; }

/* ---- descriptors ---------------------------------------------------------------------------- */

static inline int ud_kit_present(const UD_Tensor* t) { return t->ndim >= 0; }

static inline int64_t ud_kit_numel(const UD_Tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Bytes from t->handle to one past the last element reachable through the view (byte_offset
 * included); 0 for an empty view. Assumes ud_kit_check_tensor passed. */
static inline uint64_t ud_kit_extent(const UD_Tensor* t) {
  int64_t last = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 0) return 0;
    last += (t->shape[i] - 1) * t->strides[i];
  }
  return t->byte_offset + (uint64_t)(last + 1) * (uint64_t)ud_kit_itemsize(t->dtype);
}

static inline int ud_kit_is_contiguous(const UD_Tensor* t) {
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
    expect *= t->shape[i];
  }
  return 1;
}

/* Structural checks every kernel needs: ndim in range, shapes and strides non-negative, no
 * overflow in the reachable extent. `op` and `arg` name the call in the message. */
static inline UD_Error* ud_kit_check_tensor(const char* op, const char* arg, const UD_Tensor* t) {
  if (t->ndim < 0 || t->ndim > UD_KIT_MAX_DIMS)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has ndim %d, expected 0..%d", op, arg,
                        t->ndim, UD_KIT_MAX_DIMS);
  if (t->ndim > 0 && (!t->shape || !t->strides))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has NULL shape or strides", op, arg);
  if (t->handle == 0 && t->ndim >= 0) {
    int64_t n = ud_kit_numel(t);
    if (n != 0) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has a null handle", op, arg);
  }
  /* overflow builtins, not divisions: this runs for every tensor of every call */
  const int64_t limit = INT64_MAX / 16;
  int64_t last = 0, numel = 1, span;
  for (int i = 0; i < t->ndim; i++) {
    const int64_t n = t->shape[i], s = t->strides[i];
    if (n < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' shape[%d] = %lld, expected >= 0", op,
                          arg, i, (long long)n);
    if (s < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' strides[%d] = %lld, expected >= 0",
                          op, arg, i, (long long)s);
    /* the element count must fit too: strides of 0 keep the extent small for any shape */
    if (__builtin_mul_overflow(numel, n, &numel) || numel > limit)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has more than 2^59 elements", op,
                          arg);
    if (n > 0 && (__builtin_mul_overflow(n - 1, s, &span) ||
                  __builtin_add_overflow(last, span, &last) || last > limit))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' extent overflows (dim %d)", op, arg, i);
  }
  return NULL;
}

static inline UD_Error* ud_kit_check_dtype(const char* op, const char* arg, const UD_Tensor* t,
                                           UD_DType want) {
  if (!ud_kit_dtype_eq(t->dtype, want))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has dtype %s, expected %s", op, arg,
                        ud_kit_dtype_name(t->dtype), ud_kit_dtype_name(want));
  return NULL;
}

static inline int ud_kit_same_shape(const UD_Tensor* a, const UD_Tensor* b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

static inline UD_Error* ud_kit_check_same_shape(const char* op, const char* arg,
                                                const UD_Tensor* t, const UD_Tensor* ref) {
  if (!ud_kit_same_shape(t, ref))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: '%s' shape does not match the output's (ndim %d vs %d); elementwise "
                        "inputs must arrive broadcast to the output shape",
                        op, arg, t->ndim, ref->ndim);
  return NULL;
}

/* ---- signatures -----------------------------------------------------------------------------
 * Writes the dtype names of `mask` ("float32, float64") to buf; returns buf. */
static inline const char* ud_kit_dtype_mask_names(uint32_t mask, char* buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < UD_DT_COUNT && used + 1 < n; i++) {
    if (!(mask & (1u << i))) continue;
    int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", ud_dtype_id_name(i));
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

/* `t`'s dtype must be one of `mask` (UD_DTM_*); *id (if not NULL) receives its UD_DTypeId. */
static inline UD_Error* ud_kit_check_dtype_in(const char* op, const char* arg, const UD_Tensor* t,
                                              uint32_t mask, int* id) {
  const int d = ud_dtype_id(t->dtype);
  if (d < 0 || !(mask & (1u << d))) {
    char names[128];
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has dtype %s, expected one of %s", op,
                        arg, ud_dtype_name(t->dtype), ud_kit_dtype_mask_names(mask, names,
                                                                              sizeof names));
  }
  if (id) *id = d;
  return NULL;
}

static inline const char* ud_kit_attr_type_name(int type) {
  switch (type) {
    case UD_ATTR_INT: return "int";
    case UD_ATTR_FLOAT: return "float";
    case UD_ATTR_BOOL: return "bool";
    case UD_ATTR_STRING: return "str";
    case UD_ATTR_INTS: return "ints";
    default: return "unknown";
  }
}

/* "x, y" from n names (`attrs` given: their names instead); for error messages only. */
static inline const char* ud_kit_join_names(const char* const* names, const UD_AttrInfo* attrs,
                                            int n, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used + 1 < size; i++) {
    int w = snprintf(buf + used, size - used, "%s%s", i ? ", " : "",
                     attrs ? attrs[i].name : names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

/* The op set's name for input i of a call: "x", or "tensors[2]" inside a variadic input. Only
 * the error paths call this. */
static inline const char* ud_kit_input_name(const UD_OpInfo* o, int32_t num_inputs, int i,
                                            char* buf, size_t n) {
  const int v = o->variadic_input, extra = num_inputs - o->num_inputs;
  if (v < 0 || i < v) return o->input_names[i];
  if (i > v + extra) /* bounded again so that inlining for one op proves the index in range */
    return i - extra < o->num_inputs ? o->input_names[i - extra] : "?";
  snprintf(buf, n, "%s[%d]", o->input_names[v], i - v);
  return buf;
}

/* Checks a call's arguments against op `op`'s signature in ops.h (a UD_OpId): the struct, the
 * input/output/attribute counts and arrays, each attribute's type and name (a NULL name is not
 * checked) in op-set order, string and ints values, every present tensor through
 * ud_kit_check_tensor, and that only optional inputs are absent (ndim -1). Not dtypes, devices
 * or shapes: the kernel checks those. Formats nothing and allocates nothing on success. */
static inline UD_Error* ud_kit_check_signature(int op, const UD_KernelArgs* a) {
  const UD_OpInfo* o = ud_op_info(op);
  if (!o)
    return ud_kit_error(UD_ERR_INTERNAL, "ud_kit_check_signature: op id %d, expected 0..%d", op,
                        UD_OP_COUNT - 1);
  const char* name = o->name;
  if (!a) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: kernel arguments are NULL", name);
  if (a->struct_size < sizeof(UD_KernelArgs))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: UD_KernelArgs.struct_size = %zu, expected >= %zu", name,
                        a->struct_size, sizeof(UD_KernelArgs));
  const int variadic = o->variadic_input >= 0;
  char names[256];
  /* counts name what was expected: "add: 1 inputs, expected 2 (x, y)" */
  if (variadic ? a->num_inputs < o->num_inputs : a->num_inputs != o->num_inputs)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: %d inputs, expected %s%d%s%s%s", name,
                        (int)a->num_inputs, variadic ? "at least " : "", (int)o->num_inputs,
                        o->num_inputs ? " (" : "",
                        ud_kit_join_names(o->input_names, NULL, o->num_inputs, names,
                                          sizeof names), o->num_inputs ? ")" : "");
  const int variadic_out = o->variadic_output >= 0;
  if (variadic_out ? a->num_outputs < o->num_outputs : a->num_outputs != o->num_outputs)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: %d outputs, expected %s%d (%s)", name,
                        (int)a->num_outputs, variadic_out ? "at least " : "",
                        (int)o->num_outputs,
                        ud_kit_join_names(o->output_names, NULL, o->num_outputs, names,
                                          sizeof names));
  if (a->num_attrs != o->num_attrs)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: %d attributes, expected %d%s%s%s", name,
                        (int)a->num_attrs, (int)o->num_attrs, o->num_attrs ? " (" : "",
                        ud_kit_join_names(NULL, o->attrs, o->num_attrs, names, sizeof names),
                        o->num_attrs ? ")" : "");
  if ((a->num_inputs > 0 && !a->inputs) || (a->num_outputs > 0 && !a->outputs) ||
      (a->num_attrs > 0 && !a->attrs))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: NULL %s array, expected %d entries", name,
                        a->num_inputs > 0 && !a->inputs     ? "inputs"
                        : a->num_outputs > 0 && !a->outputs ? "outputs"
                                                            : "attrs",
                        a->num_inputs > 0 && !a->inputs     ? (int)a->num_inputs
                        : a->num_outputs > 0 && !a->outputs ? (int)a->num_outputs
                                                            : (int)a->num_attrs);
  for (int k = 0; k < o->num_attrs; k++) {
    const UD_Attr* at = &a->attrs[k];
    const UD_AttrInfo* want = &o->attrs[k];
    if (at->name && at->name != want->name && strcmp(at->name, want->name) != 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: attribute %d is '%s', expected '%s' (attributes come in op-set "
                          "order)", name, k, at->name, want->name);
    if (at->type != want->type)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: attribute '%s' has type %s, expected %s", name, want->name,
                          ud_kit_attr_type_name(at->type), ud_kit_attr_type_name(want->type));
    if (at->type == UD_ATTR_STRING && !at->value.s)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: attribute '%s' is a NULL string, expected a NUL-terminated string",
                          name, want->name);
    if (at->type == UD_ATTR_INTS && (at->value.ints.len < 0 ||
                                     (at->value.ints.len > 0 && !at->value.ints.data)))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: attribute '%s' has len %lld and %s data, expected len >= 0 and "
                          "data for every value", name, want->name,
                          (long long)at->value.ints.len, at->value.ints.data ? "non-NULL" : "NULL");
  }
  const int extra = a->num_inputs - o->num_inputs;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor* t = &a->inputs[i];
    const int declared = !variadic || i < o->variadic_input ? i
                         : i > o->variadic_input + extra    ? i - extra
                                                            : o->variadic_input;
    if (t->ndim == -1) {
      if (o->optional_inputs & (1u << declared) && declared != o->variadic_input) continue;
      char buf[64];
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: input '%s' is absent (ndim -1), expected a tensor (it is not "
                          "optional)", name, ud_kit_input_name(o, a->num_inputs, i, buf,
                                                               sizeof buf));
    }
    UD_Error* e = ud_kit_check_tensor(name, o->input_names[declared], t);
    if (e && declared == o->variadic_input && variadic) {
      /* name the element, not the variadic input: only now is formatting worth it */
      char buf[64];
      ud_kit_error_destroy(e);
      e = ud_kit_check_tensor(name, ud_kit_input_name(o, a->num_inputs, i, buf, sizeof buf), t);
    }
    if (e) return e;
  }
  for (int i = 0; i < a->num_outputs; i++) {
    const UD_Tensor* t = &a->outputs[i];
    /* a variadic (last) output names all the outputs from it on */
    const char* oname = o->output_names[i < o->num_outputs ? i : o->num_outputs - 1];
    if (t->ndim == -1)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                          "%s: output '%s' is absent (ndim -1), expected a tensor", name, oname);
    UD_KIT_TRY(ud_kit_check_tensor(name, oname, t));
  }
  return NULL;
}

/* ---- strided iteration ----------------------------------------------------------------------
 * Collapse the dims of `n` views that share one shape into as few dims as possible (merging a
 * dim into the next when every view is contiguous across them, dropping size-1 dims). Writes
 * the collapsed shape to `shape` and each view's strides to strides[v]; returns the new ndim
 * (0 means a single element; any 0 extent gives ndim 1 with shape[0] = 0). */
static inline int ud_kit_collapse(int ndim, const int64_t* in_shape, int n,
                                  const int64_t* const* in_strides, int64_t* shape,
                                  int64_t (*strides)[UD_KIT_MAX_DIMS]) {
  int out = 0;
  for (int d = 0; d < ndim; d++) {
    if (in_shape[d] == 0) {
      shape[0] = 0;
      for (int v = 0; v < n; v++) strides[v][0] = 1;
      return 1;
    }
  }
  for (int d = 0; d < ndim; d++) {
    if (in_shape[d] == 1) continue;
    int merge = out > 0;
    for (int v = 0; v < n && merge; v++)
      if (strides[v][out - 1] != in_strides[v][d] * in_shape[d]) merge = 0;
    if (merge) {
      shape[out - 1] *= in_shape[d];
      for (int v = 0; v < n; v++) strides[v][out - 1] = in_strides[v][d];
    } else {
      shape[out] = in_shape[d];
      for (int v = 0; v < n; v++) strides[v][out] = in_strides[v][d];
      out++;
    }
  }
  return out;
}

/* ---- attribute values -----------------------------------------------------------------------
 * A float attribute that becomes a value of `dtype` (fill's and pad_constant's value; add's and
 * sub's alpha with `integral`), refused as the reference refuses it: for an integer dtype the
 * value must be finite and truncate into the dtype's range, and with `integral` be a whole
 * number; float and bool dtypes take any value (C conversion: out of range floats become inf). */
static inline UD_Error* ud_kit_check_scalar(const char* op, const char* attr, double v,
                                            UD_DType dtype, int integral) {
  if (dtype.code != UD_DTYPE_INT && dtype.code != UD_DTYPE_UINT) return NULL;
  const int bits = dtype.bits < 64 ? dtype.bits : 64;
  const double hi = dtype.code == UD_DTYPE_INT ? (double)(1ull << (bits - 1))
                                               : 2.0 * (double)(1ull << (bits - 1));
  const double lo = dtype.code == UD_DTYPE_INT ? -hi : 0.0;
  /* trunc(v) >= lo is v > lo - 1 (for int64, lo - 1 rounds to lo: then v >= lo) */
  const int in_range = v == v && (v >= lo || v > lo - 1.0) && v < hi;
  if (!in_range)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: attribute '%s' = %.17g cannot be converted to %s (expected a finite "
                        "value in [%.17g, %.17g])", op, attr, v, ud_kit_dtype_name(dtype), lo,
                        hi - 1.0);
  if (integral && v != (double)(int64_t)v)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: attribute '%s' = %.17g must be integral for %s inputs", op, attr, v,
                        ud_kit_dtype_name(dtype));
  return NULL;
}

/* An argument error a kit helper met although `op`'s signature check should have caught it: the
 * signature check's own message, or (a kit bug) UD_ERR_INTERNAL naming `who`. */
static inline UD_Error* ud_kit_signature_error_(int op, const UD_KernelArgs* a, const char* who) {
  UD_Error* e = ud_kit_check_signature(op, a);
  return e ? e : ud_kit_error(UD_ERR_INTERNAL, "%s: op %d's call passed its signature check but "
                              "not this one", who, op);
}

/* Every attribute the op set marks scalar (UD_AttrInfo.scalar: fill's and pad_constant's value,
 * add's and sub's alpha) through ud_kit_check_scalar for `dtype`, in op-set order. Cheap on
 * success (a loop over the op's attributes); a call that fails ud_kit_check_signature gets its
 * message. */
static inline UD_Error* ud_kit_check_scalars(int op, const UD_KernelArgs* a, UD_DType dtype) {
  const UD_OpInfo* o = ud_op_info(op);
  if (!o)
    return ud_kit_error(UD_ERR_INTERNAL, "ud_kit_check_scalars: op id %d, expected 0..%d", op,
                        UD_OP_COUNT - 1);
  if (!a || a->num_attrs != o->num_attrs || (o->num_attrs > 0 && !a->attrs))
    return ud_kit_signature_error_(op, a, "ud_kit_check_scalars");
  for (int k = 0; k < o->num_attrs; k++) {
    const UD_AttrInfo* w = &o->attrs[k];
    if (w->scalar == UD_SCALAR_NONE) continue;
    if (a->attrs[k].type != UD_ATTR_FLOAT)
      return ud_kit_signature_error_(op, a, "ud_kit_check_scalars");
    UD_KIT_TRY(ud_kit_check_scalar(o->name, w->name, a->attrs[k].value.f, dtype,
                                   w->scalar == UD_SCALAR_INTEGRAL));
  }
  return NULL;
}

/* "'none', 'mean' or 'sum'" from a string attribute's choices; for error messages only. */
static inline const char* ud_kit_join_choices(const UD_AttrInfo* w, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < w->num_choices && used + 1 < size; i++) {
    int n = snprintf(buf + used, size - used, "%s'%s'",
                     !i ? "" : i == w->num_choices - 1 ? " or " : ", ", w->choices[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
  return buf;
}

/* The index of string attribute `attr` (a UD_ATTR_<OP>_* position) of op `op` among the op
 * set's choices for it, in *index (may be NULL): "gelu: attribute 'approximate' is 'fast',
 * expected 'none' or 'tanh'" otherwise. An attribute the op set gives no choices (any string)
 * yields -1, as does a refused value. `attr` that is not a string attribute of `op`:
 * UD_ERR_INTERNAL (a plugin bug); a call that fails ud_kit_check_signature gets its message.
 * Cheap on success: strcmp over the choices, no formatting. */
static inline UD_Error* ud_kit_check_choice(int op, const UD_KernelArgs* a, int attr,
                                            int* index) {
  const UD_OpInfo* o = ud_op_info(op);
  if (index) *index = -1;
  if (!o)
    return ud_kit_error(UD_ERR_INTERNAL, "ud_kit_check_choice: op id %d, expected 0..%d", op,
                        UD_OP_COUNT - 1);
  if (attr < 0 || attr >= o->num_attrs || o->attrs[attr].type != UD_ATTR_STRING)
    return ud_kit_error(UD_ERR_INTERNAL,
                        "ud_kit_check_choice: %s has no string attribute at position %d", o->name,
                        attr);
  const UD_AttrInfo* w = &o->attrs[attr];
  if (!a || a->num_attrs != o->num_attrs || !a->attrs || a->attrs[attr].type != UD_ATTR_STRING ||
      !a->attrs[attr].value.s)
    return ud_kit_signature_error_(op, a, "ud_kit_check_choice");
  const char* v = a->attrs[attr].value.s;
  if (w->num_choices == 0) return NULL;
  for (int k = 0; k < w->num_choices; k++) {
    if (v == w->choices[k] || strcmp(v, w->choices[k]) == 0) {
      if (index) *index = k;
      return NULL;
    }
  }
  char want[256];
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute '%s' is '%s', expected %s", o->name,
                      w->name, v, ud_kit_join_choices(w, want, sizeof want));
}

/* arange's attributes for an output of n elements of `dtype` (n < 0: length not checked):
 * finite, a non-zero step, n = max(0, ceil((stop - start) / step)), and (integer dtypes) its
 * first and last values start + i * step within the dtype's range. */
static inline UD_Error* ud_kit_check_arange(const char* op, double start, double stop,
                                            double step, int64_t n, UD_DType dtype) {
  if (start - start != 0 || stop - stop != 0 || step - step != 0 || step == 0) /* nan, inf */
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: start=%g, stop=%g, step=%g; expected finite values and a non-zero "
                        "step", op, start, stop, step);
  if (n < 0) return NULL;
  const double len = (stop - start) / step;
  if (len > 0 ? !(len <= (double)n && len > (double)n - 1.0) : n != 0)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                        "%s: start=%g, stop=%g, step=%g give %.17g values, the output has %lld",
                        op, start, stop, step, len > 0 ? len : 0.0, (long long)n);
  if (n == 0) return NULL;
  UD_Error* e = ud_kit_check_scalar(op, "start", start, dtype, 0);
  if (!e) e = ud_kit_check_scalar(op, "start + (n - 1) * step", start + (double)(n - 1) * step,
                                  dtype, 0);
  return e;
}

/* Attribute accessors by position (kernels receive all attributes in op-set order). */
static inline int64_t ud_kit_attr_int(const UD_KernelArgs* a, int i) { return a->attrs[i].value.i; }
static inline double ud_kit_attr_float(const UD_KernelArgs* a, int i) { return a->attrs[i].value.f; }
static inline int ud_kit_attr_bool(const UD_KernelArgs* a, int i) { return a->attrs[i].value.b; }
static inline const char* ud_kit_attr_str(const UD_KernelArgs* a, int i) { return a->attrs[i].value.s; }

#ifdef __cplusplus
}
#endif

/* tier 4: elementwise_program's parser and evaluator, the fused ops' epilogue checks */
#include "program_kit.h"

#endif /* UNIDEV_PLUGIN_KIT_H_ */
