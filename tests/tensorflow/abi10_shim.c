/* abi10_shim.c — a unidev ABI 1.0 plugin made from another plugin (UD_SHIM_TARGET, built on
 * plugin_kit.h's errors as the bundled plugins are): its table cut to UD_API_SIZE_1_0 (no
 * mem_device, abi_minor 0), and float32 neg/add failing with error code n for an input of
 * shape [n], 1 <= n <= 8, so every code reaches TF through a real kernel call. */
#include <dlfcn.h>
#include <string.h>

#include <unidev/plugin_kit.h>

static UD_Api table;
static const UD_Api* real;
static UD_KernelFn real_neg, real_add;

static UD_Error* fault(const char* op, UD_KernelFn fn, const UD_KernelArgs* a) {
  const UD_Tensor* x = a && a->num_inputs > 0 ? &a->inputs[0] : NULL;
  if (x && x->ndim == 1 && x->shape[0] >= 1 && x->shape[0] <= 8)
    return ud_kit_error((UD_ErrorCode)x->shape[0], "%s: 'x' has shape [%lld], the test's fault "
                        "for error code %lld", op, (long long)x->shape[0],
                        (long long)x->shape[0]);
  return fn(a);
}
static UD_Error* neg(const UD_KernelArgs* a) { return fault("neg", real_neg, a); }
static UD_Error* add(const UD_KernelArgs* a) { return fault("add", real_add, a); }

static UD_Error* lookup(const char* op, UD_DType dt, UD_KernelFn* fn) {
  UD_Error* e = real->kernel_lookup(op, dt, fn);
  int f32 = dt.code == UD_DTYPE_FLOAT && dt.bits == 32 && dt.lanes == 1;
  if (e || !f32) return e;
  if (strcmp(op, "neg") == 0) real_neg = *fn, *fn = neg;
  if (strcmp(op, "add") == 0) real_add = *fn, *fn = add;
  return NULL;
}

UD_EXPORT const UD_Api* unidev_get_api(void) {
  void* dl = dlopen(UD_SHIM_TARGET, RTLD_NOW | RTLD_LOCAL);
  void* sym = dl ? dlsym(dl, UD_ENTRY_POINT) : NULL;
  if (!sym) return NULL;
  const UD_Api* (*get)(void);
  memcpy(&get, &sym, sizeof get);
  if (!(real = get())) return NULL;
  memcpy(&table, real, UD_API_SIZE_1_0);
  table.struct_size = UD_API_SIZE_1_0;
  table.abi_minor = 0;
  table.error_code = ud_kit_error_code;
  table.error_message = ud_kit_error_message;
  table.error_destroy = ud_kit_error_destroy;
  table.kernel_lookup = lookup;
  return &table;
}
