// elementwise.cpp — unary, binary and ternary elementwise ops and their backward forms.
//
// Each op is a small functor; the EW template stamps one kernel per (op, dtype): host-side
// checks (dtypes, every input broadcast to the output's shape, attributes), then a strided map
// on the device.
#include <cstring>

#include "strided.h"

namespace aurora {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <class T> inline bool isnan_(T x) { return x != x; }  // false for integers
// |x| that clears the sign of -0 (x < 0 ? -x : x keeps it)
template <class T> inline T abs_(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
  else return x < T(0) ? T(-x) : x;
}

// What an op may read from its attributes: a float (alpha, value, weight, threshold) or the
// gelu approximation, always attribute 0 in the op set.
struct Params {
  double p = 0;
  bool tanh_ = false;
  explicit Params(const Call& c) {
    if (!c.attrs.empty() && c.attrs[0].type == UD_ATTR_FLOAT) p = c.attrs[0].f;
    if (!c.attrs.empty() && c.attrs[0].type == UD_ATTR_STRING) tanh_ = c.attrs[0].s == "tanh";
  }
};

bool no_check(Check&) { return true; }

bool check_approx(Check& ck) {
  const char* s = ck.args()->attrs[0].value.s;
  if (!strcmp(s, "none") || !strcmp(s, "tanh")) return true;
  return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'approximate' = '%s', expected 'none' or "
                 "'tanh'", s);
}

// gelu and its derivative, in double: float32 cancels in the tails
inline double gelu(double x, bool tanh_) {
  if (tanh_) return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / kSqrt2));
}

