/* kernels.cu — the plugin's own CUDA kernels: memory ops, elementwise (one strided kernel over
 * typed functors), reductions, softmax, batch norm, pooling, losses, concat and pad. */
#include <cmath>
#include <cstring>

#include "device.cuh"

namespace udc {
namespace {

/* ---- memory: memset, copy, cast, fill, arange ----------------------------------------------- */

template <class U>
__global__ void k_pattern(U* dst, U v, int64_t n) {
  UDC_GRID_LOOP(i, n) dst[i] = v;
}

template <class U>
__global__ void k_copy(Strided<2> s) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t off[2];
    s.offsets(i, off);
    *(U*)(s.base[1] + off[1]) = *(const U*)(s.base[0] + off[0]);
  }
}

template <class From, class To>
__global__ void k_cast(Strided<2> s) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t off[2];
    s.offsets(i, off);
    From v = ld<From>(s.base[0] + off[0]);
    if constexpr (std::is_same_v<To, bool>) st<bool>(s.base[1] + off[1], v != From(0));
    else st<To>(s.base[1] + off[1], (To)v);
  }
}

template <class T>
__global__ void k_fill(Strided<1> s, double v, double step) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t off[1];
    s.offsets(i, off);
    double x = v + (double)i * step; /* step 0: fill; else arange */
    if constexpr (std::is_same_v<T, bool>) st<bool>(s.base[0] + off[0], x != 0.0);
    else st<T>(s.base[0] + off[0], (T)x);
  }
}

Strided<1> strided_one(const UD_Tensor& t) {
  const UD_Tensor* ts[1] = {&t};
  return strided_of<1>(ts);
}

UD_Error* fill_value(const UD_Tensor& y, double v, double step, cudaStream_t s, const char* op) {
  Strided<1> st1 = strided_one(y);
  if (!st1.numel) return nullptr;
  return by_dtype<UD_DTM_ALL>(y.dtype, op, [&](auto t) {
    k_fill<decltype(t)><<<blocks_for(st1.numel), kThreads, 0, s>>>(st1, v, step);
    return launched(op);
  });
}

/* ---- elementwise ----------------------------------------------------------------------------- */

struct EwParams {
  double alpha;
  bool tanh_approx;
  double q[3]; /* attributes 1..3 (tier 3's softplus, elu, clamp; bools as 0 or 1) */
};

