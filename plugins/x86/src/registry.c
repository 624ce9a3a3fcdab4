/* registry.c — kernel lookup over the per-file kernel tables, dtype indices, argument checks. */
#include <string.h>

#include "x86.h"

static const UD_X86Kernel* const g_tables[] = {
    ud_x86_elementwise_kernels, ud_x86_memory_kernels, ud_x86_reduce_kernels,
    ud_x86_softmax_kernels,     ud_x86_pool_kernels,   ud_x86_nn_kernels,
    ud_x86_matmul_kernels,      ud_x86_conv_kernels, /* src/dense */
};

UD_Error* ud_x86_kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* kernel) {
  UD_REQUIRE(op && kernel, "kernel_lookup: 'op' or 'kernel' is NULL");
  *kernel = NULL;
  const int dt = ud_x86_dt(dtype);
  for (size_t t = 0; dt >= 0 && t < sizeof g_tables / sizeof g_tables[0]; t++)
    for (const UD_X86Kernel* k = g_tables[t]; k->op; k++)
      if (strcmp(k->op, op) == 0 && (k->dtypes >> dt & 1)) *kernel = k->fn;
  return NULL;
}

/* ---- dtypes ---- */
static const struct {
  const char* name;
  uint8_t code, bits;
} g_dtypes[UD_NDT] = {
    {"float32", UD_DTYPE_FLOAT, 32}, {"float64", UD_DTYPE_FLOAT, 64}, {"int32", UD_DTYPE_INT, 32},
    {"int64", UD_DTYPE_INT, 64},     {"bool", UD_DTYPE_BOOL, 8},
};

int ud_x86_dt(UD_DType d) {
  for (int i = 0; i < UD_NDT; i++)
    if (d.code == g_dtypes[i].code && d.bits == g_dtypes[i].bits && d.lanes == 1) return i;
  return -1;
}

UD_DType ud_x86_dtype(int dt) { return ud_kit_dtype(g_dtypes[dt].code, g_dtypes[dt].bits); }

int ud_x86_dt_from_name(const char* name) {
  for (int i = 0; name && i < UD_NDT; i++)
    if (strcmp(name, g_dtypes[i].name) == 0) return i;
  return -1;
}

/* ---- argument checks ---- */
static const UD_AttrType g_attr_types[128] = {['i'] = UD_ATTR_INT, ['f'] = UD_ATTR_FLOAT,
                                              ['b'] = UD_ATTR_BOOL, ['s'] = UD_ATTR_STRING,
                                              ['n'] = UD_ATTR_INTS};
static const char* const g_attr_names[] = {"int", "float", "bool", "str", "ints"};

/* Argument names for messages, as constants: building "input 3" on every call cost ~15 % of a
 * tiny op. Past the table (only concat gets there) a message names the kind alone. */
static const char* const g_arg_names[2][10] = {
    {"input 0", "input 1", "input 2", "input 3", "input 4", "input 5", "input 6", "input 7",
     "input 8", "input 9"},
    {"output 0", "output 1", "output 2", "output 3"}};

UD_Error* ud_x86_check_args(const char* op, const UD_KernelArgs* a, int nin, int nout,
                            const char* attrs) {
  UD_REQUIRE(a && a->struct_size >= sizeof(UD_KernelArgs), "%s: kernel args are NULL or too short",
             op);
  UD_REQUIRE((nin < 0 || a->num_inputs == nin) && a->num_inputs >= 0 && a->num_outputs == nout &&
                 (!a->num_inputs || a->inputs) && (!nout || a->outputs),
             "%s: got %d inputs and %d outputs, expected %d and %d", op, a->num_inputs,
             a->num_outputs, nin, nout);
  UD_TRY(ud_x86_check_device(op, a->device));
  const int na = (int)strlen(attrs);
  UD_REQUIRE(a->num_attrs == na && (!na || a->attrs), "%s: got %d attributes, expected %d", op,
             a->num_attrs, na);
  for (int i = 0; i < na; i++) {
    const UD_Attr* at = &a->attrs[i];
    UD_REQUIRE(at->type == g_attr_types[(int)attrs[i]], "%s: attribute %d ('%s') is not of type %s",
               op, i, at->name ? at->name : "?", g_attr_names[g_attr_types[(int)attrs[i]]]);
    UD_REQUIRE(at->type == UD_ATTR_STRING ? at->value.s != NULL
               : at->type != UD_ATTR_INTS || (at->value.ints.len >= 0 &&
                                             (!at->value.ints.len || at->value.ints.data)),
               "%s: attribute '%s' has no value", op, at->name ? at->name : "?");
  }
  for (int i = 0; i < a->num_inputs + nout; i++) {
    const int in = i < a->num_inputs;
    const UD_Tensor* t = in ? &a->inputs[i] : &a->outputs[i - a->num_inputs];
    if (in && t->ndim == -1) continue; /* an absent optional input */
    const int k = in ? i : i - a->num_inputs;
    const char* name = k < 10 && g_arg_names[!in][k] ? g_arg_names[!in][k]
                       : in                            ? "input"
                                                       : "output";
    UD_TRY(ud_kit_check_tensor(op, name, t));
    UD_TRY(ud_x86_check_range(op, name, t->handle, ud_kit_extent(t)));
  }
  return NULL;
}

UD_Error* ud_x86_check_dt(const char* op, const char* arg, const UD_Tensor* t, unsigned set,
                          int* dt) {
  int d = ud_x86_dt(t->dtype);
  if (d < 0 || !(set & (1u << d))) {
    char want[64] = "";
    for (int i = 0; i < UD_NDT; i++)
      if (set >> i & 1) strcat(strcat(want, want[0] ? "/" : ""), g_dtypes[i].name);
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has dtype %s, expected %s", op, arg,
                        ud_kit_dtype_name(t->dtype), want);
  }
  if (dt) *dt = d;
  return NULL;
}

UD_Error* ud_x86_axis(const char* op, int64_t axis, int ndim, int* out) {
  int64_t n = ndim ? ndim : 1; /* a 0-d tensor accepts axis 0 / -1 like numpy's softmax */
  UD_REQUIRE(axis >= -n && axis < n, "%s: axis %lld is out of range for %d dims", op,
             (long long)axis, ndim);
  *out = (int)(axis < 0 ? axis + n : axis);
  return NULL;
}
