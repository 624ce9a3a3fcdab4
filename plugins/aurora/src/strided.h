// strided.h — elementwise iteration over N views of one shape, the way VE code is written:
// dims collapsed, then long inner loops (vector length 256 strips) spread over the cores.
#pragma once

#include <initializer_list>
#include <tuple>
#include <utility>

#include "aurora.h"

namespace aurora {

// N views of one shape (view 0 is the output) with collapsed dims and byte strides.
template <int N>
struct Views {
  int nd = 0;
  int64_t total = 1;
  int64_t shape[kMaxDims] = {};
  int64_t st[N][kMaxDims] = {};
  char* base[N] = {};
};

template <int N>
Views<N> make_views(const Tensor* const (&ts)[N]) {
  Views<N> v;
  // Dims in the output's memory order (largest stride first, stable; the same permutation for
  // every view) before collapsing: a channels-last or other dense permuted map whose operands
  // share the layout becomes one unit-stride run. The flat order of a map doesn't matter.
  const int nd = ts[0]->ndim;
  int order[kMaxDims];
  for (int k = 0; k < nd; k++) {
    int j = k;
    for (; j > 0 && std::llabs(ts[0]->strides[order[j - 1]]) < std::llabs(ts[0]->strides[k]); j--)
      order[j] = order[j - 1];
    order[j] = k;
  }
  int64_t shape[kMaxDims], ps[N][kMaxDims], cs[N][kMaxDims];
  const int64_t* strides[N];
  for (int i = 0; i < N; i++) {
    for (int d = 0; d < nd; d++) ps[i][d] = ts[i]->strides[order[d]];
    strides[i] = ps[i];
  }
  for (int d = 0; d < nd; d++) shape[d] = ts[0]->shape[order[d]];
  v.nd = ud_kit_collapse(nd, shape, N, strides, v.shape, cs);
  for (int i = 0; i < N; i++) {
    v.base[i] = ts[i]->data;
    for (int d = 0; d < v.nd; d++) v.st[i][d] = cs[i][d] * ts[i]->itemsize();
  }
  for (int d = 0; d < v.nd; d++) v.total *= v.shape[d];
  return v;
}

// Calls seg(ptrs, inner byte strides, length) for the inner-dim runs covering [b, e).
template <int N, class Seg>
void segments(const Views<N>& v, int64_t b, int64_t e, Seg&& seg) {
  char* p[N];
  int64_t st[N];
  if (v.nd == 0) {
    for (int i = 0; i < N; i++) {
      p[i] = v.base[i];
      st[i] = 0;
    }
    if (b < e) seg(p, st, int64_t(1));
    return;
  }
  const int last = v.nd - 1;
  const int64_t inner = v.shape[last];
  for (int i = 0; i < N; i++) st[i] = v.st[i][last];
  for (int64_t i = b; i < e;) {
    int64_t row = i / inner, col = i % inner, len = std::min(inner - col, e - i);
    for (int k = 0; k < N; k++)
      p[k] = v.base[k] + offset_of(row, last, v.shape, v.st[k]) + col * st[k];
    seg(p, st, len);
    i += len;
  }
}

template <class... Ts> struct Types {};

// One inner run: out[i] = f(in_0[i], ...). The unit-stride case is a plain vector loop.
template <class Out, class... Ins, class F, size_t... I>
inline void run_row(char** p, const int64_t* st, int64_t n, const F& f, std::index_sequence<I...>) {
  bool unit = st[0] == int64_t(sizeof(Out)) && ((st[I + 1] == int64_t(sizeof(Ins))) && ...);
  if (unit) {
    Out* __restrict o = reinterpret_cast<Out*>(p[0]);
    std::tuple<const Ins*...> x{reinterpret_cast<const Ins*>(p[I + 1])...};
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = f(std::get<I>(x)[i]...);
  } else {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; i++)
      *reinterpret_cast<Out*>(p[0] + i * st[0]) =
          f(*reinterpret_cast<const Ins*>(p[I + 1] + i * st[I + 1])...);
  }
}

// out = f(ins...) over views already resolved on the device; all share out's shape.
template <class Out, class... Ins, class F>
VESIMresult map_views(VESIMkernel_ctx* k, Tensor& out, Tensor* const* ins, const F& f) {
  constexpr int N = 1 + sizeof...(Ins);
  const Tensor* ts[N];
  ts[0] = &out;
  for (int i = 1; i < N; i++) ts[i] = ins[i - 1];
  if (out.numel() == 0) return VESIM_SUCCESS;
  Views<N> v = make_views<N>(ts);
  return parallel(k, v.total, kGrain, [&](int64_t b, int64_t e) {
    segments<N>(v, b, e, [&](char** p, const int64_t* st, int64_t n) {
      run_row<Out, Ins...>(p, st, n, f, std::index_sequence_for<Ins...>{});
    });
  });
}

