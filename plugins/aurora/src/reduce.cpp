// reduce.cpp — sum, mean, max, min, prod, argmax, argmin over any set of axes.
//
// x's dims are split into kept dims (one output element each) and reduced dims. With at least
// as many outputs as cores the outputs are spread over the cores; otherwise each output's
// reduction is split into per-core partial results, merged in a fixed order (deterministic).
#include "aurora.h"

namespace aurora {

namespace {

// Wide accumulation: double for floats, int64 for integers (wraps like the narrow type).
template <class T> using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;


// A reducer: Acc init(), step(acc, value, index), merge(acc, later acc), finish(acc, count).
// `empty_ok`: whether an empty reduction has a value (max, min and the arg ops have none).
template <class T> struct Sum {
  static constexpr int op = UD_OP_SUM;
  static constexpr bool empty_ok = true;
  using Acc = Wide<T>;
  using Out = T;
  static Acc init() { return 0; }
  static Acc step(Acc a, T v, int64_t) { return a + Acc(v); }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static T finish(Acc a, int64_t) { return T(a); }
};
template <class T> struct Mean : Sum<T> {
  static constexpr int op = UD_OP_MEAN;
  static T finish(Wide<T> a, int64_t n) { return T(double(a) / double(n)); }
};
template <class T> struct Prod : Sum<T> {
  static constexpr int op = UD_OP_PROD;
  static Wide<T> init() { return 1; }
  static Wide<T> step(Wide<T> a, T v, int64_t) { return a * Wide<T>(v); }
  static Wide<T> merge(Wide<T> a, Wide<T> b) { return a * b; }
};
// max/min (nan wins) and argmax/argmin (the index of the first extreme, or of the first nan)
template <class T, bool kMax, bool kArg> struct Extreme {
  static constexpr int op = kArg ? (kMax ? UD_OP_ARGMAX : UD_OP_ARGMIN) : (kMax ? UD_OP_MAX : UD_OP_MIN);
  static constexpr bool empty_ok = false;
  struct Acc {
    T v;
    int64_t i;
  };
  using Out = std::conditional_t<kArg, int64_t, T>;
  static Acc init() { return {T(0), -1}; }
  static Acc step(Acc a, T v, int64_t i) {
    if (a.i >= 0 && isnan_(a.v)) return a;
    return (a.i < 0 || isnan_(v) || (kMax ? v > a.v : v < a.v)) ? Acc{v, i} : a;
  }
  static Acc merge(Acc a, Acc b) { return b.i < 0 ? a : step(a, b.v, b.i); }
  static Out finish(Acc a, int64_t) {
    if constexpr (kArg) return a.i;
    else return a.v;
  }
};
template <class T> using Max = Extreme<T, true, false>;
template <class T> using Min = Extreme<T, false, false>;
template <class T> using Argmax = Extreme<T, true, true>;
template <class T> using Argmin = Extreme<T, false, true>;

struct Geometry {
  int kn = 0, rn = 0;                       // kept / reduced dim counts
  int64_t kshape[kMaxDims], kx[kMaxDims], ky[kMaxDims];
  int64_t rshape[kMaxDims], rx[kMaxDims];
  int64_t nout = 1, nred = 1;
};

// Every reduction has one input x, one output and the attributes axes, keepdims (sum's
// positions serve them all).
constexpr int kX = UD_IN_SUM_X, kY = UD_OUT_SUM_Y, kAxes = UD_ATTR_SUM_AXES, kKeep = UD_ATTR_SUM_KEEPDIMS;
#define SAME_AS_SUM(ID) UD_ATTR_##ID##_AXES == kAxes && UD_ATTR_##ID##_KEEPDIMS == kKeep
static_assert(SAME_AS_SUM(MEAN) && SAME_AS_SUM(MAX) && SAME_AS_SUM(MIN) && SAME_AS_SUM(PROD) && SAME_AS_SUM(ARGMAX) &&
              SAME_AS_SUM(ARGMIN), "reductions read sum's positions");

// Host side: axes (sorted, distinct, in range; empty = all) and y's shape against x's.
bool check_reduce(Check& ck, bool single_axis, std::vector<bool>& reduced) {
  const UD_Tensor &x = ck.in(kX), &y = ck.out(kY);
  const UD_Attr& axes = ck.args()->attrs[kAxes];
  int keepdims = ck.args()->attrs[kKeep].value.b;
  int nd = x.ndim;
  reduced.assign(size_t(std::max(nd, 1)), axes.value.ints.len == 0);
  if (single_axis && axes.value.ints.len > 1)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'axes' has %lld axes, expected at most one",
                   (long long)axes.value.ints.len);
  for (int64_t i = 0; i < axes.value.ints.len; i++) {
    int64_t a = axes.value.ints.data[i];
    int64_t lim = std::max(nd, 1);
    if (a < -lim || a >= lim)
      return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'axes' has axis %lld, expected in [%lld, "
                     "%lld)", (long long)a, (long long)-lim, (long long)lim);
    a = (a + lim) % lim;
    if (reduced[size_t(a)])
      return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'axes' repeats axis %lld", (long long)a);
    reduced[size_t(a)] = true;
  }
  std::vector<int64_t> want;
  for (int d = 0; d < nd; d++) {
    if (!reduced[size_t(d)]) want.push_back(x.shape[d]);
    else if (keepdims) want.push_back(1);
  }
  bool same = int(want.size()) == y.ndim;
  for (int d = 0; same && d < y.ndim; d++) same = want[size_t(d)] == y.shape[d];
  if (!same)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "output has ndim %d, expected %zu dims (keepdims=%d)",
                   y.ndim, want.size(), keepdims);
  return true;
}

