// conv.cpp — conv2d, its two gradients and conv2d_bias_act, by im2col + BLAS or by direct loops.
//
// `algorithm`: "im2col" lowers each (image, group) to one GEMM on a column buffer
// [C/groups * R * S, OH * OW]; "direct" loops over output planes, one per core at a time, with
// the output row as the vector loop; "auto" takes im2col unless its column buffer would be huge,
// and register tiles (below) for unit-stride layers with few input channels. These are the NCHW
// loops; channels-last calls go to conv_nhwc.cpp. conv2d_bias_act is conv2d with the epilogue
// (epilogue.h) applied to each tile these loops write.
#include <immintrin.h>

#include <algorithm>

#include "conv.h"

namespace aurora {

namespace {

constexpr int64_t kMaxColumn = int64_t(1) << 23;  // elements of a core's im2col buffer for "auto"

// The conv ops (kind 0: conv2d, 1: grad of x, 2: grad of weight, 3: conv2d_bias_act) share
// stride, padding, dilation, groups, algorithm in that order from kFirst[kind]; the gradients
// lead with a shape.
#define RUN(OP) UD_ATTR_##OP##_PADDING == UD_ATTR_##OP##_STRIDE + 1 && UD_ATTR_##OP##_DILATION == UD_ATTR_##OP##_STRIDE + 2 && \
                UD_ATTR_##OP##_GROUPS == UD_ATTR_##OP##_STRIDE + 3 && UD_ATTR_##OP##_ALGORITHM == UD_ATTR_##OP##_STRIDE + 4
static_assert(RUN(CONV2D) && RUN(CONV2D_BACKWARD_INPUT) && RUN(CONV2D_BACKWARD_WEIGHT) && RUN(CONV2D_BIAS_ACT) &&
              UD_ATTR_CONV2D_BACKWARD_INPUT_INPUT_SHAPE == 0 && UD_ATTR_CONV2D_BACKWARD_WEIGHT_WEIGHT_SHAPE == 0, "conv");
constexpr int kFirst[] = {UD_ATTR_CONV2D_STRIDE, UD_ATTR_CONV2D_BACKWARD_INPUT_STRIDE, UD_ATTR_CONV2D_BACKWARD_WEIGHT_STRIDE,
                          UD_ATTR_CONV2D_BIAS_ACT_STRIDE};

// Validates the conv attributes (stride... from position `base`) and shapes; x and w are the shapes.
bool geometry(Check& ck, const int64_t* x, const int64_t* w, int base, Geo* g) {
  int64_t st[2] = {}, pd[2] = {}, dl[2] = {};
  if (!ck.pair(base, 1, st) || !ck.pair(base + 1, 0, pd) || !ck.pair(base + 2, 1, dl))
    return false;
  int64_t groups = ck.args()->attrs[base + 3].value.i;
  const char* algo = ck.args()->attrs[base + 4].value.s;
  *g = Geo{x[0], x[1], x[2], x[3], w[0], w[1], 0, w[2], w[3], 0, 0, st[0], st[1], pd[0], pd[1],
           dl[0], dl[1], groups, kAuto};
  if (!strcmp(algo, "direct")) g->algo = kDirect;
  else if (!strcmp(algo, "im2col")) g->algo = kIm2col;
  else if (strcmp(algo, "auto"))
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'algorithm' = '%s', expected 'auto', "
                   "'direct' or 'im2col'", algo);
  if (groups < 1 || g->c % groups || g->k % groups)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'groups' = %lld, expected >= 1 dividing "
                   "C=%lld and K=%lld", (long long)groups, (long long)g->c, (long long)g->k);
  if (g->cg * groups != g->c)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "weight has %lld input channels, expected C/groups = "
                   "%lld", (long long)g->cg, (long long)(g->c / groups));
  g->kg = g->k / groups;
  g->oh = (g->h + 2 * g->ph - g->dh * (g->r - 1) - 1) / g->sh + 1;
  g->ow = (g->w + 2 * g->pw - g->dw * (g->s - 1) - 1) / g->sw + 1;
  if (g->h + 2 * g->ph - g->dh * (g->r - 1) - 1 < 0 || g->w + 2 * g->pw - g->dw * (g->s - 1) - 1 < 0)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "input %lldx%lld is too small for kernel %lldx%lld",
                   (long long)g->h, (long long)g->w, (long long)g->r, (long long)g->s);
  if (g->algo == kAuto) g->algo = g->rows() * g->plane() > kMaxColumn ? kDirect : kIm2col;
  // "auto" takes register tiles for unit stride, rows that fill whole vector registers and few
  // input taps (<= 32 channels of 3x3): where they measured faster than im2col + BLAS (+13-17 %
  // at 32 channels of 16x16; 9-80 % slower from 64 channels up, where the GEMM's blocking wins)
  if (!strcmp(algo, "auto") && g->sh == 1 && g->sw == 1 && g->ow >= 8 && g->ow % 8 == 0 &&
      g->cg * g->r * g->s >= 8 && g->cg * g->r * g->s <= 288)
    g->algo = kTiled;
  if (g->rows() > kBlasMax || g->plane() > kBlasMax)
    return ck.fail(UD_ERR_UNSUPPORTED, "convolution too large for 32-bit BLAS");
  return true;
}