template <class Out, class... Ins, class F>
VESIMresult map_tensors(VESIMkernel_ctx* k, Tensor& out, Types<Ins...>, std::vector<Tensor>& in,
                        const F& f) {
  Tensor* ptrs[sizeof...(Ins) + 1];
  for (size_t i = 0; i < sizeof...(Ins); i++) ptrs[i] = &in[i];
  return map_views<Out, Ins...>(k, out, ptrs, f);
}

}  // namespace aurora

namespace aurora {

// Activation layouts of the layout-sensitive ops (conv, pooling, batch norm). Channels-last is an
// NCHW-shaped view whose channel dim is innermost: strides (H*W*C, 1, W*C, C) for 4-D, and dims
// (0, 2, ..., nd-1, 1) in memory order for any rank; 1-D and 2-D views are the same in both.
enum Layout : int64_t { kNCHW = 0, kNHWC = 1 };

// The dim at memory position i (outermost first) of an nd-dim view in layout l.
inline int dim_at(int nd, Layout l, int i) {
  return l == kNCHW || i == 0 || nd < 3 ? i : i == nd - 1 ? 1 : i + 1;
}

// Whether a view is dense in layout l (dims of extent 1 may have any stride).
inline bool has_layout(int nd, const int64_t* shape, const int64_t* strides, Layout l) {
  int64_t expect = 1;
  for (int i = nd - 1; i >= 0; i--) {
    const int d = dim_at(nd, l, i);
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}
inline bool has_layout(const Tensor& t, Layout l) { return has_layout(t.ndim, t.shape, t.strides, l); }

inline void set_dense_strides(Tensor& t, Layout l = kNCHW) {
  int64_t s = 1;
  for (int i = t.ndim - 1; i >= 0; i--) {
    const int d = dim_at(t.ndim, l, i);
    t.strides[d] = s;
    s *= t.shape[d];
  }
}

// Host half of a layout-sensitive op: the layout it computes in, from its activation tensors
// (inputs `ins`, outputs `outs`, -1 ends a list early): NCHW when every one is NCHW, else the
// layout most of them have. Each one in neither layout, or in the other, costs a copy on the
// device (dense_in/dense_out below), counted in the debug counter "layout_copies".
Layout choose_layout(const UD_KernelArgs* a, std::initializer_list<int> ins, std::initializer_list<int> outs);

// Tier-2 kernels compute on dense row-major buffers: an input that is already contiguous is
// used in place, any other view is gathered into kernel scratch first. The layout-sensitive ops
// pass their layout: a view dense in it is used in place.
template <class T>
VESIMresult dense_in(VESIMkernel_ctx* k, Tensor& t, const T** out, Layout l = kNCHW) {
  *out = t.ptr<const T>();
  if (!t.present() || t.numel() == 0 || has_layout(t, l)) return VESIM_SUCCESS;
  T* buf = static_cast<T*>(vesimDevScratch(k, uint64_t(t.numel()) * sizeof(T)));
  if (!buf) return VESIM_ERROR_OUT_OF_MEMORY;
  Tensor d = t;
  d.data = reinterpret_cast<char*>(buf);
  set_dense_strides(d, l);
  Tensor* src[1] = {&t};
  *out = buf;
  return map_views<T, T>(k, d, src, [](T v) { return v; });
}

// A dense buffer for output t in layout l (t itself when it has it); zeroed when `zero`.
template <class T>
VESIMresult dense_out(VESIMkernel_ctx* k, Tensor& t, T** out, bool zero, Layout l = kNCHW) {
  *out = t.ptr<T>();
  if (t.numel() != 0 && !has_layout(t, l)) {
    *out = static_cast<T*>(vesimDevScratch(k, uint64_t(t.numel()) * sizeof(T)));
    if (!*out) return VESIM_ERROR_OUT_OF_MEMORY;
  }
  if (zero && t.numel() != 0) std::fill_n(*out, t.numel(), T(0));
  return VESIM_SUCCESS;
}

// Writes a dense buffer from dense_out back through t's strides (no-op when it is t itself).
template <class T>
VESIMresult store(VESIMkernel_ctx* k, Tensor& t, const T* buf, Layout l = kNCHW) {
  if (t.numel() == 0 || reinterpret_cast<const char*>(buf) == t.data) return VESIM_SUCCESS;
  Tensor d = t;
  d.data = const_cast<char*>(reinterpret_cast<const char*>(buf));
  set_dense_strides(d, l);
  Tensor* src[1] = {&d};
  return map_views<T, T>(k, t, src, [](T v) { return v; });
}

}  // namespace aurora
