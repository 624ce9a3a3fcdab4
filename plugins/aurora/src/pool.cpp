// pool.cpp — max, average and adaptive-average pooling and their gradients, NCHW and
// channels-last. NCHW: every (n, c) plane is independent, planes are spread over the cores.
// Channels-last: a window's taps are runs of channels, the vector loops run along them, and the
// cores take (image, block of channels) parts, which the gradients' scatters never share.
#include <limits>

#include "strided.h"

namespace aurora {

namespace {

struct PoolGeo {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, ceil, count_pad, c, lay;
};

// Channels-last: f(n, c0, c1) for parts of images' channels, enough parts for every core.
template <class F> VESIMresult channel_parts(VESIMkernel_ctx* k, const PoolGeo& g, F&& f) {
  const int64_t n = g.c ? g.planes / g.c : 0, cores = vesimDevCores(k);
  const int64_t parts = std::max<int64_t>(1, std::min((g.c + 7) / 8, (cores + n - 1) / std::max<int64_t>(n, 1)));
  return parallel(k, n * parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) f(i / parts, i % parts * g.c / parts, (i % parts + 1) * g.c / parts);
  });
}

int64_t pool_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = n + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= n + p) o--;
  return o;
}

// A pooling op's forward and backward share the forward's attribute positions; max and average
// pooling share those of kernel_size, stride and padding.
#define SAME_AS(OP, ATTR) UD_ATTR_##OP##_BACKWARD_##ATTR == UD_ATTR_##OP##_##ATTR
#define MAX_AVG(ATTR) UD_ATTR_MAX_POOL2D_##ATTR == UD_ATTR_AVG_POOL2D_##ATTR
static_assert(SAME_AS(MAX_POOL2D, KERNEL_SIZE) && SAME_AS(MAX_POOL2D, STRIDE) && SAME_AS(MAX_POOL2D, PADDING) &&
              SAME_AS(MAX_POOL2D, DILATION) && SAME_AS(MAX_POOL2D, CEIL_MODE) && SAME_AS(AVG_POOL2D, KERNEL_SIZE) &&
              SAME_AS(AVG_POOL2D, STRIDE) && SAME_AS(AVG_POOL2D, PADDING) && SAME_AS(AVG_POOL2D, CEIL_MODE) &&
              SAME_AS(AVG_POOL2D, COUNT_INCLUDE_PAD) && SAME_AS(ADAPTIVE_AVG_POOL2D, OUTPUT_SIZE) &&
              MAX_AVG(KERNEL_SIZE) && MAX_AVG(STRIDE) && MAX_AVG(PADDING), "pooling");

// kernel_size, stride, padding, then (max) dilation, ceil_mode or (avg) ceil_mode,
// count_include_pad. x is the forward input, y the pooled shape to check against.
bool pool_geometry(Check& ck, bool is_max, const UD_Tensor& x, PoolGeo* g) {
  int64_t ks[2] = {}, st[2] = {}, pd[2] = {}, dl[2] = {1, 1};
  if (!ck.ndim(x, "x", 4, 4) || !ck.pair(UD_ATTR_MAX_POOL2D_KERNEL_SIZE, 1, ks) ||
      !ck.pair(UD_ATTR_MAX_POOL2D_STRIDE, 1, st, ks) || !ck.pair(UD_ATTR_MAX_POOL2D_PADDING, 0, pd) ||
      (is_max && !ck.pair(UD_ATTR_MAX_POOL2D_DILATION, 1, dl)))
    return false;
  if (pd[0] * 2 > ks[0] || pd[1] * 2 > ks[1])
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'padding' = (%lld, %lld), expected at most "
                   "half the kernel size", (long long)pd[0], (long long)pd[1]);
  bool ceil_mode = ud_kit_attr_bool(ck.args(), is_max ? UD_ATTR_MAX_POOL2D_CEIL_MODE : UD_ATTR_AVG_POOL2D_CEIL_MODE);
  bool count_pad = !is_max && ud_kit_attr_bool(ck.args(), UD_ATTR_AVG_POOL2D_COUNT_INCLUDE_PAD);
  *g = PoolGeo{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], 0, 0, ks[0], ks[1], st[0], st[1],
               pd[0], pd[1], dl[0], dl[1], ceil_mode, count_pad, x.shape[1]};
  g->oh = pool_out(g->h, g->kh, g->sh, g->ph, g->dh, ceil_mode);
  g->ow = pool_out(g->w, g->kw, g->sw, g->pw, g->dw, ceil_mode);
  if (g->oh < 1 || g->ow < 1)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "input %lldx%lld is too small for kernel %lldx%lld",
                   (long long)g->h, (long long)g->w, (long long)ks[0], (long long)ks[1]);
  return true;
}