bool shape_is(Check& ck, const UD_Tensor& t, const char* name, const int64_t* want) {
  if (!ck.ndim(t, name, 4, 4)) return false;
  for (int d = 0; d < 4; d++)
    if (!ck.dim(t, name, d, want[d])) return false;
  return true;
}

bool shape_attr(Check& ck, int idx, int64_t out[4]) {
  const UD_Attr& a = ck.args()->attrs[idx];
  if (a.value.ints.len != 4)
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute '%s' has %lld values, expected 4", a.name,
                   (long long)a.value.ints.len);
  for (int i = 0; i < 4; i++)
    if ((out[i] = a.value.ints.data[i]) < 0)
      return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute '%s' has a negative extent", a.name);
  return true;
}

// Calls f(oh, ow0, ow1, ih, iw0) for output rows [oh0, oh1): the output columns [ow0, ow1) whose
// tap (r, s) falls inside the input, with iw0 the input column of ow0 (stride g.sw from there).
template <class F>
inline void tap_rows(const Geo& g, int64_t r, int64_t s, F&& f, int64_t oh0 = 0, int64_t oh1 = -1) {
  int64_t ow0 = 0, ow1 = g.ow;
  while (ow0 < g.ow && ow0 * g.sw - g.pw + s * g.dw < 0) ow0++;
  while (ow1 > ow0 && (ow1 - 1) * g.sw - g.pw + s * g.dw >= g.w) ow1--;
  for (int64_t oh = oh0; oh < (oh1 < 0 ? g.oh : oh1); oh++) {
    int64_t ih = oh * g.sh - g.ph + r * g.dh;
    if (ih >= 0 && ih < g.h && ow0 < ow1) f(oh, ow0, ow1, ih, ow0 * g.sw - g.pw + s * g.dw);
  }
}

// col[(ci, r, s), (oh - oh0, ow)] = x[ci, ih, iw] (0 in the padding) for output rows [oh0, oh1)
// of one image and group, each output row written once, left to right (no memset, no memcpy
// calls: a CNN's rows are a few dozen elements).
template <class T>
void im2col(const Geo& g, const T* x, T* col, int64_t oh0, int64_t oh1) {
  for (int64_t row = 0; row < g.rows(); row++) {
    const int64_t ci = row / (g.r * g.s), r = row / g.s % g.r, s = row % g.s;
    int64_t ow0 = 0, ow1 = g.ow;  // the output columns whose tap lies inside the input
    while (ow0 < g.ow && ow0 * g.sw - g.pw + s * g.dw < 0) ow0++;
    while (ow1 > ow0 && (ow1 - 1) * g.sw - g.pw + s * g.dw >= g.w) ow1--;
    T* o = col + row * (oh1 - oh0) * g.ow;
    for (int64_t oh = oh0; oh < oh1; oh++, o += g.ow) {
      const int64_t ih = oh * g.sh - g.ph + r * g.dh;
      if (ih < 0 || ih >= g.h) {
        for (int64_t i = 0; i < g.ow; i++) o[i] = T(0);
        continue;
      }
      const T* in = x + (ci * g.h + ih) * g.w - g.pw + s * g.dw;  // in[ow * sw] is column ow's tap
      for (int64_t i = 0; i < ow0; i++) o[i] = T(0);
      if (g.sw == 1) {
#pragma omp simd
        for (int64_t i = ow0; i < ow1; i++) o[i] = in[i];
      } else {
        for (int64_t i = ow0; i < ow1; i++) o[i] = in[i * g.sw];
      }
      for (int64_t i = ow1; i < g.ow; i++) o[i] = T(0);
    }
  }
}

// x[ci, ih, iw] += col[(ci - b, r, s), (oh, ow)] for channels [b, e) of one image and group.
template <class T>
void col2im(const Geo& g, const T* col, T* x, int64_t b, int64_t e) {
  for (int64_t ci = b; ci < e; ci++)
    for (int64_t r = 0; r < g.r; r++)
      for (int64_t s = 0; s < g.s; s++) {
        const T* in = col + (((ci - b) * g.r + r) * g.s + s) * g.plane();
        tap_rows(g, r, s, [&](int64_t oh, int64_t ow0, int64_t ow1, int64_t ih, int64_t iw0) {
          T* o = x + (ci * g.h + ih) * g.w + iw0;
          const T* src = in + oh * g.ow + ow0;
#pragma omp simd
          for (int64_t i = 0; i < ow1 - ow0; i++) o[i * g.sw] += src[i];
        });
      }
}