template <class T>
__device__ __forceinline__ bool isnan_(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

/* tier 3, as torch's CPU kernels compute them (nan takes torch's branch); x86's ISPC and aurora's
 * functors are the same formulas. The backwards get (grad, x) as (x, y). */
template <class T>
__device__ __forceinline__ T hardsig6(T x) {
  T t = x + T(3);
  t = t < T(0) ? T(0) : t;
  return t > T(6) ? T(6) : t;
}
template <class T>
__device__ __forceinline__ bool mod_fix(T m, T y) { return m != T(0) && (y < T(0)) != (m < T(0)); }

template <class T, int OP>
__device__ __forceinline__ auto ew_tier3(T x, T y, const EwParams& p) {
  if constexpr (OP == E_ISNAN) return isnan_(x);
  else if constexpr (OP == E_ISINF) { if constexpr (std::is_floating_point_v<T>) return (bool)isinf(x); else return false; }
  else {
    const T a = (T)p.alpha, q0 = (T)p.q[0], q1 = (T)p.q[1];
    if constexpr (OP == E_LOG1P) return (T)log1p(x);
    else if constexpr (OP == E_EXPM1) return (T)expm1(x);
    else if constexpr (OP == E_SILU) return (T)(x / (T(1) + exp(-x)));
    else if constexpr (OP == E_SOFTPLUS) return x * a > q0 ? x : (T)(log1p(exp(x * a)) / a);
    else if constexpr (OP == E_ELU) return x <= T(0) ? (T)(expm1(x * q1) * (a * q0)) : (T)(x * q0);
    else if constexpr (OP == E_LEAKY_RELU) return x > T(0) ? x : (T)(x * a);
    else if constexpr (OP == E_HARDSWISH) return (T)(x * hardsig6(x) / T(6));
    else if constexpr (OP == E_HARDSIGMOID) return (T)(hardsig6(x) / T(6));
    else if constexpr (OP == E_MISH) return (T)(x * tanh(log1p(exp(x))));
    else if constexpr (OP == E_LOG_SIGMOID) return (T)((x < T(0) ? x : T(0)) - log1p(exp(-fabs(x))));
    else if constexpr (OP == E_CLAMP) { T r = x < a ? a : x; return isnan_(a) || isnan_(q0) ? (T)(a + q0) : r > q0 ? q0 : r; }
    else if constexpr (OP == E_REMAINDER) { T m = fmod(x, y); return mod_fix(m, y) ? (T)(m + y) : m; }
    else if constexpr (OP == E_FLOOR_DIVIDE) { /* torch's div_floor_floating */
      if (y == T(0)) return (T)(x / y);
      T m = fmod(x, y), d = (x - m) / y;
      if (mod_fix(m, y)) d -= T(1);
      if (d == T(0)) return (T)copysign(T(0), x / y);
      T f = floor(d);
      return d - f > T(0.5) ? (T)(f + T(1)) : f;
    }
    else if constexpr (OP == E_XLOGY) return isnan_(y) ? y : x == T(0) ? T(0) : (T)(x * log(y));
    else if constexpr (OP == E_HARDSWISH_B) return y < T(-3) ? T(0) : y <= T(3) ? (T)(x * (y / T(3) + T(0.5))) : x;
    else if constexpr (OP == E_HARDSIGMOID_B) return y > T(-3) && y < T(3) ? (T)(x / T(6)) : T(0);
    else if constexpr (OP == E_LEAKY_RELU_B) return y > T(0) ? x : (T)(x * a);
    else if constexpr (OP == E_SOFTPLUS_B) { T z = exp(y * a); return y * a > q0 ? x : (T)(x * z / (z + T(1))); }
    else {
      /* in double: float32's e^-x overflows below -88.7, where sigmoid(x) is still subnormal */
      double g = x, v = y, s = 1 / (1 + ::exp(-v));
      if constexpr (OP == E_SILU_B) return (T)(g * s * (1 + v * (1 - s)));
      else if constexpr (OP == E_MISH_B) { double t = ::tanh(::log1p(::exp(v))); return (T)(g * (t + v * s * (1 - t * t))); }
      else if constexpr (OP == E_LOG_SIGMOID_B) { double z = ::exp(-::fabs(v)), r = z / (1 + z); return (T)(v < 0 ? g * (1 - r) : g * r); }
      else {
        static_assert(OP == E_ELU_B, "unhandled tier-3 op");
        if (!(v <= 0)) return (T)(g * p.q[0]);
        if (p.q[2] != 0) return (T)(g * p.q[1] * (v + p.alpha * p.q[0]));
        return (T)(g * p.q[1] * p.alpha * p.q[0] * ::exp(v * p.q[1]));
      }
    }
  }
}

/* The value of op OP at one element; x, y, z are the inputs, c where's condition. */
template <class T, int OP>
__device__ __forceinline__ auto ew_value(T x, T y, T z, bool c, const EwParams& p) {
  constexpr bool F = std::is_floating_point_v<T>;
  const T a = (T)p.alpha;
  if constexpr (OP == E_NEG) return (T)-x;
  else if constexpr (OP == E_ABS) { if constexpr (F) return (T)fabs(x); else return (T)(x < 0 ? -x : x); }
  else if constexpr (OP == E_EXP) return (T)exp(x);
  else if constexpr (OP == E_LOG) return (T)log(x);
  else if constexpr (OP == E_SQRT) return (T)sqrt(x);
  else if constexpr (OP == E_RSQRT) return (T)(T(1) / sqrt(x));
  else if constexpr (OP == E_RECIP) return (T)(T(1) / x);
  else if constexpr (OP == E_SIN) return (T)sin(x);
  else if constexpr (OP == E_COS) return (T)cos(x);
  else if constexpr (OP == E_TANH) return (T)tanh(x);
  else if constexpr (OP == E_SIGMOID) return (T)(T(1) / (T(1) + exp(-x)));
  else if constexpr (OP == E_RELU) return (T)(x < T(0) ? T(0) : x); /* nan and -0 stay */
  else if constexpr (OP == E_GELU) {
    if (p.tanh_approx) {
      const T k = (T)0.7978845608028654;
      return (T)(T(0.5) * x * (T(1) + tanh(k * (x + T(0.044715) * x * x * x))));
    }
    return (T)(T(0.5) * x * (T(1) + erf(x * (T)0.7071067811865476)));
  }
  else if constexpr (OP == E_ERF) return (T)erf(x);
  else if constexpr (OP == E_FLOOR) return (T)floor(x);
  else if constexpr (OP == E_CEIL) return (T)ceil(x);
  else if constexpr (OP == E_ROUND) return (T)rint(x);
  else if constexpr (OP == E_SIGN) return (T)((x > T(0)) - (x < T(0))); /* nan: 0 */
  else if constexpr (OP == E_SQUARE) return (T)(x * x);
  else if constexpr (OP == E_NOT) return x == T(0);
  else if constexpr (OP == E_ADD) return (T)(x + a * y);
  else if constexpr (OP == E_SUB) return (T)(x - a * y);
  else if constexpr (OP == E_MUL) { if constexpr (std::is_same_v<T, bool>) return (bool)(x && y); else return (T)(x * y); }
  else if constexpr (OP == E_DIV) return (T)(x / y);
  else if constexpr (OP == E_POW) return (T)pow(x, y);
  else if constexpr (OP == E_MAX) return isnan_(x) ? x : isnan_(y) ? y : (x > y ? x : y);
  else if constexpr (OP == E_MIN) return isnan_(x) ? x : isnan_(y) ? y : (x < y ? x : y);
  else if constexpr (OP == E_EQ) return x == y;
  else if constexpr (OP == E_NE) return x != y;
  else if constexpr (OP == E_LT) return x < y;
  else if constexpr (OP == E_LE) return x <= y;
  else if constexpr (OP == E_GT) return x > y;
  else if constexpr (OP == E_GE) return x >= y;
  else if constexpr (OP == E_AND) return x != T(0) && y != T(0);
  else if constexpr (OP == E_OR) return x != T(0) || y != T(0);
  else if constexpr (OP == E_WHERE) return c ? x : y;
  else if constexpr (OP == E_ADDCMUL) return (T)(x + a * y * z);
  else if constexpr (OP == E_ADDCDIV) return (T)(x + a * (y / z));
  else if constexpr (OP == E_LERP) return (T)(x + a * (y - x));
  else if constexpr (OP == E_THRESH_B) return (T)((double)y <= p.alpha ? T(0) : x); /* nan passes */
  else if constexpr (OP == E_SIGMOID_B) return (T)(x * y * (T(1) - y));
  else if constexpr (OP == E_TANH_B) return (T)(x * (T(1) - y * y));
  else if constexpr (OP >= E_LOG1P) return ew_tier3<T, OP>(x, y, p);
  else {
    static_assert(OP == E_GELU_B, "unhandled elementwise op");
    if (p.tanh_approx) {
      const T k = (T)0.7978845608028654, b = (T)0.044715;
      T t = tanh(k * (y + b * y * y * y));
      return (T)(x * (T(0.5) * (T(1) + t) + T(0.5) * y * (T(1) - t * t) * k * (T(1) + T(3) * b * y * y)));
    }
    T cdf = T(0.5) * (T(1) + erf(y * (T)0.7071067811865476));
    T pdf = exp(T(-0.5) * y * y) * (T)0.3989422804014327;
    return (T)(x * (cdf + y * pdf));
  }
}

/* Inputs per op and the dtypes each op takes (mirrors the op table in check.cpp). */
constexpr int ew_inputs(int op) {
  return op <= E_NOT || (op >= E_LOG1P && op <= E_ISINF) ? 1
         : op == E_WHERE || op == E_ADDCMUL || op == E_ADDCDIV ? 3 : 2;
}
constexpr unsigned ew_dtypes(int op) {
  switch (op) {
    case E_NEG: case E_ABS: case E_RELU: case E_SIGN: case E_SQUARE: case E_ADD: case E_SUB:
    case E_MAX: case E_MIN: case E_LT: case E_LE: case E_GT: case E_GE: case E_THRESH_B:
      return UD_DTM_NUMERIC;
    case E_NOT: case E_MUL: case E_EQ: case E_NE: case E_AND: case E_OR: case E_WHERE:
    case E_ISNAN: case E_ISINF:
      return UD_DTM_ALL;
    default: return UD_DTM_FLOAT_GROUP;
  }
}

template <class T, int OP, int NT>
__global__ void k_ew(Strided<NT> s, EwParams p) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t off[NT];
    s.offsets(i, off);
    T x = ld<T>(s.base[1] + off[1]);
    T y = NT > 2 ? ld<T>(s.base[2 % NT] + off[2 % NT]) : T(0);
    T z = NT > 3 && OP != E_WHERE ? ld<T>(s.base[3 % NT] + off[3 % NT]) : T(0);
    bool c = NT > 3 && OP == E_WHERE ? ld<bool>(s.base[3 % NT] + off[3 % NT]) : false;
    st(s.base[0] + off[0], ew_value<T, OP>(x, y, z, c, p));
  }
}

