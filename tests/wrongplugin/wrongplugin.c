/* wrongplugin.c — the C test plugin with deliberately wrong kernels, to prove that the
 * conformance suite catches them (tests only; never install it).
 *
 * It reuses tests/testplugin/testplugin.c as is and wraps its table: kernel_lookup hands out
 *   copy  — ignores the input's strides (wrong on transposed and strided views),
 *   mul   — reads every broadcast (stride-0) input at its first element only,
 *   add   — ignores `alpha` (wrong for any alpha != 1),
 *   zero  — never validates its output and writes through it (a crash on a bad handle),
 * and the test plugin's kernels for everything else. */
#define unidev_get_api testplugin_inner_get_api
#include "../testplugin/testplugin.c"
#undef unidev_get_api

static UD_Error* wrong_copy(const UD_KernelArgs* a) {
  if (a->num_inputs != 1 || a->num_outputs != 1) return k_copy(a);
  UD_Tensor x = a->inputs[0];
  int64_t contiguous[UD_KIT_MAX_DIMS];
  int64_t acc = 1;
  for (int d = x.ndim - 1; d >= 0 && d < UD_KIT_MAX_DIMS; d--) {
    contiguous[d] = acc;
    acc *= x.shape[d] > 0 ? x.shape[d] : 1;
  }
  x.strides = contiguous; /* the bug: treat any view as contiguous */
  UD_KernelArgs b = *a;
  b.inputs = &x;
  return k_copy(&b);
}

static UD_Error* wrong_mul(const UD_KernelArgs* a) {
  if (a->num_inputs != 2) return k_mul(a);
  UD_Tensor in[2] = {a->inputs[0], a->inputs[1]};
  static const int64_t zeros[UD_KIT_MAX_DIMS] = {0};
  for (int i = 0; i < 2; i++) {
    int broadcast = 0;
    for (int d = 0; d < in[i].ndim; d++) broadcast |= in[i].strides[d] == 0 && in[i].shape[d] > 1;
    if (broadcast) in[i].strides = zeros; /* the bug: a broadcast input collapses to element 0 */
  }
  UD_KernelArgs b = *a;
  b.inputs = in;
  return k_mul(&b);
}

static UD_Error* wrong_add(const UD_KernelArgs* a) {
  if (a->num_attrs < 1) return k_add(a);
  UD_Attr attr = a->attrs[0];
  attr.value.f = 1.0; /* the bug: alpha is ignored */
  UD_KernelArgs b = *a;
  b.attrs = &attr;
  return k_add(&b);
}

static UD_Error* wrong_zero(const UD_KernelArgs* a) {
  const UD_Tensor* y = &a->outputs[0]; /* the bug: no validation at all */
  memset((char*)(uintptr_t)y->handle + y->byte_offset, 0,
         (size_t)ud_kit_numel(y) * (size_t)ud_kit_itemsize(y->dtype));
  return NULL;
}

static UD_Error* wrong_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
  UD_Error* e = kernel_lookup(op, dtype, out);
  if (e || !*out) return e;
  if (!strcmp(op, "copy")) *out = wrong_copy;
  else if (!strcmp(op, "mul")) *out = wrong_mul;
  else if (!strcmp(op, "add")) *out = wrong_add;
  else if (!strcmp(op, "zero")) *out = wrong_zero;
  return NULL;
}

static UD_Api g_wrong;

UD_EXPORT const UD_Api* unidev_get_api(void) {
  g_wrong = *testplugin_inner_get_api();
  g_wrong.plugin_name = "wrongdev";
  g_wrong.kernel_lookup = wrong_lookup;
  return &g_wrong;
}