// One parallel region over all (image, group) pairs: f(n, gi, lo, hi, scratch, chunk) with `per`
// elements of scratch for each core and single-threaded BLAS (a region per image cost more than
// the small GEMMs of a CNN's layers). With fewer pairs than cores each pair's [0, split) is cut
// into parts [lo, hi) too.
template <class T, class F>
VESIMresult per_image(VESIMkernel_ctx* k, const Geo& g, int64_t per, int64_t split, T** buf, F&& f) {
  const int64_t parts = std::min(split, std::max<int64_t>(1, vesimDevCores(k) / std::max<int64_t>(1, g.n * g.g)));  // N = 0: no pairs
  *buf = static_cast<T*>(vesimDevScratch(k, uint64_t(vesimDevCores(k) * per) * sizeof(T)));
  if (!*buf) return VESIM_ERROR_OUT_OF_MEMORY;
  return parallel_chunks(k, g.n * g.g * parts, 1, [&](int64_t b, int64_t e, int chunk) {
    for (int64_t i = b, p = b % parts, j = b / parts; i < e; i++, j += ++p / parts, p %= parts)
      f(j / g.g, j % g.g, p * split / parts, (p + 1) * split / parts, *buf + chunk * per, chunk);
  });
}

// ---- register-tiled direct convolution (unit stride) -------------------------------------------
//
// Blocks of KB output channels x WB output columns stay in vector registers while every
// (input channel, r, s) tap adds one broadcast weight times a row of input: no lowered copy nine
// times the input's size and no GEMM packing, which at a CNN's small channel counts cost as
// much as the multiply itself. Each image (and group) is first copied with its padding into the
// core's scratch so that the tiles read without bounds checks; weights come as wt[g][ci][r][s][kg]
// and are regrouped in blocks of kBlock output channels, wb[g][block][ci][r][s][k in block], so
// that a tile's weights are one contiguous run (strided by all K channels, layers with hundreds
// of channels ran several times slower on cache and TLB misses).
// Its gradient of the input is the same loop over grad_y with the weights flipped and transposed.
struct Tile {
  int64_t n, g, cin, cout, h, w, r, s, ph, pw, dh, dw, oh, ow, hp, wp;
};
constexpr int64_t kBlock = 12;  // every tile's KB divides it, tiles start at multiples of KB

// The weights of output channel k0 (block of the group's wb) and the block's width.
template <class T>
inline const T* wblock(const Tile& t, const T* wb, int64_t k0, int64_t* width) {
  const int64_t base = k0 / kBlock * kBlock;
  *width = std::min(kBlock, t.cout - base);
  return wb + base * t.cin * t.r * t.s + (k0 - base);
}

#pragma GCC push_options
#pragma GCC target("avx2,fma")