/* an elementwise op reads at most one attribute, its first (a float, or gelu's approximation) */
constexpr int kEwAttr = UD_ATTR_ADD_ALPHA;
static_assert(UD_ATTR_SUB_ALPHA == kEwAttr && UD_ATTR_GELU_APPROXIMATE == kEwAttr && UD_ATTR_ADDCMUL_VALUE == kEwAttr &&
              UD_ATTR_ADDCDIV_VALUE == kEwAttr && UD_ATTR_LERP_WEIGHT == kEwAttr &&
              UD_ATTR_THRESHOLD_BACKWARD_THRESHOLD == kEwAttr && UD_ATTR_GELU_BACKWARD_APPROXIMATE == kEwAttr,
              "elementwise attributes");

template <int OP>
UD_Error* ew_op(const UD_KernelArgs* a, cudaStream_t s, const char* name) {
  constexpr int NT = ew_inputs(OP) + 1;
  const UD_Tensor* ts[NT];
  ts[0] = &a->outputs[0];
  for (int i = 1; i < NT; i++) ts[i] = &a->inputs[i - 1];
  Strided<NT> sv = strided_of<NT>(ts);
  if (!sv.numel) return nullptr;
  const UD_Attr* at = a->num_attrs ? &a->attrs[kEwAttr] : nullptr;
  EwParams p{at && at->type == UD_ATTR_FLOAT ? at->value.f : 1.0,
             at && at->type == UD_ATTR_STRING && !strcmp(at->value.s, "tanh"), {0, 0, 0}};
  for (int i = 1; i < a->num_attrs && i < 4; i++)
    p.q[i - 1] = a->attrs[i].type == UD_ATTR_FLOAT ? a->attrs[i].value.f : a->attrs[i].value.b;
  return by_dtype<ew_dtypes(OP)>(a->inputs[0].dtype, name, [&](auto t) {
    k_ew<decltype(t), OP, NT><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv, p);
    return launched(name);
  });
}

template <int OP>
UD_Error* ew_dispatch(int code, const UD_KernelArgs* a, cudaStream_t s, const char* name) {
  if (code == OP) return ew_op<OP>(a, s, name);
  if constexpr (OP < E_ELU_B) return ew_dispatch<OP + 1>(code, a, s, name);
  return ud_kit_error(UD_ERR_INTERNAL, "%s: unknown elementwise code %d", name, code);
}

/* ---- block reductions -------------------------------------------------------------------- */

template <class A, class F>
__device__ A block_reduce(A v, F combine, A identity = A(0)) {
  __shared__ __align__(16) char smem[32 * 16]; /* 32 warps x the widest A */
  A* sh = (A*)smem;
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (!lane) sh[warp] = v;
  __syncthreads();
  int nw = (blockDim.x + 31) >> 5;
  v = threadIdx.x < nw ? sh[threadIdx.x] : identity;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();
  if (!threadIdx.x) sh[0] = v;
  __syncthreads();
  return sh[0];
}

struct SumF { template <class A> __device__ A operator()(A a, A b) const { return a + b; } };

template <class T>
using AccR = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

/* reduce: outer = kept dims (views x, y), inner = reduced dims of x */
template <class T, int CODE>
__global__ void k_reduce(Strided<2> outer, Strided<1> inner) {
  using A = AccR<T>;
  for (int64_t o = blockIdx.x; o < outer.numel; o += gridDim.x) {
    int64_t oo[2];
    outer.offsets(o, oo);
    const char* xb = outer.base[0] + oo[0];
    A acc = CODE == R_PROD ? A(1) : A(0);
    A best = 0;
    int64_t best_i = INT64_MAX;
    bool have = false;
    for (int64_t r = threadIdx.x; r < inner.numel; r += blockDim.x) {
      int64_t io[1];
      inner.offsets(r, io);
      A v = (A)ld<T>(xb + io[0]);
      if constexpr (CODE == R_SUM || CODE == R_MEAN) acc += v;
      else if constexpr (CODE == R_PROD) acc *= v;
      else {
        bool nan = v != v;
        bool better = !have || (!(best != best) && (nan || (CODE == R_MAX || CODE == R_ARGMAX ? v > best : v < best)));
        if (better) best = v, best_i = r, have = true;
      }
    }
    char* yp = outer.base[1] + oo[1];
    if constexpr (CODE == R_SUM || CODE == R_MEAN || CODE == R_PROD) {
      if constexpr (CODE == R_PROD) {
        __shared__ A prods[kThreads];
        prods[threadIdx.x] = acc;
        __syncthreads();
        if (!threadIdx.x) {
          for (int t = 1; t < blockDim.x; t++) acc *= prods[t];
          st<T>(yp, (T)acc);
        }
        __syncthreads();
      } else {
        acc = block_reduce(acc, SumF{});
        if (!threadIdx.x) st<T>(yp, CODE == R_MEAN ? (T)(acc / (A)inner.numel) : (T)acc);
      }
    } else {
      /* pick the first index among equal bests (nan counts as best, first nan wins) */
      __shared__ A vals[kThreads];
      __shared__ int64_t idx[kThreads];
      vals[threadIdx.x] = best;
      idx[threadIdx.x] = have ? best_i : INT64_MAX;
      __syncthreads();
      if (!threadIdx.x) {
        for (int t = 1; t < blockDim.x; t++) {
          if (idx[t] == INT64_MAX) continue;
          A v = vals[t];
          bool bn = best != best, vn = v != v;
          bool take = idx[0] == INT64_MAX || (!bn && (vn || (CODE == R_MAX || CODE == R_ARGMAX ? v > best : v < best))) ||
                      (idx[t] < idx[0] && (bn == vn) && (vn || v == best));
          if (take) best = v, idx[0] = idx[t];
        }
        if (CODE == R_ARGMAX || CODE == R_ARGMIN) *(int64_t*)yp = idx[0];
        else st<T>(yp, (T)best);
      }
      __syncthreads();
    }
  }
}

