/* memory.c — tier 0 and shape ops: copy, fill, zero, cast, arange, concat, pad_constant. */
#include <math.h>

#include "memory_ispc.h"
#include "x86.h"

#define UD_CAST_ROW(F)                                                                     \
  {[UD_DT_FLOAT32] = ud_cast_##F##_f32, [UD_DT_FLOAT64] = ud_cast_##F##_f64,               \
   [UD_DT_INT32] = ud_cast_##F##_i32, [UD_DT_INT64] = ud_cast_##F##_i64,                   \
   [UD_DT_BOOL] = ud_cast_##F##_b8}
static const ud_x86_tile_fn g_cast[UD_DT_COUNT][UD_DT_COUNT] = {
    [UD_DT_FLOAT32] = UD_CAST_ROW(f32), [UD_DT_FLOAT64] = UD_CAST_ROW(f64),
    [UD_DT_INT32] = UD_CAST_ROW(i32),   [UD_DT_INT64] = UD_CAST_ROW(i64),
    [UD_DT_BOOL] = UD_CAST_ROW(b8)};
static void (*const g_arange[UD_DT_COUNT])(int64_t, void*, int64_t, double, double) = {
    [UD_DT_FLOAT32] = ud_arange_f32, [UD_DT_FLOAT64] = ud_arange_f64,
    [UD_DT_INT32] = ud_arange_i32, [UD_DT_INT64] = ud_arange_i64};

/* value cast to dst's dtype, then copied into dst from a broadcast (stride 0) view of it */
void ud_x86_fill_view(const UD_Tensor* dst, double value) {
  uint64_t one;
  g_cast[UD_DT_FLOAT64][ud_dtype_id(dst->dtype)](1, &one, &value, NULL, NULL,
                                                 (const double[3]){0, 0, 0});
  const int64_t zeros[UD_KIT_MAX_DIMS] = {0};
  const UD_Tensor src = {(UD_Handle)(uintptr_t)&one, dst->device, dst->ndim, dst->dtype,
                         dst->shape, zeros, 0};
  const UD_Tensor* views[2] = {dst, &src};
  ud_x86_map(NULL, 2, views, NULL);
}

/* fill (its value) and zero */
static UD_Error* fill(int op, const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_x86_check_args(op, a));
  const UD_Tensor* y = &a->outputs[UD_OUT_FILL_Y];
  UD_KIT_TRY(ud_kit_check_dtype_in(ud_op_info(op)->name, "y", y, UD_X86_ALL, NULL));
  UD_KIT_TRY(ud_kit_check_scalars(op, a, y->dtype));
  ud_x86_fill_view(y, op == UD_OP_FILL ? a->attrs[UD_ATTR_FILL_VALUE].value.f : 0.0);
  return NULL;
}

static UD_Error* k_fill(const UD_KernelArgs* a) { return fill(UD_OP_FILL, a); }
static UD_Error* k_zero(const UD_KernelArgs* a) { return fill(UD_OP_ZERO, a); }
UD_X86_SAME_POS(UD_OUT_FILL_Y, UD_OUT_ZERO_Y);

/* cast, and copy as a cast to the input's own dtype (same dtypes move bytes, no conversion) */
static UD_Error* convert(int op, const UD_KernelArgs* a) {
  const char* name = ud_op_info(op)->name;
  int from = 0, to;
  UD_KIT_TRY(ud_x86_check_args(op, a));
  const UD_Tensor *x = &a->inputs[UD_IN_CAST_X], *y = &a->outputs[UD_OUT_CAST_Y];
  UD_KIT_TRY(ud_kit_check_dtype_in(name, "x", x, UD_X86_ALL, &from));
  const char* want = op == UD_OP_CAST ? a->attrs[UD_ATTR_CAST_DTYPE].value.s : NULL;
  to = want ? ud_dtype_from_name(want) : from;
  UD_KIT_REQUIRE(to >= 0 && (UD_X86_ALL >> to & 1), UD_ERR_INVALID_ARGUMENT,
                 "%s: attribute 'dtype' is '%s', expected float32, float64, int32, int64 or bool",
                 name, want);
  UD_KIT_TRY(ud_kit_check_dtype(name, "y", y, ud_dtype_of(to)));
  UD_KIT_TRY(ud_kit_check_same_shape(name, "x", x, y));
  const UD_Tensor* views[2] = {y, x};
  /* a large copy goes through the cast to its own dtype, whose tile function streams */
  const int big = ud_kit_numel(y) * (int64_t)ud_kit_itemsize(y->dtype) >= UD_X86_STREAM_BYTES;
  ud_x86_map(from == to && !big ? NULL : g_cast[from][to], 2, views, NULL);
  return NULL;
}