// AVX2 registers of floats or doubles (intrinsics: the compiler's generic vectors spilled
// the accumulators and assembled broadcasts lane by lane).
template <class T> struct Avx;
template <> struct Avx<float> {
  using V = __m256;
  static constexpr int L = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
};
template <> struct Avx<double> {
  using V = __m256d;
  static constexpr int L = 4;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static V bcast(const double* p) { return _mm256_broadcast_sd(p); }
  static V set1(double v) { return _mm256_set1_pd(v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
};

// The same tile held in NV vector registers per output channel (WB = NV * lanes).
template <class T, int KB, int NV>
inline void vtile(const Tile& t, const T* xp, const T* wt, const T* bias, T* y, int64_t k0,
                  int64_t oh, int64_t ow0) {
  using A = Avx<T>;
  typename A::V acc[KB][NV];
#pragma GCC unroll 16
  for (int kb = 0; kb < KB; kb++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[kb][v] = A::set1(bias ? bias[k0 + kb] : T(0));
  int64_t kst;
  const T* wk = wblock(t, wt, k0, &kst);
  for (int64_t ci = 0; ci < t.cin; ci++)
    for (int64_t r = 0; r < t.r; r++) {
      const T* xr = xp + (ci * t.hp + oh + r * t.dh) * t.wp + ow0;
      const T* wr = wk + (ci * t.r + r) * t.s * kst;
      for (int64_t s = 0; s < t.s; s++) {
        typename A::V xv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) xv[v] = A::load(xr + s * t.dw + v * A::L);
        const T* ws = wr + s * kst;
#pragma GCC unroll 16
        for (int kb = 0; kb < KB; kb++) {
          const typename A::V wv = A::bcast(ws + kb);
#pragma GCC unroll 4
          for (int v = 0; v < NV; v++) acc[kb][v] = A::fma(wv, xv[v], acc[kb][v]);
        }
      }
    }
#pragma GCC unroll 16
  for (int kb = 0; kb < KB; kb++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) A::store(y + ((k0 + kb) * t.oh + oh) * t.ow + ow0 + v * A::L, acc[kb][v]);
}

// Columns [ow0, ow1) (a multiple of the tile's width) of output channels [k, k + KB), all rows.
template <class T, int KB, int NV>
void vcols(const Tile& t, const T* xp, const T* wt, const T* bias, T* y, int64_t k, int64_t ow0,
           int64_t ow1) {
  for (int64_t oh = 0; oh < t.oh; oh++)
    for (int64_t ow = ow0; ow < ow1; ow += NV * (32 / int64_t(sizeof(T))))
      vtile<T, KB, NV>(t, xp, wt, bias, y, k, oh, ow);
}

// Output channels [k, k1) in blocks of KB, then of the smaller sizes in More: enough
// accumulators (KB * NV = 12) to cover the latency of the multiply-adds.
template <class T, int NV, int KB, int... More>
void vblocks(const Tile& t, const T* xp, const T* wt, const T* bias, T* y, int64_t k, int64_t k1,
             int64_t ow0, int64_t ow1) {
  for (; k + KB <= k1; k += KB) vcols<T, KB, NV>(t, xp, wt, bias, y, k, ow0, ow1);
  if constexpr (sizeof...(More) > 0) vblocks<T, NV, More...>(t, xp, wt, bias, y, k, k1, ow0, ow1);
}

// Output channels [k0, k1) of one image and group (xp: its padded input, y and bias at the group);
// t.ow is a multiple of 8 (whole registers of floats, two of doubles).
template <class T>
void tile_image(const Tile& t, const T* xp, const T* wt, const T* bias, T* y, int64_t k0, int64_t k1) {
  constexpr int64_t L = 32 / sizeof(T);
  const int64_t w2 = t.ow / (2 * L) * 2 * L;
  if (w2 > 0) vblocks<T, 2, 6, 4, 2, 1>(t, xp, wt, bias, y, k0, k1, 0, w2);
  if (t.ow > w2) vblocks<T, 1, 12, 8, 4, 1>(t, xp, wt, bias, y, k0, k1, w2, t.ow);
}

#pragma GCC pop_options

// y = conv(x, wt) (+ bias) for t's geometry: one region over (image, group, block of output
// channels), the padded copy of the image in the core's scratch.
template <class T>
VESIMresult tiled(VESIMkernel_ctx* k, const Tile& t, const T* x, const T* wt, const T* bias, T* y,
                  const Epi<T>& epi = {}) {
  const int64_t cores = vesimDevCores(k), pairs = t.n * t.g, pad = t.cin * t.hp * t.wp;
  const int64_t blocks = (t.cout + kBlock - 1) / kBlock, taps = t.cin * t.r * t.s;
  const int64_t parts = std::min(blocks, std::max<int64_t>(1, (cores + pairs - 1) / pairs));
  T* buf = static_cast<T*>(vesimDevScratch(k, uint64_t(cores * pad + t.g * taps * t.cout) * sizeof(T)));
  if (!buf) return VESIM_ERROR_OUT_OF_MEMORY;
  T* wb = buf + cores * pad;
  for (int64_t gi = 0; gi < t.g; gi++)
    for (int64_t base = 0; base < t.cout; base += kBlock) {
      const int64_t width = std::min(kBlock, t.cout - base);
      T* dst = wb + (gi * t.cout + base) * taps;
      for (int64_t j = 0; j < taps; j++)
        for (int64_t kk = 0; kk < width; kk++) dst[j * width + kk] = wt[(gi * taps + j) * t.cout + base + kk];
    }
  return parallel_chunks(k, pairs * parts, 1, [&](int64_t b, int64_t e, int chunk) {
    T* xp = buf + chunk * pad;
    int64_t padded = -1;  // the pair whose padded copy xp holds
    for (int64_t i = b; i < e; i++) {
      const int64_t pair = i / parts, p = i % parts, n = pair / t.g, gi = pair % t.g;
      if (padded != pair) {
        const T* src = x + (n * t.g + gi) * t.cin * t.h * t.w;
        for (int64_t ci = 0; ci < t.cin; ci++)
          for (int64_t hh = 0; hh < t.hp; hh++) {
            T* row = xp + (ci * t.hp + hh) * t.wp;
            const int64_t ih = hh - t.ph;
            if (ih < 0 || ih >= t.h) {
              std::fill_n(row, t.wp, T(0));
              continue;
            }
            std::fill_n(row, t.pw, T(0));
            std::copy_n(src + (ci * t.h + ih) * t.w, t.w, row + t.pw);
            std::fill_n(row + t.pw + t.w, t.wp - t.pw - t.w, T(0));
          }
        padded = pair;
      }
      const int64_t k0 = p * blocks / parts * kBlock, k1 = std::min(t.cout, (p + 1) * blocks / parts * kBlock);
      tile_image<T>(t, xp, wb + gi * taps * t.cout, bias ? bias + gi * t.cout : nullptr,
                    y + (n * t.g + gi) * t.cout * t.oh * t.ow, k0, k1);
      if (epi.active())  // the block's output channels, whole planes
        epilogue(epi, y, ((n * t.g + gi) * t.cout + k0) * t.oh * t.ow, k1 - k0, t.oh * t.ow, t.oh * t.ow,
                 (const T*)nullptr, (const T*)nullptr);
    }
  });
}

// Whether this host's cores can run the tiles (else the lowered path serves "auto").
bool tiles_supported() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

// conv2d takes (x, weight, bias); its gradients take grad_y and the other operand (weight for
// grad of x, x for grad of weight) and write one output.
static_assert(UD_IN_CONV2D_WEIGHT == 1 && UD_IN_CONV2D_BACKWARD_INPUT_GRAD_Y == 0 && UD_IN_CONV2D_BACKWARD_INPUT_WEIGHT == 1 &&
              UD_IN_CONV2D_BACKWARD_WEIGHT_GRAD_Y == 0 && UD_IN_CONV2D_BACKWARD_WEIGHT_X == 1, "conv inputs");
// kind 3: conv2d_bias_act, conv2d's inputs and attributes and then a residual and an activation
static_assert(UD_IN_CONV2D_BIAS_ACT_X == UD_IN_CONV2D_X && UD_IN_CONV2D_BIAS_ACT_WEIGHT == UD_IN_CONV2D_WEIGHT &&
              UD_IN_CONV2D_BIAS_ACT_BIAS == UD_IN_CONV2D_BIAS, "conv2d_bias_act inputs");
const int kConvOps[] = {UD_OP_CONV2D, UD_OP_CONV2D_BACKWARD_INPUT, UD_OP_CONV2D_BACKWARD_WEIGHT, UD_OP_CONV2D_BIAS_ACT};
constexpr int kGradY = 0, kOther = 1, kOut = 0;

template <int Kind>
UD_Error* conv_check(const UD_KernelArgs* a, UD_DType dt, Body body) {
  constexpr bool fwd = Kind == 0 || Kind == 3, grad = !fwd;
  Check ck(a, kConvOps[Kind]);
  int64_t given[4];
  Geo g;
  const UD_Tensor& x = ck.in(fwd ? UD_IN_CONV2D_X : kOther);  // the operand checked first
  if (!ck.signature() || !ck.dtypes(dt) || !ck.ndim(x, Kind == 1 ? "weight" : "x", 4, 4) ||
      (fwd && !ck.ndim(ck.in(UD_IN_CONV2D_WEIGHT), "weight", 4, 4)) || (grad && !shape_attr(ck, 0, given)))
    return ck.take();
  const int64_t* xs = Kind == 1 ? given : x.shape;
  const int64_t* ws = Kind == 2 ? given : ck.in(kOther).shape;
  if (!geometry(ck, xs, ws, kFirst[Kind], &g)) return ck.take();
  int64_t y[4] = {g.n, g.k, g.oh, g.ow};
  const UD_Tensor& bias = ck.in(UD_IN_CONV2D_BIAS);
  if (fwd ? !shape_is(ck, ck.out(kOut), "y", y) ||
                      (bias.ndim >= 0 && (!ck.ndim(bias, "bias", 1, 1) || !ck.dim(bias, "bias", 0, g.k)))
                : !shape_is(ck, ck.in(kGradY), "grad_y", y) || !shape_is(ck, ck.out(kOut), "output", Kind == 1 ? xs : ws))
    return ck.take();
  int act = UD_ACT_NONE;  // bias (again), residual and activation
  if (UD_Error* e = Kind == 3 ? ud_kit_check_epilogue(UD_OP_CONV2D_BIAS_ACT, a, &act) : nullptr) return e;
  g.act = act;
  // channels-last: the activations' layout decides (weights are repacked either way)
  g.lay = fwd ? choose_layout(a, {UD_IN_CONV2D_X, Kind == 3 ? UD_IN_CONV2D_BIAS_ACT_RESIDUAL : -1}, {kOut})
              : choose_layout(a, {kGradY, Kind == 2 ? kOther : -1}, {Kind == 1 ? kOut : -1});
  // channels-last "auto": the GEMM, but loops along channels for depthwise layers (one-column GEMMs)
  if (g.lay == kNHWC && !strcmp(a->attrs[kFirst[Kind] + 4].value.s, "auto"))
    g.algo = g.cg == 1 && g.kg == 1 ? kDirect : kIm2col;
  return launch(a, make_call(a, kConvOps[Kind], body, pack(g)));
}

// conv2d and (kFused) conv2d_bias_act: the same loops, the epilogue on each tile they write
template <class T, bool kFused = false> struct Conv2d {
  static UD_Error* run(const UD_KernelArgs* a) { return conv_check<kFused ? 3 : 0>(a, ud_of<T>(), body); }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<Geo>(c);
    const T *x, *w, *bias;
    T* y;
    Epi<T> e{nullptr, g.act};
    if (kFused)
      if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_BIAS_ACT_RESIDUAL], &e.res, Layout(g.lay))) return r;
    if (g.lay == kNHWC) {
      if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_X], &x, kNHWC)) return r;
      if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_BIAS], &bias)) return r;
      if (VESIMresult r = dense_out(k, c.out[kOut], &y, false, kNHWC)) return r;
      if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
      VESIMresult r = nhwc_conv<T>(k, g, x, c.in[UD_IN_CONV2D_WEIGHT], bias, e, y);
      return r ? r : store(k, c.out[kOut], y, kNHWC);
    }
    if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_X], &x)) return r;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_WEIGHT], &w)) return r;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_CONV2D_BIAS], &bias)) return r;
    if (VESIMresult r = dense_out(k, c.out[kOut], &y, false)) return r;
    if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
    if (g.algo == kTiled && tiles_supported()) {
      T* wt = static_cast<T*>(vesimDevScratch(k, uint64_t(g.k * g.rows()) * sizeof(T)));
      if (!wt) return VESIM_ERROR_OUT_OF_MEMORY;
      for (int64_t ko = 0; ko < g.k; ko++)  // wt[gi][ci][r][s][ko in group]
        for (int64_t j = 0; j < g.rows(); j++)
          wt[(ko / g.kg * g.rows() + j) * g.kg + ko % g.kg] = w[ko * g.rows() + j];
      const Tile t{g.n, g.g, g.cg, g.kg, g.h, g.w, g.r, g.s, g.ph, g.pw, g.dh, g.dw, g.oh, g.ow,
                   g.h + 2 * g.ph, g.w + 2 * g.pw};
      VESIMresult r = tiled<T>(k, t, x, wt, bias, y, e);
      return r ? r : store(k, c.out[kOut], y);
    }
    if (g.algo == kTiled) g.algo = kIm2col;
    VESIMresult r = VESIM_SUCCESS;  // y starts as the bias (0 without one) and the taps add up
    if (bias || g.algo == kDirect)
      r = parallel(k, g.n * g.k, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) std::fill_n(y + i * g.plane(), g.plane(), bias ? bias[i % g.k] : T(0));
      });
    if (!r) r = g.algo == kDirect ? direct(k, g, x, w, y, e) : lowered(k, g, x, w, y, T(bias ? 1 : 0), e);
    return r ? r : store(k, c.out[kOut], y);
  }
  static VESIMresult lowered(VESIMkernel_ctx* k, const Geo& g, const T* x, const T* w, T* y, T beta, const Epi<T>& epi) {
    T* buf;
    return per_image(k, g, g.rows() * g.plane(), g.oh, &buf, [&](auto n, auto gi, auto h0, auto h1, T* col, int) {
      im2col(g, x + (n * g.c + gi * g.cg) * g.h * g.w, col, h0, h1);  // output rows [h0, h1)
      const int64_t cols = (h1 - h0) * g.ow;
      gemm<T>(k, {w + gi * g.kg * g.rows(), g.kg, g.rows(), g.rows(), 1}, {col, g.rows(), cols, cols, 1},
              {y + (n * g.k + gi * g.kg) * g.plane() + h0 * g.ow, g.kg, cols, g.plane(), 1}, T(1),
              beta, nullptr, true);  // every operand is in a BLAS layout: no packing scratch
      if (epi.active())
        epilogue(epi, y, (n * g.k + gi * g.kg) * g.plane() + h0 * g.ow, g.kg, cols, g.plane(), (const T*)nullptr,
                 (const T*)nullptr);
    });
  }
  static VESIMresult direct(VESIMkernel_ctx* k, const Geo& g, const T* x, const T* w, T* y, const Epi<T>& epi) {
    return parallel(k, g.n * g.k, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; i++) {
        int64_t n = i / g.k, ko = i % g.k, gi = ko / g.kg;
        T* out = y + i * g.plane();
        for (int64_t ci = 0; ci < g.cg; ci++) {
          const T* xp = x + (n * g.c + gi * g.cg + ci) * g.h * g.w;
          for (int64_t r = 0; r < g.r; r++)
            for (int64_t s = 0; s < g.s; s++) {
              T wv = w[((ko * g.cg + ci) * g.r + r) * g.s + s];
              tap_rows(g, r, s, [&](int64_t oh, int64_t ow0, int64_t ow1, int64_t ih, int64_t iw0) {
                T* o = out + oh * g.ow;
                const T* in = xp + ih * g.w + iw0 - ow0 * g.sw;
#pragma omp simd
                for (int64_t ow = ow0; ow < ow1; ow++) o[ow] += wv * in[ow * g.sw];
              });
            }
        }
        if (epi.active()) epilogue(epi, y, i * g.plane(), 1, g.plane(), g.plane(), (const T*)nullptr, (const T*)nullptr);
      }
    });
  }
};

