/* kernels.c — the tier-0 kernels of 'testdev' (copy, fill, zero, cast, arange) over any strides,
 * and the lookup table. Every kernel validates its whole call before touching memory: the
 * framework adapters call kernels directly, without unidev.ops' Python checks. */
#include <math.h>
#include <string.h>

#include "plugin.h"

/* ---- validation ------------------------------------------------------------------------------
 * The kit checks the call against the op's signature in ops.h (counts, attributes, every
 * descriptor); what only this plugin knows is where memory lives: each tensor must be on the
 * call's device and inside one live allocation. */

static UD_Error* check_placed(const char* op, const char* arg, const UD_Tensor* t,
                              int32_t device) {
  if (t->device.device_id != device)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' is on device %d, the call on %d", op,
                        arg, t->device.device_id, device);
  uint64_t extent = ud_kit_extent(t);
  if (extent == 0) return NULL;
  UD_Error* e = mem_check_range(op, t->handle, extent);
  if (e) {
    ud_kit_error_destroy(e);
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS,
                        "%s: '%s' reaches %llu bytes past its handle, beyond its allocation", op,
                        arg, (unsigned long long)extent);
  }
  return NULL;
}

static UD_Error* check_call(int op, const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_kit_check_signature(op, a));
  UD_KIT_TRY(plugin_check_device(a->device));
  const UD_OpInfo* o = ud_op_info(op);
  char buf[32];
  for (int i = 0; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]))
      UD_KIT_TRY(check_placed(o->name, ud_kit_input_name(o, a->num_inputs, i, buf, sizeof buf),
                              &a->inputs[i], a->device));
  for (int i = 0; i < a->num_outputs; i++)
    UD_KIT_TRY(check_placed(o->name, o->output_names[i], &a->outputs[i], a->device));
  return NULL;
}

/* ---- elements -------------------------------------------------------------------------------
 * Values travel as double (floats) or int64 (ints, bools), like C casts would convert them. */

typedef struct {
  double f;
  int64_t i;
} Value;

static char* at(const UD_Tensor* t, const int64_t* idx) {
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
  return (char*)(uintptr_t)t->handle + t->byte_offset + off * ud_kit_itemsize(t->dtype);
}

static Value load(UD_DType d, const char* p) {
  Value v = {0, 0};
  if (d.code == UD_DTYPE_FLOAT) {
    v.f = d.bits == 32 ? *(const float*)p : *(const double*)p;
    v.i = (isfinite(v.f) && fabs(v.f) < 9.2e18) ? (int64_t)v.f : 0;
  } else {
    v.i = d.code == UD_DTYPE_BOOL ? (*(const uint8_t*)p != 0)
          : d.bits == 32          ? *(const int32_t*)p
                                  : *(const int64_t*)p;
    v.f = (double)v.i;
  }
  return v;
}

static void store(UD_DType d, char* p, Value v, int from_float) {
  if (d.code == UD_DTYPE_FLOAT) {
    if (d.bits == 32) *(float*)p = (float)v.f;
    else *(double*)p = v.f;
  } else if (d.code == UD_DTYPE_BOOL) {
    *(uint8_t*)p = from_float ? v.f != 0.0 : v.i != 0;
  } else if (d.bits == 32) {
    *(int32_t*)p = (int32_t)v.i;
  } else {
    *(int64_t*)p = v.i;
  }
}

/* Next index of an odometer over `shape`; 0 once every index has been visited. */
static int next(int ndim, const int64_t* shape, int64_t* idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    if (++idx[d] < shape[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

/* ---- kernels --------------------------------------------------------------------------------- */

static UD_Error* convert(const char* op, const UD_KernelArgs* a) {
  const UD_Tensor *x = &a->inputs[0], *y = &a->outputs[0];
  if (!ud_kit_same_shape(x, y))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'x' and 'y' have different shapes", op);
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "x", x, PLUGIN_DTYPES, NULL));
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "y", y, PLUGIN_DTYPES, NULL));
  if (ud_kit_numel(y) == 0) return NULL;
  int from_float = x->dtype.code == UD_DTYPE_FLOAT;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y->dtype, at(y, idx), load(x->dtype, at(x, idx)), from_float);
  } while (next(y->ndim, y->shape, idx));
  return NULL;
}

