/* memory.c — tier 0 and shape ops: copy, fill, zero, cast, arange, concat, pad_constant. */
#include <math.h>

#include "memory_ispc.h"
#include "x86.h"

#define UD_CAST_ROW(F) \
  {ud_cast_##F##_f32, ud_cast_##F##_f64, ud_cast_##F##_i32, ud_cast_##F##_i64, ud_cast_##F##_b8}
static const ud_x86_tile_fn g_cast[UD_NDT][UD_NDT] = {
    UD_CAST_ROW(f32), UD_CAST_ROW(f64), UD_CAST_ROW(i32), UD_CAST_ROW(i64), UD_CAST_ROW(b8)};
static void (*const g_arange[UD_NDT])(int64_t, void*, int64_t, double, double) = {
    ud_arange_f32, ud_arange_f64, ud_arange_i32, ud_arange_i64, ud_arange_b8};

/* value cast to dst's dtype, then copied into dst from a broadcast (stride 0) view of it */
void ud_x86_fill_view(const UD_Tensor* dst, double value) {
  uint64_t one;
  g_cast[UD_F64][ud_x86_dt(dst->dtype)](1, &one, &value, NULL, NULL, (const double[3]){0, 0, 0});
  const int64_t zeros[UD_KIT_MAX_DIMS] = {0};
  const UD_Tensor src = {(UD_Handle)(uintptr_t)&one, dst->device, dst->ndim, dst->dtype,
                         dst->shape, zeros, 0};
  const UD_Tensor* views[2] = {dst, &src};
  ud_x86_map(NULL, 2, views, NULL);
}

static UD_Error* fill(const char* op, const UD_KernelArgs* a, const char* attrs) {
  UD_TRY(ud_x86_check_args(op, a, 0, 1, attrs));
  UD_TRY(ud_x86_check_dt(op, "y", &a->outputs[0], UD_ALL_SET, NULL));
  if (attrs[0])
    UD_TRY(ud_kit_check_scalar(op, "value", a->attrs[0].value.f, a->outputs[0].dtype, 0));
  ud_x86_fill_view(&a->outputs[0], attrs[0] ? a->attrs[0].value.f : 0.0);
  return NULL;
}

static UD_Error* k_fill(const UD_KernelArgs* a) { return fill("fill", a, "f"); }
static UD_Error* k_zero(const UD_KernelArgs* a) { return fill("zero", a, ""); }

/* cast, and copy as a cast to the input's own dtype (same dtypes move bytes, no conversion) */
static UD_Error* convert(const char* op, const UD_KernelArgs* a, const char* attrs) {
  int from, to;
  UD_TRY(ud_x86_check_args(op, a, 1, 1, attrs));
  UD_TRY(ud_x86_check_dt(op, "x", &a->inputs[0], UD_ALL_SET, &from));
  to = attrs[0] ? ud_x86_dt_from_name(a->attrs[0].value.s) : from;
  UD_REQUIRE(to >= 0, "%s: attribute 'dtype' is '%s', expected float32, float64, int32, int64 "
             "or bool", op, a->attrs[0].value.s);
  UD_TRY(ud_kit_check_dtype(op, "y", &a->outputs[0], ud_x86_dtype(to)));
  UD_TRY(ud_kit_check_same_shape(op, "x", &a->inputs[0], &a->outputs[0]));
  const UD_Tensor* views[2] = {&a->outputs[0], &a->inputs[0]};
  /* a large copy goes through the cast to its own dtype, whose tile function streams */
  const UD_Tensor* y = &a->outputs[0];
  const int big = ud_kit_numel(y) * (int64_t)ud_kit_itemsize(y->dtype) >= UD_X86_STREAM_BYTES;
  ud_x86_map(from == to && !big ? NULL : g_cast[from][to], 2, views, NULL);
  return NULL;
}

static UD_Error* k_copy(const UD_KernelArgs* a) { return convert("copy", a, ""); }
static UD_Error* k_cast(const UD_KernelArgs* a) { return convert("cast", a, "s"); }

static UD_Error* k_arange(const UD_KernelArgs* a) {
  int dt;
  UD_TRY(ud_x86_check_args("arange", a, 0, 1, "fffs"));
  UD_TRY(ud_x86_check_dt("arange", "y", &a->outputs[0], UD_NUMERIC_SET, &dt));
  const double start = a->attrs[0].value.f, stop = a->attrs[1].value.f, step = a->attrs[2].value.f;
  UD_TRY(ud_kit_check_arange("arange", start, stop, step, -1, a->outputs[0].dtype));
  UD_REQUIRE(ud_x86_dt_from_name(a->attrs[3].value.s) == dt,
             "arange: output dtype %s differs from 'dtype' %s",
             ud_kit_dtype_name(a->outputs[0].dtype), a->attrs[3].value.s);
  const double len = ceil((stop - start) / step);
  const int64_t n = len > 0 ? (int64_t)len : 0;
  const UD_Tensor* y = &a->outputs[0];
  UD_REQUIRE(y->ndim == 1 && y->shape[0] == n, "arange: output must be 1-d of length %lld",
             (long long)n);
  UD_TRY(ud_kit_check_arange("arange", start, stop, step, n, y->dtype));
  g_arange[dt](n, ud_x86_ptr(y), y->strides[0], start, step);
  return NULL;
}

static UD_Error* k_concat(const UD_KernelArgs* a) {
  UD_TRY(ud_x86_check_args("concat", a, -1, 1, "i"));
  const UD_Tensor* out = &a->outputs[0];
  int axis;
  UD_REQUIRE(a->num_inputs >= 1, "concat: 'tensors' is empty, expected >= 1");
  UD_REQUIRE(out->ndim > 0, "concat: 0-d tensors cannot be concatenated");
  UD_TRY(ud_x86_axis("concat", a->attrs[0].value.i, out->ndim, &axis));
  int64_t total = 0;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor* t = &a->inputs[i];
    UD_TRY(ud_x86_check_dt("concat", "tensors", t, UD_ALL_SET, NULL));
    UD_TRY(ud_kit_check_dtype("concat", "tensors", t, out->dtype));
    int ok = t->ndim == out->ndim;
    for (int k = 0; ok && k < t->ndim; k++) ok = k == axis || t->shape[k] == out->shape[k];
    UD_REQUIRE(ok, "concat: tensors[%d] does not match the output's shape outside axis %d", i,
               axis);
    total += t->shape[axis];
  }
  UD_REQUIRE(total == out->shape[axis],
             "concat: output has %lld along axis %d, the inputs sum to %lld",
             (long long)out->shape[axis], axis, (long long)total);
  UD_Tensor dst = *out; /* the part of out that input i fills */
  const int64_t step = out->strides[axis] * ud_kit_itemsize(out->dtype); /* bytes per index */
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor* views[2] = {&dst, &a->inputs[i]};
    dst.shape = a->inputs[i].shape;
    if (dst.shape[axis]) ud_x86_map(NULL, 2, views, NULL);
    dst.byte_offset += (uint64_t)(dst.shape[axis] * step);
  }
  return NULL;
}

