// conv_direct.cpp — direct convolution, for shapes where a GEMM would be tiny. Depthwise
// layers (one input channel per group) run on the ISPC loops of ispc/conv_dw.ispc on dense NCHW
// planes (no layout reorders: for these memory-bound layers oneDNN's reorders to and from its
// blocked layout cost more than the convolution); other groups run plain loops over output
// planes along output rows, which the compiler vectorizes for stride 1.
//
// Depthwise geometry: each input plane is copied, zero-padded, into sh * sw "phase" planes
// (phase (a, b) holds padded rows a, a + sh, .. and columns b, b + sw, ..), so that every tap
// (r, s) of a strided conv reads one phase plane at unit stride: y[oh, ow] += w[r, s] *
// phase[(r dh) % sh, (s dw) % sw][oh + (r dh) / sh, ow + (s dw) / sw]. The backward input is the
// adjoint: each phase plane is a stride-1 correlation of grad_y (zero-margined) with that phase's
// taps, written straight to grad_x's rows; the backward weight dots grad_y with the tap windows.
#include <cmath>
#include <type_traits>
#include <vector>

#include "conv_algos.h"
#include "conv_dw_ispc.h"

namespace ud_dense {
namespace {

void dw_rows(int64_t rows, int64_t cols, const float* src, int64_t ld, const int64_t* base,
             const float* w, int ntaps, float init, float* out, int64_t so_r) {
  ispc::ud_conv_dw_rows_f32(rows, int32_t(cols), src, ld, base, w, ntaps, init, out, so_r);
}
void dw_rows(int64_t rows, int64_t cols, const double* src, int64_t ld, const int64_t* base,
             const double* w, int ntaps, double init, double* out, int64_t so_r) {
  ispc::ud_conv_dw_rows_f64(rows, int32_t(cols), src, ld, base, w, ntaps, init, out, so_r);
}
void dw_dot(int64_t rows, int64_t cols, const float* g, const float* src, int64_t ld,
            const int64_t* base, int ntaps, double* acc) {
  ispc::ud_conv_dw_dot_f32(rows, int32_t(cols), g, cols, 1, src, ld, base, ntaps, acc);
}
void dw_dot(int64_t rows, int64_t cols, const double* g, const double* src, int64_t ld,
            const int64_t* base, int ntaps, double* acc) {
  ispc::ud_conv_dw_dot_f64(rows, int32_t(cols), g, cols, 1, src, ld, base, ntaps, acc);
}

// dst[j * ds] = src[j * ss] for j < n; the unit and stride-2 cases spelled out to vectorize.
template <class T>
void copy_cols(T* dst, int64_t ds, const T* src, int64_t ss, int64_t n) {
  if (ds == 1 && ss == 1) return (void)std::copy_n(src, n, dst);
  if (ds == 1 && ss == 2)
    for (int64_t j = 0; j < n; j++) dst[j] = src[2 * j];
  else if (ds == 2 && ss == 1)
    for (int64_t j = 0; j < n; j++) dst[2 * j] = src[j];
  else
    for (int64_t j = 0; j < n; j++) dst[j * ds] = src[j * ss];
}

// The phase planes of one padded input plane: wq x hq each, tap t = r * s + j at base[t].
struct Phases {
  int64_t wq, hq, pq, size;
  std::vector<int64_t> base;
  explicit Phases(const ConvShape& p)
      : wq((p.w + 2 * p.pw + p.sw - 1) / p.sw), hq((p.h + 2 * p.ph + p.sh - 1) / p.sh),
        pq(wq * hq), size(pq * p.sh * p.sw) {
    for (int64_t r = 0; r < p.r; r++)
      for (int64_t s = 0; s < p.s; s++)
        base.push_back(((r * p.dh) % p.sh * p.sw + (s * p.dw) % p.sw) * pq +
                       (r * p.dh) / p.sh * wq + (s * p.dw) / p.sw);
  }
  // Copies plane x [h, w] into its phases, or (back) the phases' interiors into x. Padding
  // positions are never written (zeroed once per call).
  template <class T>
  void pack(const ConvShape& p, T* x, T* ph, bool back) const {
    for (int64_t ih = 0; ih < p.h; ih++) {
      const int64_t ip = ih + p.ph;
      for (int64_t b = 0; b < p.sw; b++) {
        const int64_t j0 = (p.pw - b + p.sw - 1) / p.sw, n = (p.pw + p.w - b + p.sw - 1) / p.sw - j0;
        T* xr = x + ih * p.w + j0 * p.sw + b - p.pw;
        T* pr = ph + (ip % p.sh * p.sw + b) * pq + ip / p.sh * wq + j0;
        if (back)
          copy_cols(xr, p.sw, pr, 1, n);
        else
          copy_cols(pr, 1, xr, p.sw, n);
      }
    }
  }
};

// Per-thread scratch, zeroed at the start of every call (only interiors are rewritten). The plane
// loops are scheduled dynamically: on a shared machine a descheduled thread's share of a static
// split stalls the whole call.
template <class T>
T* zeroed(std::vector<T>& v, int64_t n) {
  v.assign(size_t(n), T(0));
  return v.data();
}

template <class T>
void dw_forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  const Phases ph(p);
  const int64_t kg = p.kg(), rs = p.r * p.s, plane = p.oh * p.ow;
#pragma omp parallel
  {
    std::vector<T> buf;
    T* P = zeroed(buf, ph.size);
#pragma omp for schedule(dynamic)
    for (int64_t nc = 0; nc < p.n * p.c; nc++) {
      ph.pack(p, const_cast<T*>(x) + nc * p.h * p.w, P, false);
      for (int64_t k = nc % p.c * kg; k < (nc % p.c + 1) * kg; k++)
        dw_rows(p.oh, p.ow, P, ph.wq, ph.base.data(), w + k * rs, int(rs), bias ? bias[k] : T(0),
                y + (nc / p.c * p.k + k) * plane, p.ow);
    }
  }
}

template <class T>
void dw_backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  const Phases ph(p);
  const int64_t kg = p.kg(), rs = p.r * p.s, plane = p.oh * p.ow;
  // grad_y planes with a margin of the largest tap offset: gy[oh, ow] at (oh + rm, ow + cm)
  const int64_t rm = (p.r - 1) * p.dh / p.sh, cm = (p.s - 1) * p.dw / p.sw;
  const int64_t wg = ph.wq + cm, gs = (ph.hq + rm) * wg;
  const bool unit = p.sh == 1 && p.sw == 1;
  // per phase (a, b): the rows and columns of grad_x it holds, and its taps [t0, t1) in base /
  // widx (the weight's index within its group), built once per call
  struct Part { int64_t a, b, q0, j0, rows, cols, t0, t1; };
  std::vector<Part> parts;
  std::vector<int64_t> base, widx;
  for (int64_t a = 0; a < p.sh; a++)
    for (int64_t b = 0; b < p.sw; b++) {
      const int64_t q0 = (p.ph - a + p.sh - 1) / p.sh, j0 = (p.pw - b + p.sw - 1) / p.sw;
      const int64_t rows = (p.ph + p.h - a + p.sh - 1) / p.sh - q0;
      const int64_t cols = (p.pw + p.w - b + p.sw - 1) / p.sw - j0;
      if (rows <= 0 || cols <= 0) continue;
      const int64_t t0 = int64_t(base.size());
      for (int64_t t = 0; t < rs; t++) {
        const int64_t rd = t / p.s * p.dh, sd = t % p.s * p.dw;
        if (rd % p.sh != a || sd % p.sw != b) continue;
        for (int64_t m = 0; m < kg; m++) {
          base.push_back(m * gs + (rm - rd / p.sh + q0) * wg + cm - sd / p.sw + j0);
          widx.push_back(m * rs + t);
        }
      }
      parts.push_back({a, b, q0, j0, rows, cols, t0, int64_t(base.size())});
    }
#pragma omp parallel
  {
    std::vector<T> buf, phbuf, wts(widx.size());
    T* G = zeroed(buf, gs * kg);
    T* P = unit ? nullptr : zeroed(phbuf, ph.size);
#pragma omp for schedule(dynamic)
    for (int64_t nc = 0; nc < p.n * p.c; nc++) {
      const int64_t n = nc / p.c, c = nc % p.c;
      for (int64_t m = 0; m < kg; m++)
        for (int64_t oh = 0; oh < p.oh; oh++)
          std::copy_n(gy + (n * p.k + c * kg + m) * plane + oh * p.ow, p.ow,
                      G + m * gs + (oh + rm) * wg + cm);
      for (size_t i = 0; i < widx.size(); i++) wts[i] = w[c * kg * rs + widx[i]];
      for (const Part& q : parts) {
        // stride 1: straight into grad_x's rows; else into the phase, unpacked below
        T* out = unit ? gx + nc * p.h * p.w + (q.q0 - p.ph) * p.w + q.j0 - p.pw
                      : P + (q.a * p.sw + q.b) * ph.pq + q.q0 * ph.wq + q.j0;
        dw_rows(q.rows, q.cols, G, wg, base.data() + q.t0, wts.data() + q.t0, int(q.t1 - q.t0),
                T(0), out, unit ? p.w : ph.wq);
      }
      if (!unit) ph.pack(p, gx + nc * p.h * p.w, P, true);
    }
  }
}