int threads_for(int64_t n) {
  int t = 32;
  while (t < kThreads && t < n) t *= 2;
  return t;
}

template <int CODE>
UD_Error* reduce_typed(const UD_KernelArgs* a, Strided<2> outer, Strided<1> inner,
                       cudaStream_t s, const char* name) {
  constexpr unsigned dts = CODE == R_MEAN ? UD_DTM_FLOAT_GROUP : UD_DTM_NUMERIC;
  return by_dtype<dts>(a->inputs[0].dtype, name, [&](auto t) {
    k_reduce<decltype(t), CODE><<<blocks_for(outer.numel, 1), threads_for(inner.numel), 0, s>>>(
        outer, inner);
    return launched(name);
  });
}

/* ---- softmax family: rows over every dim but `axis` ------------------------------------------ */

template <class T, bool LOG, bool BWD>
__global__ void k_softmax(Strided<3> rows, int64_t L, int64_t s0, int64_t s1, int64_t s2) {
  using A = double;
  for (int64_t r = blockIdx.x; r < rows.numel; r += gridDim.x) {
    int64_t o[3];
    rows.offsets(r, o);
    const char *in0 = rows.base[0] + o[0], *in1 = rows.base[1] + o[1];
    char* out = rows.base[2] + o[2];
    if constexpr (!BWD) { /* in0 = x */
      A m = -INFINITY;
      for (int64_t i = threadIdx.x; i < L; i += blockDim.x) m = fmax(m, (A)ld<T>(in0 + i * s0));
      m = block_reduce(m, [] __device__(A a, A b) { return a != a || b != b ? NAN : fmax(a, b); }, (A)-INFINITY);
      A sum = 0;
      for (int64_t i = threadIdx.x; i < L; i += blockDim.x) sum += exp((A)ld<T>(in0 + i * s0) - m);
      sum = block_reduce(sum, SumF{});
      for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
        A v = (A)ld<T>(in0 + i * s0) - m;
        st<T>(out + i * s2, (T)(LOG ? v - log(sum) : exp(v) / sum));
      }
    } else { /* in0 = grad_y, in1 = y */
      A dot = 0;
      for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
        A g = ld<T>(in0 + i * s0);
        dot += LOG ? g : g * (A)ld<T>(in1 + i * s1);
      }
      dot = block_reduce(dot, SumF{});
      for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
        A g = ld<T>(in0 + i * s0), y = ld<T>(in1 + i * s1);
        st<T>(out + i * s2, (T)(LOG ? g - exp(y) * dot : y * (g - dot)));
      }
    }
  }
}

/* ---- batch norm: one block per channel --------------------------------------------------- */

struct Vec {
  char* p; /* NULL: absent */
  int64_t st;
};
template <class T>
__device__ __forceinline__ double vget(Vec v, int64_t c, double dflt) {
  return v.p ? (double)ld<T>(v.p + c * v.st) : dflt;
}
template <class T>
__device__ __forceinline__ void vset(Vec v, int64_t c, double x) {
  if (v.p) st<T>(v.p + c * v.st, (T)x);
}

/* views: fwd (x, y, -), bwd (grad_y, x, grad_x); cst: channel stride (bytes) of each view */
struct BnArgs {
  Strided<3> sp;
  int64_t cst[3];
  int64_t C;
  Vec w, b, rm, rv, o1, o2; /* fwd: save_mean, save_invstd; bwd: grad_weight, grad_bias */
  Vec mean, invstd;         /* bwd inputs */
  bool training;
  double momentum, eps;
};

template <class T>
__global__ void k_bn_fwd(BnArgs a) {
  const int64_t M = a.sp.numel;
  for (int64_t c = blockIdx.x; c < a.C; c += gridDim.x) {
    const char* xb = a.sp.base[0] + c * a.cst[0];
    char* yb = a.sp.base[1] + c * a.cst[1];
    double mean, invstd;
    if (a.training) {
      double s = 0;
      for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int64_t o[3];
        a.sp.offsets(i, o);
        s += (double)ld<T>(xb + o[0]);
      }
      mean = block_reduce(s, SumF{}) / (double)M;
      double q = 0;
      for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int64_t o[3];
        a.sp.offsets(i, o);
        double d = (double)ld<T>(xb + o[0]) - mean;
        q += d * d;
      }
      double var = block_reduce(q, SumF{}) / (double)M;
      invstd = 1.0 / sqrt(var + a.eps);
      if (!threadIdx.x) {
        if (a.rm.p) vset<T>(a.rm, c, (1 - a.momentum) * vget<T>(a.rm, c, 0) + a.momentum * mean);
        /* one value per channel: the unbiased variance is 0/0 = nan, as in torch */
        if (a.rv.p)
          vset<T>(a.rv, c, (1 - a.momentum) * vget<T>(a.rv, c, 0) + a.momentum * var * M / (M - 1));
      }
    } else {
      mean = vget<T>(a.rm, c, 0);
      invstd = 1.0 / sqrt(vget<T>(a.rv, c, 1) + a.eps);
    }
    if (!threadIdx.x) vset<T>(a.o1, c, mean), vset<T>(a.o2, c, invstd);
    double w = vget<T>(a.w, c, 1), b = vget<T>(a.b, c, 0);
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      int64_t o[3];
      a.sp.offsets(i, o);
      st<T>(yb + o[1], (T)(((double)ld<T>(xb + o[0]) - mean) * invstd * w + b));
    }
    __syncthreads();
  }
}

template <class T>
__global__ void k_bn_bwd(BnArgs a) {
  const int64_t M = a.sp.numel;
  for (int64_t c = blockIdx.x; c < a.C; c += gridDim.x) {
    const char *gb = a.sp.base[0] + c * a.cst[0], *xb = a.sp.base[1] + c * a.cst[1];
    char* db = a.sp.base[2] + c * a.cst[2];
    double mean = vget<T>(a.mean, c, 0), invstd = vget<T>(a.invstd, c, 1), w = vget<T>(a.w, c, 1);
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      int64_t o[3];
      a.sp.offsets(i, o);
      double g = ld<T>(gb + o[0]);
      sg += g;
      sgx += g * ((double)ld<T>(xb + o[1]) - mean) * invstd;
    }
    sg = block_reduce(sg, SumF{});
    sgx = block_reduce(sgx, SumF{});
    if (!threadIdx.x) vset<T>(a.o1, c, sgx), vset<T>(a.o2, c, sg);
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      int64_t o[3];
      a.sp.offsets(i, o);
      double g = ld<T>(gb + o[0]), xh = ((double)ld<T>(xb + o[1]) - mean) * invstd;
      double d = a.training ? w * invstd * (g - sg / M - xh * sgx / M) : g * w * invstd;
      st<T>(db + o[2], (T)d);
    }
    __syncthreads();
  }
}

