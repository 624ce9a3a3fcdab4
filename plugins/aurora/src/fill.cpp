// fill.cpp — ops without inputs: fill, zero, arange (kernels found by the output's dtype).
#include "strided.h"

namespace aurora {

namespace {

template <class T>
VESIMresult fill_body(VESIMkernel_ctx* k, Call& c) {
  T v = c.id == UD_OP_ZERO ? T(0) : convert<T>(c.attrs[UD_ATTR_FILL_VALUE].f);
  return map_views<T>(k, c.out[c.id == UD_OP_ZERO ? UD_OUT_ZERO_Y : UD_OUT_FILL_Y], nullptr, [v]() { return v; });
}

template <class T, bool kZero> struct Fill {
  static constexpr int op = kZero ? UD_OP_ZERO : UD_OP_FILL;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, op);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.scalars(ud_of<T>())) return ck.take();
    return launch(a, make_call(a, op, fill_body<T>));
  }
};
template <class T> using FillK = Fill<T, false>;
template <class T> using ZeroK = Fill<T, true>;

template <class T> struct Arange {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_ARANGE);
    const UD_Tensor& y = ck.out(UD_OUT_ARANGE_Y);
    if (!ck.signature() || !ck.ndim(y, "y", 1, 1)) return ck.take();
    const char* dtype = ud_kit_attr_str(a, UD_ATTR_ARANGE_DTYPE);
    UD_KIT_REQUIRE(ud_dtype_from_name(dtype) == DType<T>::id, UD_ERR_INVALID_ARGUMENT,
                   "arange: attribute 'dtype' = '%s', expected '%s' (the output's dtype)", dtype,
                   ud_dtype_id_name(DType<T>::id));
    double start = ud_kit_attr_float(a, UD_ATTR_ARANGE_START), stop = ud_kit_attr_float(a, UD_ATTR_ARANGE_STOP),
           step = ud_kit_attr_float(a, UD_ATTR_ARANGE_STEP);
    UD_KIT_TRY(ud_kit_check_arange("arange", start, stop, step, -1, ud_of<T>()));
    int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
    if (!ck.dim(y, "y", 0, n)) return ck.take();
    UD_KIT_TRY(ud_kit_check_arange("arange", start, stop, step, n, ud_of<T>()));
    return launch(a, make_call(a, UD_OP_ARANGE, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    double start = c.attrs[UD_ATTR_ARANGE_START].f, step = c.attrs[UD_ATTR_ARANGE_STEP].f;
    Tensor& y = c.out[UD_OUT_ARANGE_Y];
    T* p = y.ptr<T>();
    int64_t s = y.strides[0];
    return parallel(k, y.shape[0], kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; i++) p[i * s] = convert<T>(start + double(i) * step);
    });
  }
};

const RegisterTypes<FillK, float, double, int32_t, int64_t, Bool> reg_fill(UD_OP_FILL);
const RegisterTypes<ZeroK, float, double, int32_t, int64_t, Bool> reg_zero(UD_OP_ZERO);
const RegisterTypes<Arange, float, double, int32_t, int64_t> reg_arange(UD_OP_ARANGE);

}  // namespace

}  // namespace aurora