Geometry geometry(const Call& c) {
  const Tensor &x = c.in[kX], &y = c.out[kY];
  bool keep = c.attrs[kKeep].i != 0;
  std::vector<bool> red(size_t(std::max(x.ndim, 1)), c.attrs[kAxes].ints.empty());
  for (int64_t a : c.attrs[kAxes].ints) red[size_t((a + std::max(x.ndim, 1)) % std::max(x.ndim, 1))] = true;
  Geometry g;
  int yd = 0;
  for (int d = 0; d < x.ndim; d++) {
    if (red[size_t(d)]) {
      g.rshape[g.rn] = x.shape[d];
      g.rx[g.rn++] = x.strides[d];
      g.nred *= x.shape[d];
      if (keep) yd++;
    } else {
      g.kshape[g.kn] = x.shape[d];
      g.kx[g.kn] = x.strides[d];
      g.ky[g.kn++] = y.strides[yd++];
      g.nout *= x.shape[d];
    }
  }
  return g;
}

template <class T, class R>
typename R::Acc reduce_range(const T* x, const Geometry& g, int64_t b, int64_t e) {
  typename R::Acc acc = R::init();
  const int last = g.rn - 1;
  if (g.rn == 0) return b < e ? R::step(acc, *x, 0) : acc;
  const int64_t inner = g.rshape[last], s = g.rx[last];
  for (int64_t i = b; i < e;) {
    int64_t row = i / inner, col = i % inner, len = std::min(inner - col, e - i);
    const T* p = x + offset_of(row, last, g.rshape, g.rx) + col * s;
    typename R::Acc part = R::init();
    if (s == 1) {
#pragma omp simd
      for (int64_t j = 0; j < len; j++) part = R::step(part, p[j], i + j);
    } else {
      for (int64_t j = 0; j < len; j++) part = R::step(part, p[j * s], i + j);
    }
    acc = R::merge(acc, part);
    i += len;
  }
  return acc;
}

template <template <class> class R, class T>
struct Reduce {
  static constexpr int op = R<T>::op;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, op);
    std::vector<bool> reduced;
    using Out = typename R<T>::Out;
    if (!ck.signature() || !ck.dtypes(ud_of<T>(), skip_out(kY)) ||
        !ck.dtype(ck.out(kY), "y", ud_of<Out>()) ||
        !check_reduce(ck, !std::is_same_v<Out, T>, reduced))
      return ck.take();
    if (!R<T>::empty_ok && ud_kit_numel(&ck.in(kX)) == 0 && ud_kit_numel(&ck.out(kY)) != 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: input 'x' is empty along a reduced axis",
                          ck.op());
    return launch(a, make_call(a, op, body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    using Rd = R<T>;
    Geometry g = geometry(c);
    const T* x = c.in[kX].ptr<T>();
    auto* y = c.out[kY].ptr<typename Rd::Out>();
    if (g.nout == 0) return VESIM_SUCCESS;
    int cores = vesimDevCores(k);
    if (g.nout >= cores || g.nred < kGrain) {
      return parallel(k, g.nout, std::max<int64_t>(1, kGrain / std::max<int64_t>(g.nred, 1)),
                      [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; o++) {
          const T* xo = x ? x + offset_of(o, g.kn, g.kshape, g.kx) : nullptr;
          auto acc = xo ? reduce_range<T, Rd>(xo, g, 0, g.nred) : Rd::init();
          y[offset_of(o, g.kn, g.kshape, g.ky)] = Rd::finish(acc, g.nred);
        }
      });
    }
    std::vector<typename Rd::Acc> part(static_cast<size_t>(cores));
    for (int64_t o = 0; o < g.nout; o++) {
      const T* xo = x + offset_of(o, g.kn, g.kshape, g.kx);
      for (auto& p : part) p = Rd::init();
      int64_t chunk = (g.nred + cores - 1) / cores;
      VESIMresult r = parallel(k, cores, 1, [&](int64_t b, int64_t e) {
        for (int64_t c2 = b; c2 < e; c2++)
          part[size_t(c2)] = reduce_range<T, Rd>(xo, g, c2 * chunk, std::min(g.nred, (c2 + 1) * chunk));
      });
      if (r) return r;
      auto acc = Rd::init();
      for (auto& p : part) acc = Rd::merge(acc, p);
      y[offset_of(o, g.kn, g.kshape, g.ky)] = Rd::finish(acc, g.nred);
    }
    return VESIM_SUCCESS;
  }
};

template <class T> using SumK = Reduce<Sum, T>;
template <class T> using MeanK = Reduce<Mean, T>;
template <class T> using MaxK = Reduce<Max, T>;
template <class T> using MinK = Reduce<Min, T>;
template <class T> using ProdK = Reduce<Prod, T>;
template <class T> using ArgmaxK = Reduce<Argmax, T>;
template <class T> using ArgminK = Reduce<Argmin, T>;
#define NUMERIC float, double, int32_t, int64_t
const RegisterTypes<SumK, NUMERIC> reg_sum(UD_OP_SUM);
const RegisterTypes<MeanK, float, double> reg_mean(UD_OP_MEAN);
const RegisterTypes<MaxK, NUMERIC> reg_max(UD_OP_MAX);
const RegisterTypes<MinK, NUMERIC> reg_min(UD_OP_MIN);
const RegisterTypes<ProdK, NUMERIC> reg_prod(UD_OP_PROD);
const RegisterTypes<ArgmaxK, NUMERIC> reg_argmax(UD_OP_ARGMAX);
const RegisterTypes<ArgminK, NUMERIC> reg_argmin(UD_OP_ARGMIN);

}  // namespace

}  // namespace aurora