bool pooled_shape(Check& ck, const UD_Tensor& t, const char* name, const UD_Tensor& x,
                  int64_t oh, int64_t ow) {
  return ck.ndim(t, name, 4, 4) && ck.dim(t, name, 0, x.shape[0]) &&
         ck.dim(t, name, 1, x.shape[1]) && ck.dim(t, name, 2, oh) && ck.dim(t, name, 3, ow);
}

template <class T> struct MaxPool {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_MAX_POOL2D);
    PoolGeo g;
    const UD_Tensor &x = ck.in(UD_IN_MAX_POOL2D_X), &idx = ck.out(UD_OUT_MAX_POOL2D_INDICES);
    if (!ck.signature() || !ck.dtypes(ud_of<T>(), skip_out(UD_OUT_MAX_POOL2D_INDICES)) ||
        !ck.dtype(idx, "indices", ud_of<int64_t>()) || !pool_geometry(ck, true, x, &g) ||
        !pooled_shape(ck, ck.out(UD_OUT_MAX_POOL2D_Y), "y", x, g.oh, g.ow) || !pooled_shape(ck, idx, "indices", x, g.oh, g.ow))
      return ck.take();
    g.lay = choose_layout(a, {UD_IN_MAX_POOL2D_X}, {UD_OUT_MAX_POOL2D_Y, UD_OUT_MAX_POOL2D_INDICES});
    return launch(a, make_call(a, UD_OP_MAX_POOL2D, body, pack(g)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<PoolGeo>(c);
    const T* x;
    T* y;
    int64_t* idx;
    Tensor &yt = c.out[UD_OUT_MAX_POOL2D_Y], &it = c.out[UD_OUT_MAX_POOL2D_INDICES];
    const Layout l = Layout(g.lay);
    if (VESIMresult r = dense_in(k, c.in[UD_IN_MAX_POOL2D_X], &x, l)) return r;
    if (VESIMresult r = dense_out(k, yt, &y, false, l)) return r;
    if (VESIMresult r = dense_out(k, it, &idx, false, l)) return r;
    // The winning tap per column (or channel) is an integer as wide as T: the passes vectorize.
    using Tap = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
    if (l == kNHWC) {  // the same selection, a vector pass along the channels per tap
      VESIMresult r = channel_parts(k, g, [&](int64_t n, int64_t c0, int64_t c1) {
        const int64_t nc = c1 - c0;
        std::vector<Tap> tap(nc);
        std::vector<int64_t> at(g.kh * g.kw);
        for (int64_t o = n * g.oh * g.ow; o < (n + 1) * g.oh * g.ow; o++) {
          const int64_t oh = o / g.ow % g.oh, ow = o % g.ow;
          T* __restrict yr = y + o * g.c + c0;
          Tap* __restrict tp = tap.data();
          std::fill_n(yr, nc, -std::numeric_limits<T>::infinity());
          std::fill_n(tp, nc, Tap(-1));
          for (int64_t r = 0, t = 0; r < g.kh; r++)
            for (int64_t s = 0; s < g.kw; s++, t++) {
              const int64_t ih = oh * g.sh - g.ph + r * g.dh, iw = ow * g.sw - g.pw + s * g.dw;
              at[t] = ih * g.w + iw;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              const T* __restrict xr = x + (n * g.h * g.w + at[t]) * g.c + c0;
#pragma omp simd
              for (int64_t ch = 0; ch < nc; ch++) {
                const T v = xr[ch];
                const bool take = (tp[ch] < 0) | (v > yr[ch]) | (v != v);
                yr[ch] = take ? v : yr[ch];
                tp[ch] = take ? Tap(t) : tp[ch];
              }
            }
          int64_t* ir = idx + o * g.c + c0;
          for (int64_t ch = 0; ch < nc; ch++) ir[ch] = tp[ch] < 0 ? 0 : at[tp[ch]];
        }
      });
      if (r || (r = store(k, yt, y, l))) return r;
      return store(k, it, idx, l);
    }
    // Each tap (in window order) is a vector pass over the output columns where it is in bounds.
    auto rows = [&](int64_t r0, int64_t r1, auto st) {
      std::vector<Tap> tap(g.ow);
      std::vector<int64_t> offs(g.kh * g.kw);
      for (int64_t row = r0; row < r1; row++) {
        const int64_t oh = row % g.oh;
        const T* xp = x + row / g.oh * g.h * g.w;
        T* yr = y + row * g.ow;
        std::fill_n(yr, g.ow, -std::numeric_limits<T>::infinity());
        std::fill_n(tap.data(), g.ow, Tap(-1));
        for (int64_t r = 0, n = 0; r < g.kh; r++) {
          const int64_t ih = oh * g.sh - g.ph + r * g.dh;
          for (int64_t s = 0; s < g.kw; s++, n++) {
            const int64_t q = g.pw - s * g.dw, e = g.w - 1 + q;  // columns o: 0 <= o*sw - q <= e - q
            const int64_t o0 = q > 0 ? (q + g.sw - 1) / g.sw : 0, o1 = e < 0 ? 0 : std::min(g.ow, e / g.sw + 1);
            const int64_t off = offs[n] = ih * g.w - q;
            if (ih < 0 || ih >= g.h) continue;
#pragma omp simd
            for (int64_t o = o0; o < o1; o++) {  // the first in-bounds tap, a larger one, or nan
              const T v = xp[off + o * st];
              const bool take = (tap[o] < 0) | (v > yr[o]) | (v != v);  // no branches
              yr[o] = take ? v : yr[o];
              tap[o] = take ? Tap(n) : tap[o];
            }
          }
        }
        int64_t* ir = idx + row * g.ow;
        for (int64_t o = 0; o < g.ow; o++) ir[o] = tap[o] < 0 ? 0 : offs[tap[o]] + o * st;
      }
    };
    VESIMresult r = parallel(k, g.planes * g.oh, 1, [&](int64_t r0, int64_t r1) {
      if (g.sw == 1) rows(r0, r1, std::integral_constant<int64_t, 1>());
      else if (g.sw == 2) rows(r0, r1, std::integral_constant<int64_t, 2>());
      else rows(r0, r1, g.sw);
    });
    if (r || (r = store(k, yt, y))) return r;
    return store(k, it, idx);
  }
};