template <class T>
void dw_backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  const Phases ph(p);
  const int64_t kg = p.kg(), rs = p.r * p.s, plane = p.oh * p.ow;
#pragma omp parallel
  {
    std::vector<T> buf;
    std::vector<double> acc;
    T* P = zeroed(buf, ph.size);
#pragma omp for schedule(dynamic)
    for (int64_t c = 0; c < p.c; c++) {
      acc.assign(size_t(kg * rs), 0.0);
      for (int64_t n = 0; n < p.n; n++) {
        ph.pack(p, const_cast<T*>(x) + (n * p.c + c) * p.h * p.w, P, false);
        for (int64_t m = 0; m < kg; m++)
          dw_dot(p.oh, p.ow, gy + (n * p.k + c * kg + m) * plane, P, ph.wq, ph.base.data(),
                 int(rs), acc.data() + m * rs);
      }
      for (int64_t i = 0; i < kg * rs; i++) gw[c * kg * rs + i] = T(acc[size_t(i)]);
    }
  }
}

// Channels-last depthwise (p.cl: x [n, h, w, c], y [n, oh, ow, k], input channel k / kg): one
// loop along the channels per tap (vectorized at kg = 1), the weight transposed to [r * s, k].
template <class F>
void cl_taps(const ConvShape& p, int64_t oh, int64_t ow, F&& f) {
  for (int64_t r = 0, ih = oh * p.sh - p.ph; r < p.r; r++, ih += p.dh)
    for (int64_t s = 0, iw = ow * p.sw - p.pw; s < p.s; s++, iw += p.dw)
      if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) f(r * p.s + s, (ih * p.w + iw) * p.c);
}
// mode 0: y = conv(x); 1: gx = conv's adjoint applied to gy; 2: gw from gy and x. Images in
// parallel (grad_w: one partial sum per image, added in order in double).
template <class T>
void dw_cl(int mode, const ConvShape& p, const T* a, const T* w, const T* bias, T* out) {
  const int64_t K = p.k, kg = p.kg(), rs = p.r * p.s, img = p.h * p.w * p.c;
  std::vector<T> wt(size_t(mode < 2 ? rs * K : 0));  // [r * s, k]
  for (int64_t i = 0; i < int64_t(wt.size()); i++) wt[size_t(i)] = w[i % K * rs + i / K];
  std::vector<T> part(size_t(mode == 2 ? p.n * rs * K : 0), T(0));
#pragma omp parallel for schedule(dynamic)
  for (int64_t n = 0; n < p.n; n++) {
    const T* x = mode == 2 ? w + n * img : mode == 0 ? a + n * img : nullptr;  // 2: w is x
    if (mode == 1) std::fill(out + n * img, out + (n + 1) * img, T(0));
    for (int64_t o = 0; o < p.oh * p.ow; o++) {
      T* y = out + (n * p.oh * p.ow + o) * K;
      const T* g = a + (n * p.oh * p.ow + o) * K;
      if (mode == 0) for (int64_t k = 0; k < K; k++) y[k] = bias ? bias[k] : T(0);
      cl_taps(p, o / p.ow, o % p.ow, [&](int64_t t, int64_t at) {
        const T* v = mode < 2 ? wt.data() + t * K : nullptr;
        T *acc = part.data() + (n * rs + t) * K, *gxi = out + n * img + at;
        const T* xi = x + at;
        auto taps = [&](auto unit) {  // unit: kg == 1, no division (vector loops)
          auto c = [&](int64_t k) { return decltype(unit)::value ? k : k / kg; };
          if (mode == 0) for (int64_t k = 0; k < K; k++) y[k] += v[k] * xi[c(k)];
          if (mode == 1) for (int64_t k = 0; k < K; k++) gxi[c(k)] += v[k] * g[k];
          if (mode == 2) for (int64_t k = 0; k < K; k++) acc[k] += g[k] * xi[c(k)];
        };
        kg == 1 ? taps(std::true_type()) : taps(std::false_type());
      });
    }
  }
  for (int64_t i = 0; mode == 2 && i < rs * K; i++) {
    double sum = 0;
    for (int64_t n = 0; n < p.n; n++) sum += double(part[size_t(n * rs * K + i)]);
    out[i % K * rs + i / K] = T(sum);
  }
}

