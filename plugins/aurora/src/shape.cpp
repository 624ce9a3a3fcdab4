// shape.cpp — concat and pad_constant: strided copies into slices of the output.
#include "strided.h"

namespace aurora {

namespace {

// The part of `out` starting at `start` along each dim, with the extents of `shape`.
Tensor slice_of(const Tensor& out, const int64_t* start, const int64_t* shape) {
  Tensor v = out;
  for (int d = 0; d < out.ndim; d++) {
    v.shape[d] = shape[d];
    if (shape[d] > 0 && out.data) v.data += start[d] * out.strides[d] * out.itemsize();
  }
  return v;
}

template <class T> struct Concat {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_CONCAT);
    if (!ck.signature() || !ck.dtypes(ud_of<T>())) return ck.take();
    const UD_Tensor& first = ck.in(UD_IN_CONCAT_TENSORS);
    int64_t nd = first.ndim, axis = ud_kit_attr_int(a, UD_ATTR_CONCAT_AXIS);
    if (nd < 1)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "concat: 'tensors[0]' is 0-d, expected ndim >= 1");
    if (axis < -nd || axis >= nd)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "concat: attribute 'axis' = %lld, expected in "
                          "[%lld, %lld)", (long long)axis, (long long)-nd, (long long)nd);
    axis = (axis + nd) % nd;
    int64_t total = 0;
    for (int i = 0; i < a->num_inputs; i++) {
      const UD_Tensor& t = ck.in(i);
      char name[32];
      snprintf(name, sizeof name, "tensors[%d]", i);
      if (!ck.ndim(t, name, int(nd), int(nd))) return ck.take();
      for (int d = 0; d < nd; d++)
        if (d != axis && !ck.dim(t, name, d, first.shape[d])) return ck.take();
      total += t.shape[axis];
    }
    const UD_Tensor& out = ck.out(UD_OUT_CONCAT_OUT);
    if (!ck.ndim(out, "out", int(nd), int(nd)) || !ck.dim(out, "out", int(axis), total))
      return ck.take();
    for (int d = 0; d < nd; d++)
      if (d != axis && !ck.dim(out, "out", d, first.shape[d])) return ck.take();
    return launch(a, make_call(a, UD_OP_CONCAT, body, pack(int64_t(axis))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    int64_t axis = c.iparams[0], start[kMaxDims] = {};
    for (Tensor& t : c.in) {  // every input is one of the variadic tensors
      Tensor dst = slice_of(c.out[UD_OUT_CONCAT_OUT], start, t.shape);
      Tensor* src[1] = {&t};
      if (VESIMresult r = map_views<T, T>(k, dst, src, [](T v) { return v; })) return r;
      start[axis] += t.shape[axis];
    }
    return VESIM_SUCCESS;
  }
};

template <class T> struct PadConstant {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_PAD_CONSTANT);
    if (!ck.signature() || !ck.dtypes(ud_of<T>())) return ck.take();
    const UD_Tensor &x = ck.in(UD_IN_PAD_CONSTANT_X), &y = ck.out(UD_OUT_PAD_CONSTANT_Y);
    const UD_Attr& pads = a->attrs[UD_ATTR_PAD_CONSTANT_PADS];
    if (pads.value.ints.len != 2 * x.ndim)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "pad_constant: attribute 'pads' has %lld values, "
                          "expected %d (before, after per dim)", (long long)pads.value.ints.len,
                          2 * x.ndim);
    if (!ck.ndim(y, "y", x.ndim, x.ndim)) return ck.take();
    for (int d = 0; d < x.ndim; d++) {
      int64_t b = pads.value.ints.data[2 * d], e = pads.value.ints.data[2 * d + 1];
      if (b < 0 || e < 0)
        return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "pad_constant: attribute 'pads' has a negative "
                            "value for dim %d", d);
      if (!ck.dim(y, "y", d, x.shape[d] + b + e)) return ck.take();
    }
    if (!ck.scalars(x.dtype)) return ck.take();
    return launch(a, make_call(a, UD_OP_PAD_CONSTANT, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    T v = convert<T>(c.attrs[UD_ATTR_PAD_CONSTANT_VALUE].f);
    Tensor &y = c.out[UD_OUT_PAD_CONSTANT_Y], &x = c.in[UD_IN_PAD_CONSTANT_X];
    if (VESIMresult r = map_views<T>(k, y, nullptr, [v]() { return v; })) return r;
    int64_t start[kMaxDims] = {};
    for (int d = 0; d < y.ndim; d++) start[d] = c.attrs[UD_ATTR_PAD_CONSTANT_PADS].ints[size_t(2 * d)];
    Tensor dst = slice_of(y, start, x.shape);
    Tensor* src[1] = {&x};
    return map_views<T, T>(k, dst, src, [](T x) { return x; });
  }
};

#define ALL float, double, int32_t, int64_t, Bool
const RegisterTypes<Concat, ALL> reg_concat(UD_OP_CONCAT);
const RegisterTypes<PadConstant, ALL> reg_pad(UD_OP_PAD_CONSTANT);

}  // namespace

}  // namespace aurora