/* ---- pooling (NCHW; strides in elements per view) ------------------------------------------ */

struct Nchw {
  char* p;
  int64_t s[4];
  __device__ __forceinline__ char* at(int64_t n, int64_t c, int64_t h, int64_t w, int isz) const {
    return p + (n * s[0] + c * s[1] + h * s[2] + w * s[3]) * isz;
  }
};
Nchw nchw(const UD_Tensor& t) { return {data_ptr(t), {t.strides[0], t.strides[1], t.strides[2], t.strides[3]}}; }

struct PoolArgs {
  PoolGeom g;
  Nchw x, y, idx; /* backward: x = grad_x, y = grad_y */
  int adaptive;
  DeviceFault* fault;
  int op;
};

__device__ __forceinline__ void window(const PoolArgs& a, int64_t oh, int64_t ow, int64_t* h0,
                                       int64_t* h1, int64_t* w0, int64_t* w1, double* div) {
  const PoolGeom& g = a.g;
  if (a.adaptive) {
    *h0 = oh * g.H / g.OH, *h1 = ((oh + 1) * g.H + g.OH - 1) / g.OH;
    *w0 = ow * g.W / g.OW, *w1 = ((ow + 1) * g.W + g.OW - 1) / g.OW;
    *div = (double)((*h1 - *h0) * (*w1 - *w0));
    return;
  }
  int64_t hs = oh * g.stride.h - g.pad.h, ws = ow * g.stride.w - g.pad.w;
  int64_t he = min(hs + g.k.h, g.H + g.pad.h), we = min(ws + g.k.w, g.W + g.pad.w);
  double padded = (double)((he - hs) * (we - ws));
  *h0 = max(hs, (int64_t)0), *w0 = max(ws, (int64_t)0);
  *h1 = min(he, g.H), *w1 = min(we, g.W);
  *div = g.count_include_pad ? padded : (double)((*h1 - *h0) * (*w1 - *w0));
}

template <class T, bool MAX, bool BWD>
__global__ void k_pool(PoolArgs a) {
  const PoolGeom& g = a.g;
  const int isz = sizeof(T);
  UDC_GRID_LOOP(i, g.N * g.C * g.OH * g.OW) {
    int64_t ow = i % g.OW, oh = i / g.OW % g.OH, c = i / (g.OW * g.OH) % g.C, n = i / (g.OW * g.OH * g.C);
    if constexpr (MAX) {
      if constexpr (BWD) {
        int64_t k = *(const int64_t*)a.idx.at(n, c, oh, ow, 8);
        if (k < 0 || k >= g.H * g.W) {
          report_fault(a.fault, a.op, k, g.H * g.W);
          continue;
        }
        atomicAdd((T*)a.x.at(n, c, k / g.W, k % g.W, isz), ld<T>(a.y.at(n, c, oh, ow, isz)));
      } else {
        T best = -INFINITY;
        int64_t bi = -1;
        for (int64_t r = 0; r < g.k.h; r++) {
          int64_t h = oh * g.stride.h - g.pad.h + r * g.dil.h;
          if (h < 0 || h >= g.H) continue;
          for (int64_t q = 0; q < g.k.w; q++) {
            int64_t w = ow * g.stride.w - g.pad.w + q * g.dil.w;
            if (w < 0 || w >= g.W) continue;
            T v = ld<T>(a.x.at(n, c, h, w, isz));
            if (bi < 0 || v > best || (v != v && best == best)) best = v, bi = h * g.W + w;
          }
        }
        st<T>(a.y.at(n, c, oh, ow, isz), best);
        *(int64_t*)a.idx.at(n, c, oh, ow, 8) = bi;
      }
    } else {
      int64_t h0, h1, w0, w1;
      double div;
      window(a, oh, ow, &h0, &h1, &w0, &w1, &div);
      if constexpr (BWD) {
        T gv = (T)((double)ld<T>(a.y.at(n, c, oh, ow, isz)) / div);
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) atomicAdd((T*)a.x.at(n, c, h, w, isz), gv);
      } else {
        double s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) s += (double)ld<T>(a.x.at(n, c, h, w, isz));
        st<T>(a.y.at(n, c, oh, ow, isz), (T)(s / div));
      }
    }
  }
}

/* ---- losses ------------------------------------------------------------------------------ */

struct NllArgs {
  int64_t N, C;
  const char* lp;
  int64_t lp_n, lp_c; /* bytes */
  const char* tg;
  int64_t tg_n;
  bool tg64;
  Vec w;
  char* out; /* fwd: loss; bwd: grad_logp */
  int64_t out_n, out_c;
  char* total; /* fwd output / bwd input */
  const char* gl;
  int64_t gl_n; /* bwd: grad_loss stride (0 when reduced) */
  int reduction; /* 0 none, 1 mean, 2 sum */
  int64_t ignore;
  DeviceFault* fault;
  int op;
};

__device__ bool nll_target(const NllArgs& a, int64_t i, int64_t* t) {
  const char* p = a.tg + i * a.tg_n;
  *t = a.tg64 ? *(const int64_t*)p : *(const int32_t*)p;
  if (*t == a.ignore) return false;
  if (*t < 0 || *t >= a.C) {
    report_fault(a.fault, a.op, *t, a.C);
    return false;
  }
  return true;
}

template <class T>
__global__ void k_nll_fwd(NllArgs a) {
  double loss = 0, tw = 0;
  for (int64_t i = threadIdx.x; i < a.N; i += blockDim.x) {
    int64_t t;
    double l = 0;
    if (nll_target(a, i, &t)) {
      double w = vget<T>(a.w, t, 1);
      l = -w * (double)ld<T>(a.lp + i * a.lp_n + t * a.lp_c);
      tw += w;
    }
    loss += l;
    if (a.reduction == 0) st<T>(a.out + i * a.out_n, (T)l);
  }
  loss = block_reduce(loss, SumF{});
  tw = block_reduce(tw, SumF{});
  if (!threadIdx.x) {
    st<T>(a.total, (T)tw);
    if (a.reduction) st<T>(a.out, (T)(a.reduction == 1 ? loss / tw : loss));
  }
}