static UD_Error* k_copy(const UD_KernelArgs* a) { return convert(UD_OP_COPY, a); }
static UD_Error* k_cast(const UD_KernelArgs* a) { return convert(UD_OP_CAST, a); }
UD_X86_SAME_POS(UD_IN_COPY_X, UD_IN_CAST_X);
UD_X86_SAME_POS(UD_OUT_COPY_Y, UD_OUT_CAST_Y);

static UD_Error* k_arange(const UD_KernelArgs* a) {
  int dt = 0;
  UD_KIT_TRY(ud_x86_check_args(UD_OP_ARANGE, a));
  const UD_Tensor* y = &a->outputs[UD_OUT_ARANGE_Y];
  UD_KIT_TRY(ud_kit_check_dtype_in("arange", "y", y, UD_X86_NUMERIC, &dt));
  const double start = a->attrs[UD_ATTR_ARANGE_START].value.f;
  const double stop = a->attrs[UD_ATTR_ARANGE_STOP].value.f;
  const double step = a->attrs[UD_ATTR_ARANGE_STEP].value.f;
  const char* dtype = a->attrs[UD_ATTR_ARANGE_DTYPE].value.s;
  UD_KIT_TRY(ud_kit_check_arange("arange", start, stop, step, -1, y->dtype));
  UD_KIT_REQUIRE(ud_dtype_from_name(dtype) == dt, UD_ERR_INVALID_ARGUMENT,
                 "arange: output dtype %s differs from 'dtype' %s", ud_dtype_name(y->dtype),
                 dtype);
  const double len = ceil((stop - start) / step);
  const int64_t n = len > 0 ? (int64_t)len : 0;
  UD_KIT_REQUIRE(y->ndim == 1 && y->shape[0] == n, UD_ERR_INVALID_ARGUMENT,
                 "arange: output must be 1-d of length %lld", (long long)n);
  UD_KIT_TRY(ud_kit_check_arange("arange", start, stop, step, n, y->dtype));
  g_arange[dt](n, ud_x86_ptr(y), y->strides[0], start, step);
  return NULL;
}