static UD_Error* k_pad_constant(const UD_KernelArgs* a) {
  UD_TRY(ud_x86_check_args("pad_constant", a, 1, 1, "nf"));
  const UD_Tensor *x = &a->inputs[0], *y = &a->outputs[0];
  UD_TRY(ud_x86_check_dt("pad_constant", "x", x, UD_ALL_SET, NULL));
  UD_TRY(ud_kit_check_dtype("pad_constant", "y", y, x->dtype));
  const int64_t* pads = a->attrs[0].value.ints.data;
  UD_REQUIRE(a->attrs[0].value.ints.len == 2 * (int64_t)x->ndim && y->ndim == x->ndim,
             "pad_constant: 'pads' has %lld values, expected 2 * ndim = %d",
             (long long)a->attrs[0].value.ints.len, 2 * x->ndim);
  uint64_t offset = y->byte_offset;
  for (int k = 0; k < x->ndim; k++) {
    UD_REQUIRE(pads[2 * k] >= 0 && pads[2 * k + 1] >= 0 &&
                   y->shape[k] == x->shape[k] + pads[2 * k] + pads[2 * k + 1],
               "pad_constant: dim %d: pads (%lld, %lld) must be >= 0 and give the output's "
               "extent %lld", k, (long long)pads[2 * k], (long long)pads[2 * k + 1],
               (long long)y->shape[k]);
    offset += (uint64_t)(pads[2 * k] * y->strides[k] * ud_kit_itemsize(y->dtype));
  }
  UD_TRY(ud_kit_check_scalar("pad_constant", "value", a->attrs[1].value.f, x->dtype, 0));
  ud_x86_fill_view(y, a->attrs[1].value.f);
  UD_Tensor inner = *y;
  inner.shape = x->shape;
  inner.byte_offset = offset;
  const UD_Tensor* views[2] = {&inner, x};
  ud_x86_map(NULL, 2, views, NULL);
  return NULL;
}

const UD_X86Kernel ud_x86_memory_kernels[] = {
    {"copy", UD_ALL_SET, k_copy},
    {"fill", UD_ALL_SET, k_fill},
    {"zero", UD_ALL_SET, k_zero},
    {"cast", UD_ALL_SET, k_cast},
    {"arange", UD_NUMERIC_SET, k_arange},
    {"concat", UD_ALL_SET, k_concat},
    {"pad_constant", UD_ALL_SET, k_pad_constant},
    {NULL, 0, NULL},
};
