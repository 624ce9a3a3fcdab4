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
    Check ck(a, UD_OP_CAST);
    const UD_Tensor &x = ck.in(UD_IN_CAST_X), &y = ck.out(UD_OUT_CAST_Y);
    if (!ck.signature() || !ck.dtype(x, "x", ud_of<In>()) || !ck.same_shape(x, "x", y, "y"))
      return ck.take();
    const char* name = ud_kit_attr_str(a, UD_ATTR_CAST_DTYPE);
    const int want = ud_dtype_from_name(name);
    Body body = want == DType<float>::id ? cast_to<In, float> : want == DType<double>::id ? cast_to<In, double>
                : want == DType<int32_t>::id ? cast_to<In, int32_t> : want == DType<int64_t>::id ? cast_to<In, int64_t>
                : want == DType<Bool>::id ? cast_to<In, Bool> : nullptr;
    char names[128];  // formatted only on the error path
    UD_KIT_REQUIRE(body, UD_ERR_INVALID_ARGUMENT, "cast: attribute 'dtype' = '%s', expected one of %s", name,
                   ud_kit_dtype_mask_names(UD_DTM_ALL, names, sizeof names));
    if (!ck.dtype(y, "y", ud_dtype_of(want))) return ck.take();
    return launch(a, make_call(a, UD_OP_CAST, body));
  }
};

const RegisterTypes<Cast, float, double, int32_t, int64_t, Bool> reg_cast(UD_OP_CAST);

}  // namespace

}  // namespace aurora
