/* kernels.c — the tier-0 kernels of '{{name}}' (copy, fill, zero, cast, arange) over any strides,
 * and the lookup table. Every kernel validates its whole call before touching memory: the
 * framework adapters call kernels directly, without unidev.ops' Python checks. */
#include <math.h>
#include <string.h>

#include "plugin.h"

/* ---- validation ------------------------------------------------------------------------------ */

static UD_Error* check_tensor(const char* op, const char* arg, const UD_Tensor* t, int32_t device) {
  UD_Error* e = ud_kit_check_tensor(op, arg, t);
  if (e) return e;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] != 0 && n > (INT64_MAX / 16) / t->shape[i])
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has too many elements", op, arg);
    n *= t->shape[i];
  }
  if (t->device.device_id != device)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: '%s' is on device %d, the call on %d", op,
                        arg, t->device.device_id, device);
  uint64_t extent = ud_kit_extent(t);
  if (extent == 0) return NULL;
  e = mem_check_range(op, t->handle, extent);
  if (e) {
    ud_kit_error_destroy(e);
    return ud_kit_error(UD_ERR_OUT_OF_BOUNDS,
                        "%s: '%s' reaches %llu bytes past its handle, beyond its allocation", op,
                        arg, (unsigned long long)extent);
  }
  return NULL;
}

static UD_Error* check_call(const char* op, const UD_KernelArgs* a, int nin, int nout,
                            int nattrs) {
  if (!a || a->struct_size < sizeof(UD_KernelArgs))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: UD_KernelArgs missing or too small", op);
  UD_Error* e = plugin_check_device(a->device);
  if (e) return e;
  if (a->num_inputs != nin || a->num_outputs != nout)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: %d inputs and %d outputs, expected %d and %d",
                        op, a->num_inputs, a->num_outputs, nin, nout);
  if (a->num_attrs < nattrs || (nattrs && !a->attrs))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: %d attributes, expected %d", op,
                        a->num_attrs, nattrs);
  for (int i = 0; i < nin; i++)
    if ((e = check_tensor(op, "input", &a->inputs[i], a->device))) return e;
  for (int i = 0; i < nout; i++)
    if ((e = check_tensor(op, "output", &a->outputs[i], a->device))) return e;
  return NULL;
}

static UD_Error* check_attr(const char* op, const UD_KernelArgs* a, int i, UD_AttrType type) {
  if (a->attrs[i].type != type)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute %d ('%s') has type %d, expected %d",
                        op, i, a->attrs[i].name ? a->attrs[i].name : "?", a->attrs[i].type, type);
  return NULL;
}

static int known(UD_DType d) {
  return d.lanes == 1 && ((d.code == UD_DTYPE_FLOAT && (d.bits == 32 || d.bits == 64)) ||
                          (d.code == UD_DTYPE_INT && (d.bits == 32 || d.bits == 64)) ||
                          (d.code == UD_DTYPE_BOOL && d.bits == 8));
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
  if (ud_kit_numel(y) == 0) return NULL;
  int from_float = x->dtype.code == UD_DTYPE_FLOAT;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y->dtype, at(y, idx), load(x->dtype, at(x, idx)), from_float);
  } while (next(y->ndim, y->shape, idx));
  return NULL;
}

static UD_Error* k_copy(const UD_KernelArgs* a) {
  UD_Error* e = check_call("copy", a, 1, 1, 0);
  if (e) return e;
  if ((e = ud_kit_check_dtype("copy", "y", &a->outputs[0], a->inputs[0].dtype))) return e;
  return convert("copy", a);
}

static UD_Error* k_cast(const UD_KernelArgs* a) {
  UD_Error* e = check_call("cast", a, 1, 1, 1);
  if (e || (e = check_attr("cast", a, 0, UD_ATTR_STRING))) return e;
  const char* want = a->attrs[0].value.s;
  UD_DType yd = a->outputs[0].dtype;
  if (!want || !known(yd) || strcmp(want, ud_kit_dtype_name(yd)) != 0)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cast: attribute dtype '%s' but output 'y' is %s",
                        want ? want : "(null)", ud_kit_dtype_name(yd));
  if (!known(a->inputs[0].dtype))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cast: input dtype %s is not supported",
                        ud_kit_dtype_name(a->inputs[0].dtype));
  return convert("cast", a);
}