inline double gelu_grad(double x, bool tanh_) {
  if (!tanh_) return 0.5 * (1 + std::erf(x / kSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
  double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
}

// One functor per op: NAME<T> maps (ARGS...) to OUT; ATTRS is its attribute signature and
// CHECK validates attribute values on the host.
#define OP(NAME, OPNAME, ATTRS, CHECK, OUT, ARGS, PARAMS, EXPR)      \
  template <class T> struct NAME : Params {                          \
    using Out = OUT;                                                 \
    using Args = ARGS;                                               \
    static constexpr const char* name = OPNAME;                      \
    static constexpr const char* attrs = ATTRS;                      \
    static bool check(Check& ck) { return CHECK(ck); }               \
    using Params::Params;                                            \
    OUT operator() PARAMS const { return EXPR; }                     \
  };
#define UNARY(NAME, OPNAME, EXPR) OP(NAME, OPNAME, "", no_check, T, Types<T>, (T x), EXPR)
#define BINARY(NAME, OPNAME, OUT, EXPR) \
  OP(NAME, OPNAME, "", no_check, OUT, Types<T COMMA T>, (T x, T y), EXPR)
#define COMMA ,

UNARY(Copy, "copy", x)
UNARY(Neg, "neg", T(-x))
UNARY(Abs, "abs", abs_(x))
UNARY(Exp, "exp", std::exp(x))
UNARY(Log, "log", std::log(x))
UNARY(Sqrt, "sqrt", std::sqrt(x))
UNARY(Rsqrt, "rsqrt", T(1) / std::sqrt(x))
UNARY(Reciprocal, "reciprocal", T(1) / x)
UNARY(Sin, "sin", std::sin(x))
UNARY(Cos, "cos", std::cos(x))
UNARY(Tanh, "tanh", std::tanh(x))
UNARY(Sigmoid, "sigmoid", T(1) / (T(1) + std::exp(-x)))
UNARY(Relu, "relu", x < T(0) ? T(0) : x)
UNARY(Erf, "erf", std::erf(x))
UNARY(Floor, "floor", std::floor(x))
UNARY(Ceil, "ceil", std::ceil(x))
UNARY(Round, "round", std::nearbyint(x))
UNARY(Sign, "sign", T((x > T(0)) - (x < T(0))))  // nan compares false both ways: 0
UNARY(Square, "square", T(x * x))
OP(Gelu, "gelu", "approximate:s", check_approx, T, Types<T>, (T x), T(gelu(x, tanh_)))
OP(LogicalNot, "logical_not", "", no_check, Bool, Types<T>, (T x), x == T(0))

BINARY(Mul, "mul", T, T(x * y))
BINARY(Div, "div", T, x / y)
BINARY(Pow, "pow", T, std::pow(x, y))
BINARY(Maximum, "maximum", T, isnan_(x) ? x : isnan_(y) ? y : x > y ? x : y)
BINARY(Minimum, "minimum", T, isnan_(x) ? x : isnan_(y) ? y : x < y ? x : y)
BINARY(Eq, "eq", Bool, x == y)
BINARY(Ne, "ne", Bool, x != y)
BINARY(Lt, "lt", Bool, x < y)
BINARY(Le, "le", Bool, x <= y)
BINARY(Gt, "gt", Bool, x > y)
BINARY(Ge, "ge", Bool, x >= y)
BINARY(LogicalAnd, "logical_and", Bool, x != T(0) && y != T(0))
BINARY(LogicalOr, "logical_or", Bool, x != T(0) || y != T(0))
BINARY(SigmoidBackward, "sigmoid_backward", T, x * y * (T(1) - y))
BINARY(TanhBackward, "tanh_backward", T, x * (T(1) - y * y))

// alpha must be a value of T: integral for integer T (the reference refuses 0.5 and nan)
template <class T> bool check_alpha(Check& ck) {
  UD_Error* e = ud_kit_check_scalar(ck.op(), "alpha", ck.args()->attrs[0].value.f, DType<T>::ud, 1);
  if (!e) return true;
  ck.fail(ud_kit_error_code(e), "%s", ud_kit_error_message(e) + strlen(ck.op()) + 2);
  ud_kit_error_destroy(e);
  return false;
}

#define SCALED2(NAME, OPNAME, ATTR, EXPR, CHECK) \
  OP(NAME, OPNAME, ATTR ":f", CHECK, T, Types<T COMMA T>, (T x, T y), EXPR)
#define SCALED3(NAME, OPNAME, EXPR) \
  OP(NAME, OPNAME, "value:f", no_check, T, Types<T COMMA T COMMA T>, (T x, T a, T b), EXPR)

SCALED2(Add, "add", "alpha", T(x + convert<T>(p) * y), check_alpha<T>)
SCALED2(Sub, "sub", "alpha", T(x - convert<T>(p) * y), check_alpha<T>)
SCALED2(Lerp, "lerp", "weight", x + T(p) * (y - x), no_check)
// zero where x <= threshold: a nan x or threshold compares false and passes grad
SCALED2(ThresholdBackward, "threshold_backward", "threshold", double(y) <= p ? T(0) : x, no_check)
SCALED3(Addcmul, "addcmul", x + T(p) * a * b)
SCALED3(Addcdiv, "addcdiv", x + T(p) * a / b)
OP(GeluBackward, "gelu_backward", "approximate:s", check_approx, T, Types<T COMMA T>, (T g, T x),
   T(double(g) * gelu_grad(x, tanh_)))
OP(Where, "where", "", no_check, T, Types<T COMMA T COMMA Bool>, (T x, T y, Bool cond),
   cond ? x : y)

template <class... Ins> constexpr int count(Types<Ins...>) { return int(sizeof...(Ins)); }

template <class... Ins>
bool check_input_dtypes(Check& ck, Types<Ins...>) {
  const UD_DType want[] = {DType<Ins>::ud...};
  for (int i = 0; i < int(sizeof...(Ins)); i++) {
    if (!ck.dtype(ck.in(i), tensor_name(true, i), want[i]) ||
        !ck.same_shape(ck.in(i), tensor_name(true, i), ck.out(0), "output"))
      return false;
  }
  return true;
}

template <template <class> class Op, class T>
struct EW {
  using O = Op<T>;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, O::name);
    if (!ck.signature(count(typename O::Args{}), 1, O::attrs)) return ck.take();
    if (!check_input_dtypes(ck, typename O::Args{})) return ck.take();
    if (!ck.dtype(ck.out(0), "output", DType<typename O::Out>::ud) || !O::check(ck))
      return ck.take();
    return launch(a, make_call(a, O::name, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    O op(c);
    return map_tensors<typename O::Out>(k, c.out[0], typename O::Args{}, c.in, op);
  }
};

// Registers EW<Op, T> for every op in Ops and every type in Ts.
template <class... Ts> struct On {
  template <template <class> class Op> struct K {
    template <class T> using Kernel = EW<Op, T>;
  };
  template <template <class> class... Ops> static bool add() {
    (RegisterTypes<K<Ops>::template Kernel, Ts...>(Ops<float>::name), ...);
    return true;
  }
};

#define NUMERIC float, double, int32_t, int64_t
const bool reg_floats = On<float, double>::add<
    Exp, Log, Sqrt, Rsqrt, Reciprocal, Sin, Cos, Tanh, Sigmoid, Gelu, Erf, Floor, Ceil, Round, Div,
    Pow, Addcmul, Addcdiv, Lerp, SigmoidBackward, TanhBackward, GeluBackward>();
const bool reg_numeric = On<NUMERIC>::add<Neg, Abs, Relu, Sign, Square, Add, Sub, Maximum, Minimum,
                                          Lt, Le, Gt, Ge, ThresholdBackward>();
const bool reg_all = On<NUMERIC, Bool>::add<Copy, LogicalNot, Mul, Eq, Ne, LogicalAnd, LogicalOr,
                                            Where>();

}  // namespace

}  // namespace aurora