template <class T> struct MaxPoolBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_MAX_POOL2D_BACKWARD);
    PoolGeo g;
    const UD_Tensor &x = ck.in(UD_IN_MAX_POOL2D_BACKWARD_X), &idx = ck.in(UD_IN_MAX_POOL2D_BACKWARD_INDICES);
    if (!ck.signature() || !ck.dtypes(ud_of<T>(), skip_in(UD_IN_MAX_POOL2D_BACKWARD_INDICES)) ||
        !ck.dtype(idx, "indices", ud_of<int64_t>()) || !pool_geometry(ck, true, x, &g) ||
        !pooled_shape(ck, ck.in(UD_IN_MAX_POOL2D_BACKWARD_GRAD_Y), "grad_y", x, g.oh, g.ow) ||
        !pooled_shape(ck, idx, "indices", x, g.oh, g.ow) ||
        !ck.same_shape(ck.out(UD_OUT_MAX_POOL2D_BACKWARD_GRAD_X), "grad_x", x, "x"))
      return ck.take();
    g.lay = choose_layout(a, {UD_IN_MAX_POOL2D_BACKWARD_GRAD_Y, UD_IN_MAX_POOL2D_BACKWARD_INDICES},
                          {UD_OUT_MAX_POOL2D_BACKWARD_GRAD_X});
    return launch(a, make_call(a, UD_OP_MAX_POOL2D_BACKWARD, body, pack(g)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<PoolGeo>(c);
    const T* gy;
    const int64_t* idx;
    T* gx;
    Tensor& gxt = c.out[UD_OUT_MAX_POOL2D_BACKWARD_GRAD_X];
    const Layout l = Layout(g.lay);
    if (VESIMresult r = dense_in(k, c.in[UD_IN_MAX_POOL2D_BACKWARD_GRAD_Y], &gy, l)) return r;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_MAX_POOL2D_BACKWARD_INDICES], &idx, l)) return r;
    if (VESIMresult r = dense_out(k, gxt, &gx, true, l)) return r;
    const int64_t plane = g.h * g.w, n = g.oh * g.ow;
    for (int64_t i = 0; i < g.planes * n; i++)  // validated on the device, before any write
      if (idx[i] < 0 || idx[i] >= plane)
        return vesimDevFail(k, VESIM_ERROR_INVALID_VALUE, "max_pool2d_backward: indices holds "
                            "%lld, outside the input plane [0, %lld)", (long long)idx[i],
                            (long long)plane);
    VESIMresult r = l == kNHWC ? channel_parts(k, g, [&](int64_t im, int64_t c0, int64_t c1) {
      for (int64_t o = im * n; o < (im + 1) * n; o++)
        for (int64_t ch = c0; ch < c1; ch++) gx[(im * plane + idx[o * g.c + ch]) * g.c + ch] += gy[o * g.c + ch];
    }) : parallel(k, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; p++)
        for (int64_t i = 0; i < n; i++) gx[p * plane + idx[p * n + i]] += gy[p * n + i];
    });
    return r ? r : store(k, gxt, gx, l);
  }
};

