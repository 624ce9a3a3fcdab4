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

// |x| that clears the sign of -0 (x < 0 ? -x : x keeps it)
template <class T> inline T abs_(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
  else return x < T(0) ? T(-x) : x;
}

// What an op may read from its attributes (from position `attr`, -1 for none): a float (alpha,
// value, weight, threshold) or the gelu approximation; q: the next ones (softplus, elu), bools
// as 0 or 1.
struct Params {
  double p = 0, q[3] = {0, 0, 0};
  bool tanh_ = false;
  Params(const Call& c, int attr) {
    if (attr >= 0 && c.attrs[attr].type == UD_ATTR_FLOAT) p = c.attrs[attr].f;
    if (attr >= 0 && c.attrs[attr].type == UD_ATTR_STRING) tanh_ = c.attrs[attr].s == "tanh";
    for (int i = 0; attr >= 0 && i < 3 && attr + 1 + i < int(c.attrs.size()); i++) {
      const Attr& a = c.attrs[attr + 1 + i];
      q[i] = a.type == UD_ATTR_FLOAT ? a.f : double(a.i);
    }
  }
};

bool no_check(Check&, int) { return true; }
bool check_approx(Check& ck, int attr) { return ck.choice(attr); }

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

// One functor per op: NAME<T> maps (ARGS...) to OUT for op UD_OP_<ID>; ATTR is the position of
// the attribute it reads (-1: none) and CHECK validates that attribute's value on the host.
#define OP(NAME, ID, ATTR, CHECK, OUT, ARGS, PARAMS, EXPR)           \
  template <class T> struct NAME : Params {                          \
    using Out = OUT;                                                 \
    using Args = ARGS;                                               \
    static constexpr int op = UD_OP_##ID, attr = ATTR;               \
    static bool check(Check& ck) { return CHECK(ck, attr); }         \
    explicit NAME(const Call& c) : Params(c, attr) {}                \
    OUT operator() PARAMS const { return EXPR; }                     \
  };
#define UNARY(NAME, ID, EXPR) OP(NAME, ID, -1, no_check, T, Types<T>, (T x), EXPR)
#define BINARY(NAME, ID, OUT, EXPR) \
  OP(NAME, ID, -1, no_check, OUT, Types<T COMMA T>, (T x, T y), EXPR)
#define COMMA ,

UNARY(Copy, COPY, x)
UNARY(Neg, NEG, T(-x))
UNARY(Abs, ABS, abs_(x))
UNARY(Exp, EXP, std::exp(x))
UNARY(Log, LOG, std::log(x))
UNARY(Sqrt, SQRT, std::sqrt(x))
UNARY(Rsqrt, RSQRT, T(1) / std::sqrt(x))
UNARY(Reciprocal, RECIPROCAL, T(1) / x)
UNARY(Sin, SIN, std::sin(x))
UNARY(Cos, COS, std::cos(x))
UNARY(Tanh, TANH, std::tanh(x))
UNARY(Sigmoid, SIGMOID, T(1) / (T(1) + std::exp(-x)))
UNARY(Relu, RELU, x < T(0) ? T(0) : x)
UNARY(Erf, ERF, std::erf(x))
UNARY(Floor, FLOOR, std::floor(x))
UNARY(Ceil, CEIL, std::ceil(x))
UNARY(Round, ROUND, std::nearbyint(x))
UNARY(Sign, SIGN, T((x > T(0)) - (x < T(0))))  // nan compares false both ways: 0
UNARY(Square, SQUARE, T(x * x))
OP(Gelu, GELU, UD_ATTR_GELU_APPROXIMATE, check_approx, T, Types<T>, (T x), T(gelu(x, tanh_)))
OP(LogicalNot, LOGICAL_NOT, -1, no_check, Bool, Types<T>, (T x), x == T(0))

BINARY(Mul, MUL, T, T(x * y))
BINARY(Div, DIV, T, x / y)
BINARY(Pow, POW, T, std::pow(x, y))
BINARY(Maximum, MAXIMUM, T, isnan_(x) ? x : isnan_(y) ? y : x > y ? x : y)
BINARY(Minimum, MINIMUM, T, isnan_(x) ? x : isnan_(y) ? y : x < y ? x : y)
BINARY(Eq, EQ, Bool, x == y)
BINARY(Ne, NE, Bool, x != y)
BINARY(Lt, LT, Bool, x < y)
BINARY(Le, LE, Bool, x <= y)
BINARY(Gt, GT, Bool, x > y)
BINARY(Ge, GE, Bool, x >= y)
BINARY(LogicalAnd, LOGICAL_AND, Bool, x != T(0) && y != T(0))
BINARY(LogicalOr, LOGICAL_OR, Bool, x != T(0) || y != T(0))
BINARY(SigmoidBackward, SIGMOID_BACKWARD, T, x * y * (T(1) - y))
BINARY(TanhBackward, TANH_BACKWARD, T, x * (T(1) - y * y))