template <class T>
__global__ void k_nll_bwd(NllArgs a) {
  UDC_GRID_LOOP(i, a.N) {
    int64_t t;
    if (!nll_target(a, i, &t)) continue;
    double g = ld<T>(a.gl + i * a.gl_n) * -vget<T>(a.w, t, 1);
    if (a.reduction == 1) g /= (double)ld<T>(a.total);
    st<T>(a.out + i * a.out_n + t * a.out_c, (T)g);
  }
}

/* mse: views (x, target[, grad_loss, out]) */
template <class T>
__global__ void k_mse_sum(Strided<2> s, char* out, double scale) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < s.numel; i += blockDim.x) {
    int64_t o[2];
    s.offsets(i, o);
    double d = (double)ld<T>(s.base[0] + o[0]) - (double)ld<T>(s.base[1] + o[1]);
    acc += d * d;
  }
  acc = block_reduce(acc, SumF{});
  if (!threadIdx.x) st<T>(out, (T)(acc * scale));
}

template <class T, bool BWD>
__global__ void k_mse_ew(Strided<4> s, double scale) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t o[4];
    s.offsets(i, o);
    double d = (double)ld<T>(s.base[0] + o[0]) - (double)ld<T>(s.base[1] + o[1]);
    st<T>(s.base[3] + o[3], (T)(BWD ? 2.0 * d * (double)ld<T>(s.base[2] + o[2]) * scale : d * d));
  }
}

const int64_t kZeros[kMaxDims] = {0};

UD_Tensor broadcast_scalar(const UD_Tensor& scalar, const UD_Tensor& like, const int64_t* zeros) {
  UD_Tensor t = scalar;
  t.ndim = like.ndim, t.shape = like.shape, t.strides = zeros;
  return t;
}

}  // namespace

/* ---- launchers ------------------------------------------------------------------------------ */

UD_Error* launch_memset(void* dst, uint64_t pattern, uint32_t size, uint64_t n, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (size == 1) return cuda_error(cudaMemsetAsync(dst, (int)(pattern & 0xff), n, s), "memset");
  if (size == 2) k_pattern<<<blocks_for(n), kThreads, 0, s>>>((uint16_t*)dst, (uint16_t)pattern, (int64_t)n);
  if (size == 4) k_pattern<<<blocks_for(n), kThreads, 0, s>>>((uint32_t*)dst, (uint32_t)pattern, (int64_t)n);
  if (size == 8) k_pattern<<<blocks_for(n), kThreads, 0, s>>>((uint64_t*)dst, pattern, (int64_t)n);
  return launched("memset");
}

UD_Error* strided_copy(const UD_Tensor& x, const UD_Tensor& y, void* stream) {
  const UD_Tensor* ts[2] = {&x, &y};
  Strided<2> sv = strided_of<2>(ts);
  if (!sv.numel) return nullptr;
  cudaStream_t s = (cudaStream_t)stream;
  switch (ud_kit_itemsize(x.dtype)) {
    case 1: k_copy<uint8_t><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv); break;
    case 2: k_copy<uint16_t><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv); break;
    case 4: k_copy<uint32_t><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv); break;
    case 8: k_copy<uint64_t><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv); break;
    default: return ud_kit_error(UD_ERR_UNSUPPORTED, "copy: itemsize %d", (int)ud_kit_itemsize(x.dtype));
  }
  return launched("copy");
}

UD_Error* launch_copy(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  const UD_Tensor &x = a->inputs[0], &y = a->outputs[0];
  if (op.family == F_COPY || ud_kit_dtype_eq(x.dtype, y.dtype)) return strided_copy(x, y, stream);
  const UD_Tensor* ts[2] = {&x, &y};
  Strided<2> sv = strided_of<2>(ts);
  if (!sv.numel) return nullptr;
  cudaStream_t s = (cudaStream_t)stream;
  return by_dtype<UD_DTM_ALL>(x.dtype, op.name, [&](auto from) {
    return by_dtype<UD_DTM_ALL>(y.dtype, op.name, [&](auto to) {
      k_cast<decltype(from), decltype(to)><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv);
      return launched(op.name);
    });
  });
}

UD_Error* launch_fill(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (op.family == F_ARANGE)
    return fill_value(a->outputs[0], ud_kit_attr_float(a, UD_ATTR_ARANGE_START),
                      ud_kit_attr_float(a, UD_ATTR_ARANGE_STEP), s, op.name);
  return fill_value(a->outputs[0], op.id == UD_OP_FILL ? ud_kit_attr_float(a, UD_ATTR_FILL_VALUE) : 0.0, 0.0, s,
                    op.name);
}

UD_Error* launch_ew(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  return ew_dispatch<0>(op.code, a, (cudaStream_t)stream, op.name);
}

UD_Error* launch_reduce(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  const UD_Tensor &x = a->inputs[0], &y = a->outputs[0];
  uint32_t mask;
  if (UD_Error* e = reduce_mask(op.name, a->attrs[kReduceAxes], x.ndim, &mask)) return e;
  bool keep = ud_kit_attr_bool(a, kReduceKeepdims) != 0;
  int64_t ks[kMaxDims], kx[kMaxDims], ky[kMaxDims], rs[kMaxDims], rx[kMaxDims];
  int nk = 0, nr = 0, yd = 0;
  for (int d = 0; d < x.ndim; d++) {
    if (mask >> d & 1) {
      rs[nr] = x.shape[d], rx[nr++] = x.strides[d];
      if (keep) yd++;
    } else {
      ks[nk] = x.shape[d], kx[nk] = x.strides[d], ky[nk++] = y.strides[yd++];
    }
  }
  const int64_t* ko[2] = {kx, ky};
  const int64_t* ro[1] = {rx};
  char* kb[2] = {data_ptr(x), data_ptr(y)};
  char* rb[1] = {nullptr};
  int isz[2] = {(int)ud_kit_itemsize(x.dtype), (int)ud_kit_itemsize(y.dtype)};
  Strided<2> outer = make_strided<2>(nk, ks, ko, kb, isz);
  Strided<1> inner = make_strided<1>(nr, rs, ro, rb, isz);
  if (!outer.numel) return nullptr;
  cudaStream_t s = (cudaStream_t)stream;
  switch (op.code) {
    case R_SUM: return reduce_typed<R_SUM>(a, outer, inner, s, op.name);
    case R_MEAN: return reduce_typed<R_MEAN>(a, outer, inner, s, op.name);
    case R_MAX: return reduce_typed<R_MAX>(a, outer, inner, s, op.name);
    case R_MIN: return reduce_typed<R_MIN>(a, outer, inner, s, op.name);
    case R_PROD: return reduce_typed<R_PROD>(a, outer, inner, s, op.name);
    case R_ARGMAX: return reduce_typed<R_ARGMAX>(a, outer, inner, s, op.name);
    default: return reduce_typed<R_ARGMIN>(a, outer, inner, s, op.name);
  }
}