template <class T> struct Conv2dBackwardInput {
  static UD_Error* run(const UD_KernelArgs* a) { return conv_check<1>(a, ud_of<T>(), body); }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<Geo>(c);
    const T *gy, *w;
    T* gx;
    if (g.lay == kNHWC) {
      if (VESIMresult r = dense_in(k, c.in[kGradY], &gy, kNHWC)) return r;
      if (VESIMresult r = dense_out(k, c.out[kOut], &gx, true, kNHWC)) return r;
      if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
      VESIMresult r = nhwc_grad_x<T>(k, g, gy, c.in[kOther], gx);
      return r ? r : store(k, c.out[kOut], gx, kNHWC);
    }
    if (VESIMresult r = dense_in(k, c.in[kGradY], &gy)) return r;
    if (VESIMresult r = dense_in(k, c.in[kOther], &w)) return r;
    // grad_x = grad_y (padded by d(R-1) - p) correlated with the flipped, transposed weights
    const int64_t qh = g.dh * (g.r - 1) - g.ph, qw = g.dw * (g.s - 1) - g.pw;
    if (g.algo == kTiled && (!tiles_supported() || qh < 0 || qw < 0 || g.w % 8 || g.kg * g.r * g.s > 288))
      g.algo = kIm2col;
    if (VESIMresult r = dense_out(k, c.out[kOut], &gx, g.algo == kDirect)) return r;
    if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
    VESIMresult r = VESIM_SUCCESS;
    if (g.algo == kTiled) {
      const int64_t rs = g.r * g.s, per = g.kg * rs * g.cg;
      T* wt = static_cast<T*>(vesimDevScratch(k, uint64_t(g.g * per) * sizeof(T)));
      if (!wt) return VESIM_ERROR_OUT_OF_MEMORY;
      for (int64_t ko = 0; ko < g.k; ko++)  // wt[gi][ko in group][R-1-r][S-1-s][ci in group]
        for (int64_t ci = 0; ci < g.cg; ci++)
          for (int64_t j = 0; j < rs; j++)
            wt[ko / g.kg * per + ((ko % g.kg) * rs + rs - 1 - j) * g.cg + ci] = w[(ko * g.cg + ci) * rs + j];
      const Tile t{g.n, g.g, g.kg, g.cg, g.oh, g.ow, g.r, g.s, qh, qw, g.dh, g.dw, g.h, g.w,
                   g.oh + 2 * qh, g.ow + 2 * qw};
      r = tiled<T>(k, t, gy, wt, nullptr, gx);
      return r ? r : store(k, c.out[kOut], gx);
    }
    if (g.algo == kDirect) {
      r = parallel(k, g.n * g.c, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) {
          int64_t n = i / g.c, ci = i % g.c, gi = ci / g.cg, cl = ci % g.cg;
          T* xp = gx + i * g.h * g.w;
          for (int64_t ko = gi * g.kg; ko < (gi + 1) * g.kg; ko++) {
            const T* gp = gy + (n * g.k + ko) * g.plane();
            for (int64_t rr = 0; rr < g.r; rr++)
              for (int64_t s = 0; s < g.s; s++) {
                T wv = w[((ko * g.cg + cl) * g.r + rr) * g.s + s];
                tap_rows(g, rr, s, [&](int64_t oh, int64_t ow0, int64_t ow1, int64_t ih, int64_t iw0) {
                  T* o = xp + ih * g.w + iw0 - ow0 * g.sw;
                  const T* src = gp + oh * g.ow;
                  for (int64_t ow = ow0; ow < ow1; ow++) o[ow * g.sw] += wv * src[ow];
                });
              }
          }
        }
      });
    } else {
      T* buf;
      r = per_image(k, g, g.rows() * g.plane(), g.cg, &buf, [&](auto n, auto gi, auto c0, auto c1, T* col, int) {
        T* xp = gx + (n * g.c + gi * g.cg) * g.h * g.w;  // input channels [c0, c1)
        std::fill_n(xp + c0 * g.h * g.w, (c1 - c0) * g.h * g.w, T(0));
        // col = W_g^T [CgRS, Kg] @ grad_y [Kg, OH*OW], the rows of channels [c0, c1)
        const int64_t rs = g.r * g.s;
        gemm<T>(k, {w + gi * g.kg * g.rows() + c0 * rs, (c1 - c0) * rs, g.kg, 1, g.rows()},
                {gy + (n * g.k + gi * g.kg) * g.plane(), g.kg, g.plane(), g.plane(), 1},
                {col, (c1 - c0) * rs, g.plane(), g.plane(), 1}, T(1), T(0), nullptr, true);
        col2im(g, col, xp, c0, c1);
      });
    }
    return r ? r : store(k, c.out[kOut], gx);
  }
};

