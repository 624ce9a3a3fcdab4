/* registry.c — kernel lookup over the per-file kernel tables and the per-call argument checks,
 * both driven by the op set's tables in ops.h. */
#include "x86.h"

static const UD_X86Kernel* const g_tables[] = {
    ud_x86_elementwise_kernels, ud_x86_memory_kernels, ud_x86_reduce_kernels,
    ud_x86_softmax_kernels,     ud_x86_pool_kernels,   ud_x86_nn_kernels,
    ud_x86_matmul_kernels,      ud_x86_conv_kernels, /* src/dense */
    ud_x86_optim_kernels,       ud_x86_program_kernels,
};

UD_Error* ud_x86_kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* kernel) {
  UD_KIT_REQUIRE(op && kernel, UD_ERR_INVALID_ARGUMENT, "kernel_lookup: 'op' or 'kernel' is NULL");
  *kernel = NULL;
  const int id = ud_op_id(op), dt = ud_dtype_id(dtype);
  for (size_t t = 0; id >= 0 && dt >= 0 && t < sizeof g_tables / sizeof g_tables[0]; t++)
    for (const UD_X86Kernel* k = g_tables[t]; k->fn; k++)
      if (k->op == id && (k->dtypes >> dt & 1)) *kernel = k->fn;
  return NULL;
}

/* ---- argument checks ---- */
UD_Error* ud_x86_check_args(int op, const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_kit_check_signature(op, a));
  const UD_OpInfo* info = ud_op_info(op);
  UD_KIT_TRY(ud_x86_check_device(info->name, a->device));
  const int i = ud_x86_first_outside(a);
  if (i < 0) return NULL;
  char buf[64]; /* name it (tensors[k] inside a variadic input) and say why */
  const int in = i < a->num_inputs, k = in ? i : i - a->num_inputs;
  const UD_Tensor* t = in ? &a->inputs[k] : &a->outputs[k];
  const char* name = in ? ud_kit_input_name(info, a->num_inputs, k, buf, sizeof buf)
                        : info->output_names[k];
  UD_KIT_TRY(ud_x86_check_range(info->name, name, t->handle, ud_kit_extent(t)));
  return ud_kit_error(UD_ERR_INTERNAL, "%s: '%s' changed allocation while checked (freed by "
                      "another thread?)", info->name, name);
}

const char* ud_x86_arg_name(int op, const UD_KernelArgs* a, const UD_Tensor* t) {
  const UD_OpInfo* info = ud_op_info(op);
  const int out = t >= a->outputs && t < a->outputs + a->num_outputs;
  return out ? info->output_names[t - a->outputs] : info->input_names[t - a->inputs];
}

UD_Error* ud_x86_axis(const char* op, int64_t axis, int ndim, int* out) {
  int64_t n = ndim ? ndim : 1; /* a 0-d tensor accepts axis 0 / -1 like numpy's softmax */
  UD_KIT_REQUIRE(axis >= -n && axis < n, UD_ERR_INVALID_ARGUMENT,
                 "%s: axis %lld is out of range for %d dims", op, (long long)axis, ndim);
  *out = (int)(axis < 0 ? axis + n : axis);
  return NULL;
}