UD_Error* launch_softmax(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  bool bwd = op.family == F_SOFTMAX_B;
  const UD_Tensor &in0 = a->inputs[0], &in1 = a->inputs[bwd ? 1 : 0], &out = a->outputs[0];
  int nd = in0.ndim, axis = nd ? norm_axis(ud_kit_attr_int(a, kSoftmaxAxis), nd) : -1;
  int64_t shape[kMaxDims], s0[kMaxDims], s1[kMaxDims], s2[kMaxDims];
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (d != axis) shape[n] = in0.shape[d], s0[n] = in0.strides[d], s1[n] = in1.strides[d], s2[n++] = out.strides[d];
  const int64_t* sts[3] = {s0, s1, s2};
  char* base[3] = {data_ptr(in0), data_ptr(in1), data_ptr(out)};
  int64_t isz = ud_kit_itemsize(in0.dtype);
  int iszs[3] = {(int)isz, (int)isz, (int)isz};
  Strided<3> rows = make_strided<3>(n, shape, sts, base, iszs);
  int64_t L = axis < 0 ? 1 : in0.shape[axis];
  if (!rows.numel || !L) return nullptr;
  int64_t a0 = axis < 0 ? 0 : in0.strides[axis] * isz, a1 = axis < 0 ? 0 : in1.strides[axis] * isz,
          a2 = axis < 0 ? 0 : out.strides[axis] * isz;
  cudaStream_t s = (cudaStream_t)stream;
  bool lg = op.code == S_LOG_SOFTMAX;
  return by_dtype<UD_DTM_FLOAT_GROUP>(in0.dtype, op.name, [&](auto t) {
    using T = decltype(t);
    auto k = bwd ? (lg ? k_softmax<T, true, true> : k_softmax<T, false, true>)
                 : (lg ? k_softmax<T, true, false> : k_softmax<T, false, false>);
    k<<<blocks_for(rows.numel, 1), threads_for(L), 0, s>>>(rows, L, a0, a1, a2);
    return launched(op.name);
  });
}

static Vec vec(const UD_Tensor& t) {
  if (!ud_kit_present(&t)) return {nullptr, 0};
  return {data_ptr(t), t.ndim ? t.strides[0] * ud_kit_itemsize(t.dtype) : 0};
}

UD_Error* launch_bn(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  bool bwd = op.family == F_BN_B;
  const UD_Tensor* v[3];
  if (bwd) v[0] = &a->inputs[0], v[1] = &a->inputs[1], v[2] = &a->outputs[0];
  else v[0] = &a->inputs[0], v[1] = &a->outputs[0], v[2] = &a->outputs[0];
  const UD_Tensor& x = *v[bwd ? 1 : 0];
  int64_t shape[kMaxDims], st3[3][kMaxDims];
  int n = 0;
  for (int d = 0; d < x.ndim; d++) {
    if (d == 1) continue;
    shape[n] = x.shape[d];
    for (int t = 0; t < 3; t++) st3[t][n] = v[t]->strides[d];
    n++;
  }
  const int64_t* sts[3] = {st3[0], st3[1], st3[2]};
  char* base[3] = {data_ptr(*v[0]), data_ptr(*v[1]), data_ptr(*v[2])};
  int isz = (int)ud_kit_itemsize(x.dtype);
  int iszs[3] = {isz, isz, isz};
  BnArgs b{};
  b.sp = make_strided<3>(n, shape, sts, base, iszs);
  for (int t = 0; t < 3; t++) b.cst[t] = v[t]->strides[1] * isz;
  b.C = x.shape[1];
  b.training = ud_kit_attr_bool(a, bwd ? UD_ATTR_BATCH_NORM_BACKWARD_TRAINING : UD_ATTR_BATCH_NORM_TRAINING) != 0;
  b.o1 = vec(a->outputs[1]), b.o2 = vec(a->outputs[2]);
  if (bwd) {
    b.w = vec(a->inputs[2]), b.mean = vec(a->inputs[3]), b.invstd = vec(a->inputs[4]);
  } else {
    b.w = vec(a->inputs[1]), b.b = vec(a->inputs[2]), b.rm = vec(a->inputs[3]), b.rv = vec(a->inputs[4]);
    b.momentum = ud_kit_attr_float(a, UD_ATTR_BATCH_NORM_MOMENTUM), b.eps = ud_kit_attr_float(a, UD_ATTR_BATCH_NORM_EPS);
  }
  if (!b.C) return nullptr;
  cudaStream_t s = (cudaStream_t)stream;
  return by_dtype<UD_DTM_FLOAT_GROUP>(x.dtype, op.name, [&](auto t) {
    using T = decltype(t);
    if (bwd) k_bn_bwd<T><<<blocks_for(b.C, 1), threads_for(b.sp.numel), 0, s>>>(b);
    else k_bn_fwd<T><<<blocks_for(b.C, 1), threads_for(b.sp.numel), 0, s>>>(b);
    return launched(op.name);
  });
}