// torch's average-pool divisor for output cell (o along one dim): (window extent, inside extent)
inline void avg_extent(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t* start,
                       int64_t* end, int64_t* padded) {
  int64_t b = o * s - p, e = std::min(b + k, n + p);
  *padded = e - b;
  *start = std::max<int64_t>(b, 0);
  *end = std::min(e, n);
}

// Channels-last average pooling (kBackward: its gradient), the window of output pixel (oh, ow)
// from win(oh, ow, &h0, &h1, &w0, &w1), which returns its divisor (0: no input inside it).
template <bool kBackward, class T, class Win>
VESIMresult avg_nhwc(VESIMkernel_ctx* k, const PoolGeo& g, const T* in, T* out, Win&& win) {
  return channel_parts(k, g, [&](int64_t n, int64_t c0, int64_t c1) {
    std::vector<double> acc(c1 - c0);
    for (int64_t oh = 0; oh < g.oh; oh++)
      for (int64_t ow = 0; ow < g.ow; ow++) {
        int64_t h0, h1, w0, w1;
        const double div = win(oh, ow, &h0, &h1, &w0, &w1);
        const int64_t o = ((n * g.oh + oh) * g.ow + ow) * g.c;
        if (!kBackward) std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t ih = h0; ih < h1 && div != 0; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            const int64_t at = ((n * g.h + ih) * g.w + iw) * g.c;
            if (kBackward) {
#pragma omp simd
              for (int64_t ch = c0; ch < c1; ch++) out[at + ch] += T(double(in[o + ch]) / div);
            } else {
#pragma omp simd
              for (int64_t ch = c0; ch < c1; ch++) acc[ch - c0] += double(in[at + ch]);
            }
          }
        if (!kBackward)
          for (int64_t ch = c0; ch < c1; ch++) out[o + ch] = div == 0 ? T(0) : T(acc[ch - c0] / div);
      }
  });
}

