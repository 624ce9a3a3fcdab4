// fill.cpp — ops without inputs: fill, zero, arange (kernels found by the output's dtype).
#include "strided.h"

namespace aurora {

namespace {

template <class T>
VESIMresult fill_body(VESIMkernel_ctx* k, Call& c) {
  T v = c.attrs.empty() ? T(0) : convert<T>(c.attrs[0].f);
  return map_views<T>(k, c.out[0], nullptr, [v]() { return v; });
}

template <class T, bool kZero> struct Fill {
  static constexpr const char* name = kZero ? "zero" : "fill";
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, name);
    if (!ck.signature(0, 1, kZero ? "" : "value:f") || !ck.dtypes(DType<T>::ud)) return ck.take();
    if (!kZero)
      if (UD_Error* e = ud_kit_check_scalar(name, "value", a->attrs[0].value.f, DType<T>::ud, 0))
        return e;
    return launch(a, make_call(a, name, fill_body<T>));
  }
};
template <class T> using FillK = Fill<T, false>;
template <class T> using ZeroK = Fill<T, true>;

template <class T> struct Arange {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "arange");
    if (!ck.signature(0, 1, "start:f,stop:f,step:f,dtype:s") || !ck.ndim(ck.out(0), "y", 1, 1))
      return ck.take();
    bool known;
    UD_DType want = dtype_from_name(a->attrs[3].value.s, &known);
    if (!known || !ud_kit_dtype_eq(want, DType<T>::ud))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "arange: attribute 'dtype' = '%s', expected "
                          "'%s' (the output's dtype)", a->attrs[3].value.s,
                          ud_kit_dtype_name(DType<T>::ud));
    double start = a->attrs[0].value.f, stop = a->attrs[1].value.f, step = a->attrs[2].value.f;
    if (UD_Error* e = ud_kit_check_arange("arange", start, stop, step, -1, DType<T>::ud)) return e;
    int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
    if (!ck.dim(ck.out(0), "y", 0, n)) return ck.take();
    if (UD_Error* e = ud_kit_check_arange("arange", start, stop, step, n, DType<T>::ud)) return e;
    return launch(a, make_call(a, "arange", body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    double start = c.attrs[0].f, step = c.attrs[2].f;
    Tensor& y = c.out[0];
    T* p = y.ptr<T>();
    int64_t s = y.strides[0];
    return parallel(k, y.shape[0], kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; i++) p[i * s] = convert<T>(start + double(i) * step);
    });
  }
};

const RegisterTypes<FillK, float, double, int32_t, int64_t, Bool> reg_fill("fill");
const RegisterTypes<ZeroK, float, double, int32_t, int64_t, Bool> reg_zero("zero");
const RegisterTypes<Arange, float, double, int32_t, int64_t> reg_arange("arange");

}  // namespace

}  // namespace aurora