static UD_Error* k_concat(const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_x86_check_args(UD_OP_CONCAT, a));
  const UD_Tensor* out = &a->outputs[UD_OUT_CONCAT_OUT];
  const UD_Tensor* in = &a->inputs[UD_IN_CONCAT_TENSORS]; /* variadic: all of them, >= 1 */
  const int n = a->num_inputs;
  int axis;
  UD_KIT_REQUIRE(out->ndim > 0, UD_ERR_INVALID_ARGUMENT,
                 "concat: 0-d tensors cannot be concatenated");
  UD_KIT_TRY(ud_x86_axis("concat", a->attrs[UD_ATTR_CONCAT_AXIS].value.i, out->ndim, &axis));
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const UD_Tensor* t = &in[i];
    UD_KIT_TRY(ud_kit_check_dtype_in("concat", "tensors", t, UD_X86_ALL, NULL));
    UD_KIT_TRY(ud_kit_check_dtype("concat", "tensors", t, out->dtype));
    int ok = t->ndim == out->ndim;
    for (int k = 0; ok && k < t->ndim; k++) ok = k == axis || t->shape[k] == out->shape[k];
    UD_KIT_REQUIRE(ok, UD_ERR_INVALID_ARGUMENT,
                   "concat: tensors[%d] does not match the output's shape outside axis %d", i,
                   axis);
    total += t->shape[axis];
  }
  UD_KIT_REQUIRE(total == out->shape[axis], UD_ERR_INVALID_ARGUMENT,
                 "concat: output has %lld along axis %d, the inputs sum to %lld",
                 (long long)out->shape[axis], axis, (long long)total);
  UD_Tensor dst = *out; /* the part of out that input i fills */
  const int64_t step = out->strides[axis] * ud_kit_itemsize(out->dtype); /* bytes per index */
  for (int i = 0; i < n; i++) {
    const UD_Tensor* views[2] = {&dst, &in[i]};
    dst.shape = in[i].shape;
    if (dst.shape[axis]) ud_x86_map(NULL, 2, views, NULL);
    dst.byte_offset += (uint64_t)(dst.shape[axis] * step);
  }
  return NULL;
}

static UD_Error* k_pad_constant(const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_x86_check_args(UD_OP_PAD_CONSTANT, a));
  const UD_Tensor *x = &a->inputs[UD_IN_PAD_CONSTANT_X], *y = &a->outputs[UD_OUT_PAD_CONSTANT_Y];
  UD_KIT_TRY(ud_kit_check_dtype_in("pad_constant", "x", x, UD_X86_ALL, NULL));
  UD_KIT_TRY(ud_kit_check_dtype("pad_constant", "y", y, x->dtype));
  const UD_Attr* at = &a->attrs[UD_ATTR_PAD_CONSTANT_PADS];
  const int64_t* pads = at->value.ints.data;
  UD_KIT_REQUIRE(at->value.ints.len == 2 * (int64_t)x->ndim && y->ndim == x->ndim,
                 UD_ERR_INVALID_ARGUMENT,
                 "pad_constant: 'pads' has %lld values, expected 2 * ndim = %d",
                 (long long)at->value.ints.len, 2 * x->ndim);
  uint64_t offset = y->byte_offset;
  for (int k = 0; k < x->ndim; k++) {
    const int64_t lo = pads[2 * k], hi = pads[2 * k + 1];
    UD_KIT_REQUIRE(lo >= 0 && hi >= 0 && y->shape[k] == x->shape[k] + lo + hi,
                   UD_ERR_INVALID_ARGUMENT,
                   "pad_constant: dim %d: pads (%lld, %lld) must be >= 0 and give the output's "
                   "extent %lld", k, (long long)lo, (long long)hi, (long long)y->shape[k]);
    offset += (uint64_t)(lo * y->strides[k] * ud_kit_itemsize(y->dtype));
  }
  UD_KIT_TRY(ud_kit_check_scalars(UD_OP_PAD_CONSTANT, a, x->dtype));
  ud_x86_fill_view(y, a->attrs[UD_ATTR_PAD_CONSTANT_VALUE].value.f);
  UD_Tensor inner = *y;
  inner.shape = x->shape;
  inner.byte_offset = offset;
  const UD_Tensor* views[2] = {&inner, x};
  ud_x86_map(NULL, 2, views, NULL);
  return NULL;
}

const UD_X86Kernel ud_x86_memory_kernels[] = {
    {UD_OP_COPY, UD_X86_ALL, k_copy},
    {UD_OP_FILL, UD_X86_ALL, k_fill},
    {UD_OP_ZERO, UD_X86_ALL, k_zero},
    {UD_OP_CAST, UD_X86_ALL, k_cast},
    {UD_OP_ARANGE, UD_X86_NUMERIC, k_arange},
    {UD_OP_CONCAT, UD_X86_ALL, k_concat},
    {UD_OP_PAD_CONSTANT, UD_X86_ALL, k_pad_constant},
    {0, 0, NULL},
};