// The backward pooling ops take (grad_y, x) and write grad_x; the forward ones take x, write y.
static_assert(UD_IN_AVG_POOL2D_BACKWARD_GRAD_Y == 0 && UD_IN_AVG_POOL2D_BACKWARD_X == 1 && UD_IN_AVG_POOL2D_X == 0 &&
              UD_IN_ADAPTIVE_AVG_POOL2D_BACKWARD_GRAD_Y == 0 && UD_IN_ADAPTIVE_AVG_POOL2D_X == 0, "pooling inputs");
constexpr int kIn = 0, kGradY = 0, kOut = 0;

// Backward: grad_y has the pooled shape and grad_x x's; forward: y has the pooled shape.
bool pooled_io(Check& ck, bool backward, const UD_Tensor& x, int64_t oh, int64_t ow) {
  return backward ? pooled_shape(ck, ck.in(kGradY), "grad_y", x, oh, ow) && ck.same_shape(ck.out(kOut), "grad_x", x, "x")
                  : pooled_shape(ck, ck.out(kOut), "y", x, oh, ow);
}

template <class T, bool kBackward> struct AvgPool {
  static constexpr int op = kBackward ? UD_OP_AVG_POOL2D_BACKWARD : UD_OP_AVG_POOL2D;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, op);
    PoolGeo g;
    const UD_Tensor& x = ck.in(kBackward ? UD_IN_AVG_POOL2D_BACKWARD_X : UD_IN_AVG_POOL2D_X);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !pool_geometry(ck, false, x, &g) ||
        !pooled_io(ck, kBackward, x, g.oh, g.ow))
      return ck.take();
    g.lay = choose_layout(a, {kBackward ? kGradY : kIn}, {kOut});
    return launch(a, make_call(a, op, body, pack(g)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<PoolGeo>(c);
    const T* in;
    T* out;
    const Layout l = Layout(g.lay);
    if (VESIMresult r = dense_in(k, c.in[kBackward ? kGradY : kIn], &in, l)) return r;
    if (VESIMresult r = dense_out(k, c.out[kOut], &out, kBackward, l)) return r;
    if (l == kNHWC) {
      VESIMresult r = avg_nhwc<kBackward>(k, g, in, out, [&](int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1) {
        int64_t hp, wp;
        avg_extent(oh, g.sh, g.ph, g.kh, g.h, h0, h1, &hp);
        avg_extent(ow, g.sw, g.pw, g.kw, g.w, w0, w1, &wp);
        const int64_t inside = std::max<int64_t>(*h1 - *h0, 0) * std::max<int64_t>(*w1 - *w0, 0);
        return inside == 0 ? 0.0 : g.count_pad ? double(hp * wp) : double(inside);
      });
      return r ? r : store(k, c.out[kOut], out, l);
    }
    VESIMresult r = parallel(k, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; p++)
        for (int64_t oh = 0; oh < g.oh; oh++) {
          int64_t h0, h1, hp;
          avg_extent(oh, g.sh, g.ph, g.kh, g.h, &h0, &h1, &hp);
          for (int64_t ow = 0; ow < g.ow; ow++) {
            int64_t w0, w1, wp;
            avg_extent(ow, g.sw, g.pw, g.kw, g.w, &w0, &w1, &wp);
            int64_t inside = std::max<int64_t>(h1 - h0, 0) * std::max<int64_t>(w1 - w0, 0);
            double div = g.count_pad ? double(hp * wp) : double(inside);
            int64_t o = (p * g.oh + oh) * g.ow + ow;
            if (kBackward) {
              if (inside == 0) continue;
              T v = T(double(in[o]) / div);
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) out[(p * g.h + ih) * g.w + iw] += v;
            } else {
              double acc = 0;
              for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++) acc += double(in[(p * g.h + ih) * g.w + iw]);
              out[o] = inside == 0 ? T(0) : T(acc / div);
            }
          }
        }
    });
    return r ? r : store(k, c.out[kOut], out);
  }
};

