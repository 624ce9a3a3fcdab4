// cast.cpp — dtype conversion; one kernel per input dtype, the output dtype from the attribute.
#include <cstring>

#include "strided.h"

namespace aurora {

namespace {

template <class In, class Out>
VESIMresult cast_to(VESIMkernel_ctx* k, Call& c) {
  return map_tensors<Out>(k, c.out[0], Types<In>{}, c.in, [](In x) { return convert<Out>(x); });
}

template <class In> struct Cast {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "cast");
    if (!ck.signature(1, 1, "dtype:s") || !ck.dtype(ck.in(0), "x", DType<In>::ud) ||
        !ck.same_shape(ck.in(0), "x", ck.out(0), "y"))
      return ck.take();
    bool known;
    UD_DType want = dtype_from_name(a->attrs[0].value.s, &known);
    if (!known)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "cast: attribute 'dtype' = '%s', expected one "
                          "of float32, float64, int32, int64, bool", a->attrs[0].value.s);
    if (!ck.dtype(ck.out(0), "y", want)) return ck.take();
    Body body = want.code == UD_DTYPE_BOOL ? cast_to<In, Bool>
                : want.code == UD_DTYPE_INT ? (want.bits == 32 ? cast_to<In, int32_t>
                                                               : cast_to<In, int64_t>)
                : want.bits == 32 ? cast_to<In, float> : cast_to<In, double>;
    return launch(a, make_call(a, "cast", body));
  }
};

const RegisterTypes<Cast, float, double, int32_t, int64_t, Bool> reg_cast("cast");

}  // namespace

}  // namespace aurora