#define SCALED2(NAME, ID, ATTR, EXPR, CHECK) \
  OP(NAME, ID, UD_ATTR_##ID##_##ATTR, CHECK, T, Types<T COMMA T>, (T x, T y), EXPR)
#define SCALED3(NAME, ID, EXPR) \
  OP(NAME, ID, UD_ATTR_##ID##_VALUE, no_check, T, Types<T COMMA T COMMA T>, (T x, T a, T b), EXPR)

// alpha is a value of T, integral for integer T (the op set's scalar rule, checked for every op)
SCALED2(Add, ADD, ALPHA, T(x + convert<T>(p) * y), no_check)
SCALED2(Sub, SUB, ALPHA, T(x - convert<T>(p) * y), no_check)
SCALED2(Lerp, LERP, WEIGHT, x + T(p) * (y - x), no_check)
// zero where x <= threshold: a nan x or threshold compares false and passes grad
SCALED2(ThresholdBackward, THRESHOLD_BACKWARD, THRESHOLD, double(y) <= p ? T(0) : x, no_check)
SCALED3(Addcmul, ADDCMUL, x + T(p) * a * b)
SCALED3(Addcdiv, ADDCDIV, x + T(p) * a / b)
OP(GeluBackward, GELU_BACKWARD, UD_ATTR_GELU_BACKWARD_APPROXIMATE, check_approx, T,
   Types<T COMMA T>, (T g, T x), T(double(g) * gelu_grad(x, tanh_)))
OP(Where, WHERE, -1, no_check, T, Types<T COMMA T COMMA Bool>, (T x, T y, Bool cond),
   cond ? x : y)

// tier 3 (torch CPU's formulas and comparison order: nan takes the branch torch's takes)
template <class T> inline bool isinf_(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isinf(x);
  else return false;
}
template <class T> inline T hardsig6(T x) {
  T t = x + T(3);
  t = t < T(0) ? T(0) : t;
  return t > T(6) ? T(6) : t;
}
template <class T> inline T clamp_(T x, T lo, T hi) {  // a nan bound gives nan, as in torch
  T r = x < lo ? lo : x;
  return isnan_(lo) || isnan_(hi) ? T(lo + hi) : r > hi ? hi : r;
}
template <class T> inline bool mod_fix(T m, T y) { return m != T(0) && (y < T(0)) != (m < T(0)); }
template <class T> inline T floor_divide(T x, T y) {  // torch's div_floor_floating
  if (y == T(0)) return x / y;
  T m = std::fmod(x, y), d = (x - m) / y;
  if (mod_fix(m, y)) d -= T(1);
  if (d == T(0)) return std::copysign(T(0), x / y);
  T f = std::floor(d);
  return d - f > T(0.5) ? f + T(1) : f;
}
// in double: float32's e^-x overflows below -88.7, where sigmoid(x) is still subnormal
inline double sigmoid_(double x) { return 1 / (1 + std::exp(-x)); }
inline double silu_grad(double g, double x) { return g * sigmoid_(x) * (1 + x * (1 - sigmoid_(x))); }
inline double mish_grad(double g, double x) {
  double t = std::tanh(std::log1p(std::exp(x)));
  return g * (t + x * sigmoid_(x) * (1 - t * t));
}
template <class T> inline T log_sigmoid_grad(T g, T x) {
  T z = std::exp(-std::fabs(x)), r = z / (T(1) + z);
  return x < T(0) ? g * (T(1) - r) : g * r;
}
template <class T> inline T elu_grad(T g, T x, double alpha, double scale, double in, bool res) {
  if (!(x <= T(0))) return g * T(scale);  // nan x takes this branch, as in torch
  if (res) return g * T(in) * (x + T(alpha * scale));
  return g * T(in) * T(alpha * scale) * std::exp(x * T(in));
}

#define UNARY_A(NAME, ID, ATTR, EXPR) \
  OP(NAME, ID, UD_ATTR_##ID##_##ATTR, no_check, T, Types<T>, (T x), EXPR)
UNARY(Log1p, LOG1P, std::log1p(x))
UNARY(Expm1, EXPM1, std::expm1(x))
UNARY(Silu, SILU, x / (T(1) + std::exp(-x)))
UNARY_A(Softplus, SOFTPLUS, BETA, x * T(p) > T(q[0]) ? x : T(std::log1p(std::exp(x * T(p))) / T(p)))
UNARY_A(Elu, ELU, ALPHA, x <= T(0) ? T(std::expm1(x * T(q[1])) * T(p * q[0])) : T(x * T(q[0])))
UNARY_A(LeakyRelu, LEAKY_RELU, NEGATIVE_SLOPE, x > T(0) ? x : T(x * T(p)))
UNARY(Hardswish, HARDSWISH, x * hardsig6(x) / T(6))
UNARY(Hardsigmoid, HARDSIGMOID, hardsig6(x) / T(6))
UNARY(Mish, MISH, x * std::tanh(std::log1p(std::exp(x))))
UNARY(LogSigmoid, LOG_SIGMOID, (x < T(0) ? x : T(0)) - std::log1p(std::exp(-std::fabs(x))))
UNARY_A(Clamp, CLAMP, MIN, clamp_(x, T(p), T(q[0])))
OP(IsNan, ISNAN, -1, no_check, Bool, Types<T>, (T x), isnan_(x))
OP(IsInf, ISINF, -1, no_check, Bool, Types<T>, (T x), isinf_(x))
BINARY(FloorDivide, FLOOR_DIVIDE, T, floor_divide(x, y))
BINARY(Remainder, REMAINDER, T, mod_fix(std::fmod(x, y), y) ? T(std::fmod(x, y) + y) : T(std::fmod(x, y)))
BINARY(Xlogy, XLOGY, T, isnan_(y) ? y : x == T(0) ? T(0) : T(x * std::log(y)))
BINARY(SiluBackward, SILU_BACKWARD, T, T(silu_grad(x, y)))
BINARY(HardswishBackward, HARDSWISH_BACKWARD, T,
       y < T(-3) ? T(0) : y <= T(3) ? T(x * (y / T(3) + T(0.5))) : x)
BINARY(HardsigmoidBackward, HARDSIGMOID_BACKWARD, T, y > T(-3) && y < T(3) ? T(x / T(6)) : T(0))
BINARY(MishBackward, MISH_BACKWARD, T, T(mish_grad(x, y)))
BINARY(LogSigmoidBackward, LOG_SIGMOID_BACKWARD, T, log_sigmoid_grad(x, y))
SCALED2(LeakyReluBackward, LEAKY_RELU_BACKWARD, NEGATIVE_SLOPE, y > T(0) ? x : T(x * T(p)),
        no_check)
SCALED2(SoftplusBackward, SOFTPLUS_BACKWARD, BETA,
        y * T(p) > T(q[0]) ? x : T(x * std::exp(y * T(p)) / (std::exp(y * T(p)) + T(1))), no_check)
SCALED2(EluBackward, ELU_BACKWARD, ALPHA, elu_grad(x, y, p, q[0], q[1], q[2] != 0), no_check)

template <class... Ins>
bool check_input_dtypes(Check& ck, Types<Ins...>) {
  const UD_DType want[] = {ud_of<Ins>()...};
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
    Check ck(a, O::op);
    if (!ck.signature()) return ck.take();
    if (!check_input_dtypes(ck, typename O::Args{})) return ck.take();
    if (!ck.dtype(ck.out(0), "output", ud_of<typename O::Out>()) || !ck.scalars(ud_of<T>()) || !O::check(ck))
      return ck.take();
    return launch(a, make_call(a, O::op, body));
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
    (RegisterTypes<K<Ops>::template Kernel, Ts...>(Ops<float>::op), ...);
    return true;
  }
};

#define NUMERIC float, double, int32_t, int64_t
const bool reg_floats = On<float, double>::add<
    Exp, Log, Sqrt, Rsqrt, Reciprocal, Sin, Cos, Tanh, Sigmoid, Gelu, Erf, Floor, Ceil, Round, Div,
    Pow, Addcmul, Addcdiv, Lerp, SigmoidBackward, TanhBackward, GeluBackward>();
const bool reg_tier3 = On<float, double>::add<
    Log1p, Expm1, Silu, Softplus, Elu, LeakyRelu, Hardswish, Hardsigmoid, Mish, LogSigmoid, Clamp,
    FloorDivide, Remainder, Xlogy, SiluBackward, HardswishBackward, HardsigmoidBackward,
    MishBackward, LogSigmoidBackward, LeakyReluBackward, SoftplusBackward, EluBackward>();
const bool reg_numeric = On<NUMERIC>::add<Neg, Abs, Relu, Sign, Square, Add, Sub, Maximum, Minimum,
                                          Lt, Le, Gt, Ge, ThresholdBackward>();
const bool reg_all = On<NUMERIC, Bool>::add<Copy, LogicalNot, Mul, Eq, Ne, LogicalAnd, LogicalOr,
                                            Where, IsNan, IsInf>();

}  // namespace

}  // namespace aurora