template <class T, bool kBackward> struct AdaptiveAvgPool {
  static constexpr int op = kBackward ? UD_OP_ADAPTIVE_AVG_POOL2D_BACKWARD : UD_OP_ADAPTIVE_AVG_POOL2D;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, op);
    const UD_Tensor& x = ck.in(kBackward ? UD_IN_ADAPTIVE_AVG_POOL2D_BACKWARD_X : kIn);
    int64_t os[2] = {};
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(x, "x", 4, 4) ||
        !ck.pair(UD_ATTR_ADAPTIVE_AVG_POOL2D_OUTPUT_SIZE, 1, os))
      return ck.take();
    if (ud_kit_numel(&x) != 0 && (x.shape[2] == 0 || x.shape[3] == 0))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: 'x' has empty H or W", ck.op());
    if (!pooled_io(ck, kBackward, x, os[0], os[1])) return ck.take();
    PoolGeo g{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], os[0], os[1]};
    g.c = x.shape[1];
    g.lay = choose_layout(a, {kBackward ? kGradY : kIn}, {kOut});
    return launch(a, make_call(a, op, body, pack(g)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<PoolGeo>(c);
    const T* in;
    T* out;
    const Layout l = Layout(g.lay);
    if (VESIMresult r = dense_in(k, c.in[kBackward ? kGradY : kIn], &in, l)) return r;
    if (VESIMresult r = dense_out(k, c.out[kOut], &out, kBackward, l)) return r;
    if (g.h == 0 || g.w == 0) return store(k, c.out[kOut], out, l);
    if (l == kNHWC) {
      VESIMresult r = avg_nhwc<kBackward>(k, g, in, out, [&](int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1) {
        *h0 = oh * g.h / g.oh, *h1 = ((oh + 1) * g.h + g.oh - 1) / g.oh;
        *w0 = ow * g.w / g.ow, *w1 = ((ow + 1) * g.w + g.ow - 1) / g.ow;
        return double((*h1 - *h0) * (*w1 - *w0));
      });
      return r ? r : store(k, c.out[kOut], out, l);
    }
    VESIMresult r = parallel(k, g.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; p++)
        for (int64_t oh = 0; oh < g.oh; oh++) {
          int64_t h0 = oh * g.h / g.oh, h1 = ((oh + 1) * g.h + g.oh - 1) / g.oh;
          for (int64_t ow = 0; ow < g.ow; ow++) {
            int64_t w0 = ow * g.w / g.ow, w1 = ((ow + 1) * g.w + g.ow - 1) / g.ow;
            double area = double((h1 - h0) * (w1 - w0));
            int64_t o = (p * g.oh + oh) * g.ow + ow;
            double acc = 0;
            for (int64_t ih = h0; ih < h1; ih++)
              for (int64_t iw = w0; iw < w1; iw++) {
                if (kBackward) out[(p * g.h + ih) * g.w + iw] += T(double(in[o]) / area);
                else acc += double(in[(p * g.h + ih) * g.w + iw]);
              }
            if (!kBackward) out[o] = T(acc / area);
          }
        }
    });
    return r ? r : store(k, c.out[kOut], out, l);
  }
};

template <class T> using AvgF = AvgPool<T, false>;
template <class T> using AvgB = AvgPool<T, true>;
template <class T> using AdaF = AdaptiveAvgPool<T, false>;
template <class T> using AdaB = AdaptiveAvgPool<T, true>;

const RegisterTypes<MaxPool, float, double> reg_max(UD_OP_MAX_POOL2D);
const RegisterTypes<MaxPoolBackward, float, double> reg_maxb(UD_OP_MAX_POOL2D_BACKWARD);
const RegisterTypes<AvgF, float, double> reg_avg(UD_OP_AVG_POOL2D);
const RegisterTypes<AvgB, float, double> reg_avgb(UD_OP_AVG_POOL2D_BACKWARD);
const RegisterTypes<AdaF, float, double> reg_ada(UD_OP_ADAPTIVE_AVG_POOL2D);
const RegisterTypes<AdaB, float, double> reg_adab(UD_OP_ADAPTIVE_AVG_POOL2D_BACKWARD);

}  // namespace

}  // namespace aurora