static UD_Error* k_copy(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_COPY, a));
  UD_KIT_TRY(ud_kit_check_dtype("copy", "y", &a->outputs[0], a->inputs[0].dtype));
  return convert("copy", a);
}

static UD_Error* k_cast(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_CAST, a));
  const char* want = a->attrs[UD_ATTR_CAST_DTYPE].value.s;
  UD_DType yd = a->outputs[0].dtype;
  UD_KIT_REQUIRE(strcmp(want, ud_dtype_name(yd)) == 0, UD_ERR_INVALID_ARGUMENT,
                 "cast: attribute dtype '%s' but output 'y' is %s", want, ud_dtype_name(yd));
  return convert("cast", a);
}

static UD_Error* fill_value(const char* op, const UD_KernelArgs* a, double value) {
  const UD_Tensor* y = &a->outputs[0];
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "y", y, PLUGIN_DTYPES, NULL));
  if (ud_kit_numel(y) == 0) return NULL;
  Value v = {value, (isfinite(value) && fabs(value) < 9.2e18) ? (int64_t)value : 0};
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y->dtype, at(y, idx), v, 1);
  } while (next(y->ndim, y->shape, idx));
  return NULL;
}

static UD_Error* k_fill(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_FILL, a));
  const double value = ud_kit_attr_float(a, UD_ATTR_FILL_VALUE);
  /* a value the dtype cannot hold (an int32 fill of nan or 1e20) is refused, not wrapped */
  UD_KIT_TRY(ud_kit_check_scalars(UD_OP_FILL, a, a->outputs[0].dtype));
  return fill_value("fill", a, value);
}

static UD_Error* k_zero(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_ZERO, a));
  return fill_value("zero", a, 0.0);
}

static UD_Error* k_arange(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_ARANGE, a));
  const UD_Tensor* y = &a->outputs[0];
  const double start = ud_kit_attr_float(a, UD_ATTR_ARANGE_START);
  const double stop = ud_kit_attr_float(a, UD_ATTR_ARANGE_STOP);
  const double step = ud_kit_attr_float(a, UD_ATTR_ARANGE_STEP);
  const char* dtype = ud_kit_attr_str(a, UD_ATTR_ARANGE_DTYPE);
  UD_KIT_REQUIRE(y->ndim == 1, UD_ERR_INVALID_ARGUMENT, "arange: output has %d dims, expected 1",
                 (int)y->ndim);
  UD_KIT_TRY(ud_kit_check_dtype_in("arange", "y", y, PLUGIN_DTYPES & UD_DTM_NUMERIC, NULL));
  int64_t n = y->shape[0];
  /* finite values, a length that matches the output, first and last values in the dtype */
  UD_KIT_TRY(ud_kit_check_arange("arange", start, stop, step, n, y->dtype));
  UD_KIT_REQUIRE(strcmp(dtype, ud_dtype_name(y->dtype)) == 0, UD_ERR_INVALID_ARGUMENT,
                 "arange: attribute dtype '%s' but output is %s", dtype, ud_dtype_name(y->dtype));
  for (int64_t i = 0; i < n; i++) {
    double v = start + (double)i * step;
    Value val = {v, (int64_t)v};
    store(y->dtype, at(y, &i), val, 1);
  }
  return NULL;
}

/* ---- lookup ----------------------------------------------------------------------------------
 * By op id; an op's dtypes are the op set's (ops.h) within PLUGIN_DTYPES. Register new kernels
 * here. */

static const UD_KernelFn kKernels[UD_OP_COUNT] = {
    [UD_OP_COPY] = k_copy, [UD_OP_CAST] = k_cast,     [UD_OP_FILL] = k_fill,
    [UD_OP_ZERO] = k_zero, [UD_OP_ARANGE] = k_arange,
};

UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
  if (!out) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: kernel pointer is NULL");
  *out = NULL;
  if (!op) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: op is NULL");
  const int id = ud_op_id(op), dt = ud_dtype_id(dtype);
  if (id < 0 || dt < 0 || !(ud_op_info(id)->dtypes & PLUGIN_DTYPES & (1u << dt))) return NULL;
  *out = kKernels[id];
  return NULL;
}