UD_Error* launch_pool(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  bool bwd = op.family == F_MAXPOOL_B || op.family == F_AVGPOOL_B || op.family == F_ADAPT_B;
  bool mx = op.family == F_MAXPOOL || op.family == F_MAXPOOL_B;
  const UD_Tensor& x = a->inputs[bwd ? 1 : 0];
  PoolArgs p{};
  p.adaptive = op.family == F_ADAPT || op.family == F_ADAPT_B;
  if (p.adaptive) {
    Pair o;
    attr_pair(a->attrs[kAdaptiveSize], &o);
    p.g.N = x.shape[0], p.g.C = x.shape[1], p.g.H = x.shape[2], p.g.W = x.shape[3];
    p.g.OH = o.h, p.g.OW = o.w;
  } else if (UD_Error* e = pool_geometry(op.name, x.shape, a->attrs, mx, &p.g)) {
    return e;
  }
  p.x = nchw(bwd ? a->outputs[0] : x);
  p.y = nchw(bwd ? a->inputs[0] : a->outputs[0]);
  if (mx) p.idx = nchw(bwd ? a->inputs[2] : a->outputs[1]);
  p.fault = device_fault_slot(a->device);
  p.op = op.id;
  cudaStream_t s = (cudaStream_t)stream;
  if (bwd) {
    if (UD_Error* e = fill_value(a->outputs[0], 0.0, 0.0, s, op.name)) return e;
  }
  int64_t n = p.g.N * p.g.C * p.g.OH * p.g.OW;
  if (!n) return nullptr;
  return by_dtype<UD_DTM_FLOAT_GROUP>(x.dtype, op.name, [&](auto t) {
    using T = decltype(t);
    auto k = mx ? (bwd ? k_pool<T, true, true> : k_pool<T, true, false>)
                : (bwd ? k_pool<T, false, true> : k_pool<T, false, false>);
    k<<<blocks_for(n), kThreads, 0, s>>>(p);
    return launched(op.name);
  });
}

UD_Error* launch_loss(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const char* red = ud_kit_attr_str(a, kLossReduction);
  int reduction = !strcmp(red, "none") ? 0 : !strcmp(red, "mean") ? 1 : 2;
  if (op.family == F_MSE || op.family == F_MSE_B) {
    bool bwd = op.family == F_MSE_B;
    const UD_Tensor &x = a->inputs[bwd], &tg = a->inputs[bwd + 1], &out = a->outputs[0];
    int64_t numel = ud_kit_numel(&x);
    return by_dtype<UD_DTM_FLOAT_GROUP>(x.dtype, op.name, [&](auto t) {
      using T = decltype(t);
      if (!bwd && reduction) {
        const UD_Tensor* ts[2] = {&x, &tg};
        Strided<2> sv = strided_of<2>(ts);
        k_mse_sum<T><<<1, kThreads, 0, s>>>(sv, data_ptr(out), reduction == 1 ? 1.0 / numel : 1.0);
        return launched(op.name);
      }
      UD_Tensor g = bwd ? (reduction ? broadcast_scalar(a->inputs[0], x, kZeros) : a->inputs[0]) : x;
      const UD_Tensor* ts[4] = {&x, &tg, &g, &out};
      Strided<4> sv = strided_of<4>(ts);
      if (!sv.numel) return (UD_Error*)nullptr;
      double scale = reduction == 1 ? 1.0 / numel : 1.0;
      if (bwd) k_mse_ew<T, true><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv, scale);
      else k_mse_ew<T, false><<<blocks_for(sv.numel), kThreads, 0, s>>>(sv, scale);
      return launched(op.name);
    });
  }
  bool bwd = op.family == F_NLL_B;
  const UD_Tensor &lp = a->inputs[bwd], &tg = a->inputs[bwd + 1], &out = a->outputs[0];
  int64_t isz = ud_kit_itemsize(lp.dtype);
  NllArgs n{};
  n.N = lp.ndim == 2 ? lp.shape[0] : 1;
  n.C = lp.shape[lp.ndim - 1];
  n.lp = data_ptr(lp);
  n.lp_n = lp.ndim == 2 ? lp.strides[0] * isz : 0;
  n.lp_c = lp.strides[lp.ndim - 1] * isz;
  n.tg = data_ptr(tg);
  n.tg64 = tg.dtype.bits == 64;
  n.tg_n = tg.ndim ? tg.strides[0] * (tg.dtype.bits / 8) : 0;
  n.w = vec(a->inputs[bwd + 2]);
  n.out = data_ptr(out);
  n.reduction = reduction;
  n.ignore = ud_kit_attr_int(a, kNllIgnore);
  n.fault = device_fault_slot(a->device);
  n.op = op.id;
  if (bwd) {
    n.out_n = lp.ndim == 2 ? out.strides[0] * isz : 0;
    n.out_c = out.strides[lp.ndim - 1] * isz;
    n.gl = data_ptr(a->inputs[0]);
    n.gl_n = a->inputs[0].ndim ? a->inputs[0].strides[0] * isz : 0;
    n.total = data_ptr(a->inputs[4]);
    if (UD_Error* e = fill_value(out, 0.0, 0.0, s, op.name)) return e;
  } else {
    n.out_n = out.ndim ? out.strides[0] * isz : 0;
    n.total = data_ptr(a->outputs[1]);
  }
  return by_dtype<UD_DTM_FLOAT_GROUP>(lp.dtype, op.name, [&](auto t) {
    using T = decltype(t);
    if (bwd) {
      if (n.N) k_nll_bwd<T><<<blocks_for(n.N), kThreads, 0, s>>>(n);
    } else {
      k_nll_fwd<T><<<1, kThreads, 0, s>>>(n);
    }
    return launched(op.name);
  });
}

UD_Error* launch_concat(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  const UD_Tensor& out = a->outputs[0];
  int axis = norm_axis(ud_kit_attr_int(a, UD_ATTR_CONCAT_AXIS), out.ndim);
  int64_t at = 0;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& x = a->inputs[i];
    UD_Tensor part = out;
    part.shape = x.shape;
    part.byte_offset += (uint64_t)(at * out.strides[axis] * ud_kit_itemsize(out.dtype));
    at += x.shape[axis];
    if (!ud_kit_numel(&x)) continue;
    if (UD_Error* e = strided_copy(x, part, stream)) return e;
  }
  (void)op;
  return nullptr;
}

UD_Error* launch_pad(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  const UD_Tensor &x = a->inputs[0], &y = a->outputs[0];
  if (UD_Error* e = fill_value(y, ud_kit_attr_float(a, UD_ATTR_PAD_CONSTANT_VALUE), 0.0, (cudaStream_t)stream, op.name))
    return e;
  UD_Tensor inner = y;
  inner.shape = x.shape;
  int64_t off = 0;
  for (int d = 0; d < x.ndim; d++) off += a->attrs[UD_ATTR_PAD_CONSTANT_PADS].value.ints.data[2 * d] * y.strides[d];
  inner.byte_offset += (uint64_t)(off * ud_kit_itemsize(y.dtype));
  if (!ud_kit_numel(&x)) return nullptr;
  return strided_copy(x, inner, stream);
}

}  // namespace udc