template <class T> struct Conv2dBackwardWeight {
  static UD_Error* run(const UD_KernelArgs* a) { return conv_check<2>(a, ud_of<T>(), body); }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    auto g = unpack<Geo>(c);
    const T *gy, *x;
    T* gw;
    if (g.lay == kNHWC) {
      if (VESIMresult r = dense_in(k, c.in[kGradY], &gy, kNHWC)) return r;
      if (VESIMresult r = dense_in(k, c.in[kOther], &x, kNHWC)) return r;
      if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
      return nhwc_grad_w<T>(k, g, gy, x, c.out[kOut]);
    }
    if (VESIMresult r = dense_in(k, c.in[kGradY], &gy)) return r;
    if (VESIMresult r = dense_in(k, c.in[kOther], &x)) return r;
    if (VESIMresult r = dense_out(k, c.out[kOut], &gw, true)) return r;
    if (c.out[kOut].numel() == 0) return VESIM_SUCCESS;
    VESIMresult r = VESIM_SUCCESS;
    if (g.algo == kDirect) {
      r = parallel(k, g.k * g.cg, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) {
          int64_t ko = i / g.cg, cl = i % g.cg, gi = ko / g.kg;
          for (int64_t rr = 0; rr < g.r; rr++)
            for (int64_t s = 0; s < g.s; s++) {
              double acc = 0;
              for (int64_t n = 0; n < g.n; n++) {
                const T* xp = x + (n * g.c + gi * g.cg + cl) * g.h * g.w;
                const T* gp = gy + (n * g.k + ko) * g.plane();
                tap_rows(g, rr, s, [&](int64_t oh, int64_t ow0, int64_t ow1, int64_t ih, int64_t iw0) {
                  const T* in = xp + ih * g.w + iw0 - ow0 * g.sw;
                  const T* src = gp + oh * g.ow;
                  double part = 0;
#pragma omp simd reduction(+ : part)
                  for (int64_t ow = ow0; ow < ow1; ow++) part += double(src[ow]) * double(in[ow * g.sw]);
                  acc += part;
                });
              }
              gw[i * g.r * g.s + rr * g.s + s] = T(acc);
            }
        }
      });
    } else {
      // each core sums its images into its own grad_w; the partial sums are added at the end
      const int64_t per = g.rows() * g.plane() + g.k * g.rows(), cores = vesimDevCores(k);
      std::vector<char> used(cores * g.g);
      T* buf;
      r = per_image(k, g, per, g.oh, &buf, [&](auto n, auto gi, auto h0, auto h1, T* col, int chunk) {
        im2col(g, x + (n * g.c + gi * g.cg) * g.h * g.w, col, h0, h1);
        // grad_w_g [Kg, CgRS] += grad_y [Kg, OH*OW] @ col^T [OH*OW, CgRS], output rows [h0, h1)
        const int64_t cols = (h1 - h0) * g.ow;
        gemm<T>(k, {gy + (n * g.k + gi * g.kg) * g.plane() + h0 * g.ow, g.kg, cols, g.plane(), 1},
                {col, cols, g.rows(), 1, cols},
                {col + g.rows() * g.plane() + gi * g.kg * g.rows(), g.kg, g.rows(), g.rows(), 1},
                T(1), T(used[chunk * g.g + gi] ? 1 : 0), nullptr, true);
        used[chunk * g.g + gi] = 1;
      });
      const int64_t block = g.kg * g.rows();
      for (int64_t c = 0; c < cores * g.g && !r; c++)  // c: (core, group)
#pragma omp simd
        for (int64_t i = 0; i < block * used[c]; i++)
          gw[c % g.g * block + i] += buf[c / g.g * per + g.rows() * g.plane() + c % g.g * block + i];
    }
    return r ? r : store(k, c.out[kOut], gw);
  }
};

template <class T> using Conv2dBiasAct = Conv2d<T, true>;
const RegisterTypes<Conv2d, float, double> reg_conv(UD_OP_CONV2D);
const RegisterTypes<Conv2dBiasAct, float, double> reg_conv_fused(UD_OP_CONV2D_BIAS_ACT);
const RegisterTypes<Conv2dBackwardInput, float, double> reg_conv_bi(UD_OP_CONV2D_BACKWARD_INPUT);
const RegisterTypes<Conv2dBackwardWeight, float, double> reg_conv_bw(UD_OP_CONV2D_BACKWARD_WEIGHT);

}  // namespace

}  // namespace aurora