static UD_Error* fill_value(const char* op, const UD_KernelArgs* a, double value) {
  const UD_Tensor* y = &a->outputs[0];
  if (!known(y->dtype))
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: output dtype %s is not supported", op,
                        ud_kit_dtype_name(y->dtype));
  if (ud_kit_numel(y) == 0) return NULL;
  Value v = {value, (isfinite(value) && fabs(value) < 9.2e18) ? (int64_t)value : 0};
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    store(y->dtype, at(y, idx), v, 1);
  } while (next(y->ndim, y->shape, idx));
  return NULL;
}

static UD_Error* k_fill(const UD_KernelArgs* a) {
  UD_Error* e = check_call("fill", a, 0, 1, 1);
  if (e || (e = check_attr("fill", a, 0, UD_ATTR_FLOAT))) return e;
  /* a value the dtype cannot hold (an int32 fill of nan or 1e20) is refused, not wrapped */
  e = ud_kit_check_scalar("fill", "value", a->attrs[0].value.f, a->outputs[0].dtype, 0);
  return e ? e : fill_value("fill", a, a->attrs[0].value.f);
}

static UD_Error* k_zero(const UD_KernelArgs* a) {
  UD_Error* e = check_call("zero", a, 0, 1, 0);
  return e ? e : fill_value("zero", a, 0.0);
}

static UD_Error* k_arange(const UD_KernelArgs* a) {
  UD_Error* e = check_call("arange", a, 0, 1, 4);
  for (int i = 0; !e && i < 3; i++) e = check_attr("arange", a, i, UD_ATTR_FLOAT);
  if (e || (e = check_attr("arange", a, 3, UD_ATTR_STRING))) return e;
  const UD_Tensor* y = &a->outputs[0];
  double start = a->attrs[0].value.f, stop = a->attrs[1].value.f, step = a->attrs[2].value.f;
  if (y->ndim != 1)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "arange: output has %d dims, expected 1",
                        (int)y->ndim);
  int64_t n = y->shape[0];
  /* finite values, a length that matches the output, first and last values in the dtype */
  if ((e = ud_kit_check_arange("arange", start, stop, step, n, y->dtype))) return e;
  if (strcmp(a->attrs[3].value.s ? a->attrs[3].value.s : "", ud_kit_dtype_name(y->dtype)) != 0)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "arange: attribute dtype '%s' but output is %s",
                        a->attrs[3].value.s, ud_kit_dtype_name(y->dtype));
  for (int64_t i = 0; i < n; i++) {
    double v = start + (double)i * step;
    Value val = {v, (int64_t)v};
    store(y->dtype, at(y, &i), val, 1);
  }
  return NULL;
}

/* ---- lookup ---------------------------------------------------------------------------------- */

typedef struct {
  const char* op;
  UD_KernelFn fn;
  int numeric_only; /* 1: no bool kernel (the op set's NUMERIC dtypes) */
} Entry;

static const Entry kKernels[] = {
    {"copy", k_copy, 0}, {"cast", k_cast, 0},     {"fill", k_fill, 0},
    {"zero", k_zero, 0}, {"arange", k_arange, 1},
};

UD_Error* kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
  if (!out) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: kernel pointer is NULL");
  *out = NULL;
  if (!op) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_lookup: op is NULL");
  if (!known(dtype)) return NULL;
  for (size_t i = 0; i < sizeof kKernels / sizeof kKernels[0]; i++) {
    if (strcmp(kKernels[i].op, op) != 0) continue;
    if (kKernels[i].numeric_only && dtype.code == UD_DTYPE_BOOL) return NULL;
    *out = kKernels[i].fn;
    return NULL;
  }
  return NULL;
}