template <class T>
void forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  if (p.cl) return dw_cl(0, p, x, w, bias, y);
  if (p.cg() == 1) return dw_forward(p, x, w, bias, y);
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t k = 0; k < p.k; k++) {
      T* yo = y + (n * p.k + k) * plane;
      for (int64_t i = 0; i < plane; i++) yo[i] = bias ? bias[k] : T(0);
      for (int64_t c = 0; c < cg; c++)
        for (int64_t r = 0; r < p.r; r++)
          for (int64_t s = 0; s < p.s; s++) {
            const T wv = w[((k * cg + c) * p.r + r) * p.s + s];
            const T* xc = x + (n * p.c + k / kg * cg + c) * hw;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              const T* xr = xc + ih * p.w;
              T* yr = yo + oh * p.ow;
              if (p.sw == 1)  // the common case, written so that it vectorizes
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
              else
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * p.sw + off];
            });
          }
    }
}

template <class T>
void backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  if (p.cl) return dw_cl(1, p, gy, w, static_cast<const T*>(nullptr), gx);
  // the depthwise adjoint multiplies weights by grad_y's zero margins: exact for finite weights
  if (p.cg() == 1 && std::all_of(w, w + p.k * p.r * p.s, [](T v) { return std::isfinite(v); }))
    return dw_backward_input(p, gy, w, gx);
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < p.n; n++)
    for (int64_t c = 0; c < p.c; c++) {
      T* gxo = gx + (n * p.c + c) * hw;
      for (int64_t i = 0; i < hw; i++) gxo[i] = T(0);
      for (int64_t k = c / cg * kg; k < (c / cg + 1) * kg; k++)
        for (int64_t r = 0; r < p.r; r++)
          for (int64_t s = 0; s < p.s; s++) {
            const T wv = w[((k * cg + c % cg) * p.r + r) * p.s + s];
            const T* gyo = gy + (n * p.k + k) * plane;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              T* gxr = gxo + ih * p.w;
              const T* gyr = gyo + oh * p.ow;
              if (p.sw == 1)
                for (int64_t ow = lo; ow < hi; ow++) gxr[ow + off] += wv * gyr[ow];
              else
                for (int64_t ow = lo; ow < hi; ow++) gxr[ow * p.sw + off] += wv * gyr[ow];
            });
          }
    }
}

template <class T>
void backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  if (p.cl) return dw_cl(2, p, gy, x, static_cast<const T*>(nullptr), gw);
  if (p.cg() == 1) return dw_backward_weight(p, gy, x, gw);
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, hw = p.h * p.w;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t k = 0; k < p.k; k++)
    for (int64_t cl = 0; cl < cg; cl++)
      for (int64_t r = 0; r < p.r; r++)
        for (int64_t s = 0; s < p.s; s++) {
          T acc = T(0);
          for (int64_t n = 0; n < p.n; n++) {
            const T* xc = x + (n * p.c + k / kg * cg + cl) * hw;
            const T* gyo = gy + (n * p.k + k) * plane;
            for_tap_rows(p, r, s, [&](int64_t oh, int64_t ih, int64_t lo, int64_t hi, int64_t off) {
              for (int64_t ow = lo; ow < hi; ow++)
                acc += gyo[oh * p.ow + ow] * xc[ih * p.w + ow * p.sw + off];
            });
          }
          gw[((k * cg + cl) * p.r + r) * p.s + s] = acc;
        }
}

}  // namespace

UD_CONV_ALGO(conv_direct)

}  // namespace ud_dense
