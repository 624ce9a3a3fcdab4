// conv_winograd.cpp — Winograd F(2x2, 3x3) for 3x3, stride-1, dilation-1 convolutions (Lavin &
// Gray). Forward: y = A^T [(G w G^T) . (B^T d B)] A per 4x4 input tile d and 2x2 output tile;
// the sum over channels of the 16 element-wise products becomes 16 GEMMs over a block of tiles.
// Both backwards are the exact adjoints of that computation: grad_x = B [U^T dM] B^T scattered
// back onto overlapping tiles, grad_w = G^T [sum over tiles dM . V] G, with dM = A dY A^T.
#include <algorithm>
#include <vector>

#include "conv_algos.h"
#include "dense_common.h"

namespace ud_dense {
namespace {

// 1-D pieces of the transforms, applied down the columns and then along the rows of a tile:
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1], and their adjoints (transposes).
template <class T>
struct V4 {
  T a, b, c, d;
  T operator[](int i) const { return i == 0 ? a : i == 1 ? b : i == 2 ? c : d; }
  static V4 load(const T* s, int64_t stride) {
    return {s[0], s[stride], s[2 * stride], s[3 * stride]};
  }
  void store(T* o, int64_t stride) const {
    o[0] = a, o[stride] = b, o[2 * stride] = c, o[3 * stride] = d;
  }
  static V4 g3(T x, T y, T z) { return {x, T(0.5) * (x + y + z), T(0.5) * (x - y + z), z}; }
  void g_adjoint(T* out, int stride) const {
    out[0] = a + T(0.5) * (b + c), out[stride] = T(0.5) * (b - c);
    out[2 * stride] = T(0.5) * (b + c) + d;
  }
  V4 bt() const { return {a - c, b + c, c - b, b - d}; }
  V4 bt_adjoint() const { return {a, b - c + d, b + c - a, -d}; }
  static V4 at_adjoint(T y0, T y1) { return {y0, y0 + y1, y0 - y1, -y1}; }
};

// Tile rows (2 output rows each) of all images of one group, processed in blocks of whole tile
// rows; buffers hold [16][channels][block], tile t = (tile row - first row) * tw + tile column.
struct Tiling {
  int64_t th, tw, rows, block_rows, block;
  explicit Tiling(const ConvShape& p) {
    th = (p.oh + 1) / 2, tw = (p.ow + 1) / 2, rows = p.n * th;
    // A block's transformed tiles (16 x channels x block values) stay near 2 MB, in cache.
    const int64_t tiles = std::max<int64_t>(32, (int64_t(1) << 15) / std::max(p.cg(), p.kg()));
    block_rows = std::min(rows, std::max<int64_t>(1, tiles / tw));
    block = block_rows * tw;
  }
};

// dst[j] = plane[i][j + off] for j in [0, n), zero outside the rows x cols plane.
template <class T>
void load_row(const T* plane, int64_t rows, int64_t cols, int64_t i, int64_t off, T* dst,
              int64_t n) {
  std::fill(dst, dst + n, T(0));
  const int64_t lo = std::max<int64_t>(0, -off), hi = std::min(n, cols - off);
  if (i >= 0 && i < rows && hi > lo)
    std::copy(plane + i * cols + lo + off, plane + i * cols + hi + off, dst + lo);
}

// V[xi][c][t] = B^T d B for the 4x4 input patches d of tile rows [r0, r0 + nr). Rows of the
// patches are transformed along whole image rows first, so every inner loop runs over tiles.
template <class T>
void transform_inputs(const ConvShape& p, const Tiling& tl, const T* xg, int64_t r0, int64_t nr,
                      T* v) {
  const int64_t cg = p.cg(), wp = 2 * tl.tw + 2, B = tl.block;
#pragma omp parallel
  {
    std::vector<T> u(4 * wp);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < cg; c++)
      for (int64_t r = 0; r < nr; r++) {
        const int64_t n = (r0 + r) / tl.th, h0 = (r0 + r) % tl.th * 2 - p.ph;
        for (int i = 0; i < 4; i++)
          load_row(xg + (n * p.c + c) * p.h * p.w, p.h, p.w, h0 + i, -p.pw, &u[i * wp], wp);
        for (int64_t j = 0; j < wp; j++) V4<T>::load(&u[j], wp).bt().store(&u[j], wp);
        for (int i = 0; i < 4; i++) {
          T* d = v + (4 * i * cg + c) * B + r * tl.tw;
          for (int64_t t = 0; t < tl.tw; t++)
            V4<T>::load(&u[i * wp + 2 * t], 1).bt().store(d + t, cg * B);
        }
      }
  }
}

// dM[xi][k][t] = A dY A^T for the 2x2 output-gradient tiles dY of tile rows [r0, r0 + nr).
template <class T>
void transform_grads(const ConvShape& p, const Tiling& tl, const T* gyg, int64_t r0, int64_t nr,
                     T* dm) {
  const int64_t kg = p.kg(), B = tl.block;
#pragma omp parallel
  {
    std::vector<T> g(4 * tl.tw);
#pragma omp for schedule(static)
    for (int64_t k = 0; k < kg; k++)
      for (int64_t r = 0; r < nr; r++) {
        const int64_t n = (r0 + r) / tl.th, h0 = (r0 + r) % tl.th * 2;
        const T* plane = gyg + (n * p.k + k) * p.oh * p.ow;
        load_row(plane, p.oh, p.ow, h0, 0, &g[0], 2 * tl.tw);
        load_row(plane, p.oh, p.ow, h0 + 1, 0, &g[2 * tl.tw], 2 * tl.tw);
        const T *g0 = &g[0], *g1 = &g[2 * tl.tw];
        T* d = dm + k * B + r * tl.tw;
        for (int64_t t = 0; t < tl.tw; t++) {
          const V4<T> c0 = V4<T>::at_adjoint(g0[2 * t], g1[2 * t]);  // A along the columns
          const V4<T> c1 = V4<T>::at_adjoint(g0[2 * t + 1], g1[2 * t + 1]);
          for (int i = 0; i < 4; i++)
            V4<T>::at_adjoint(c0[i], c1[i]).store(d + t + 4 * i * kg * B, kg * B);
        }
      }
  }
}

// U[xi][k][c] = G w G^T for the filters of one group.
template <class T>
void transform_weights(const ConvShape& p, const T* wg, T* u) {
  const int64_t cg = p.cg(), kg = p.kg();
  for (int64_t k = 0; k < kg; k++)
    for (int64_t c = 0; c < cg; c++) {
      const T* f = wg + (k * cg + c) * 9;
      V4<T> col[3];  // G down the columns, then along the rows
      for (int j = 0; j < 3; j++) col[j] = V4<T>::g3(f[j], f[3 + j], f[6 + j]);
      T* d = u + k * cg + c;
      const int64_t st = kg * cg;
      for (int i = 0; i < 4; i++)
        V4<T>::g3(col[0][i], col[1][i], col[2][i]).store(d + 4 * i * st, st);
    }
}

template <class T>
void forward(const ConvShape& p, const T* x, const T* w, const T* bias, T* y) {
  const Tiling tl(p);
  const int64_t cg = p.cg(), kg = p.kg(), plane = p.oh * p.ow, B = tl.block;
  T *u = scratch<T>(0, 16 * kg * cg), *v = scratch<T>(1, 16 * cg * B),
    *m = scratch<T>(2, 16 * kg * B);
  for (int64_t g = 0; g < p.g; g++) {
    transform_weights(p, w + g * kg * cg * 9, u);
    T* yg = y + g * kg * plane;
    for (int64_t r0 = 0; r0 < tl.rows; r0 += tl.block_rows) {
      const int64_t nr = std::min(tl.block_rows, tl.rows - r0), nt = nr * tl.tw;
      transform_inputs(p, tl, x + g * cg * p.h * p.w, r0, nr, v);
#pragma omp parallel for schedule(dynamic)
      for (int xi = 0; xi < 16; xi++)
        blas_gemm(false, false, kg, nt, cg, T(1), u + xi * kg * cg, cg, v + xi * cg * B, B, T(0),
                  m + xi * kg * B, B);
#pragma omp parallel
      {
        std::vector<T> o(4 * tl.tw);
#pragma omp for schedule(static)
        for (int64_t k = 0; k < kg; k++)
          for (int64_t r = 0; r < nr; r++) {
            const T b = bias ? bias[g * kg + k] : T(0), *mk = m + k * B + r * tl.tw;
            const int64_t MB = kg * B;
            for (int64_t t = 0; t < tl.tw; t++) {  // y = A^T m A
              T s[2][4];
              for (int j = 0; j < 4; j++) {
                const V4<T> col = V4<T>::load(mk + j * MB + t, 4 * MB);
                s[0][j] = col.a + col.b + col.c, s[1][j] = col.b - col.c - col.d;
              }
              for (int i = 0; i < 2; i++) {
                o[i * 2 * tl.tw + 2 * t] = s[i][0] + s[i][1] + s[i][2] + b;
                o[i * 2 * tl.tw + 2 * t + 1] = s[i][1] - s[i][2] - s[i][3] + b;
              }
            }
            const int64_t n = (r0 + r) / tl.th, h0 = (r0 + r) % tl.th * 2;
            for (int i = 0; i < 2 && h0 + i < p.oh; i++)
              std::copy(&o[i * 2 * tl.tw], &o[i * 2 * tl.tw] + p.ow,
                        yg + ((n * p.k + k) * p.oh + h0 + i) * p.ow);
          }
      }
    }
  }
}

template <class T>
void backward_input(const ConvShape& p, const T* gy, const T* w, T* gx) {
  const Tiling tl(p);
  const int64_t cg = p.cg(), kg = p.kg(), hw = p.h * p.w, B = tl.block, wp = 2 * tl.tw + 2;
  T *u = scratch<T>(0, 16 * kg * cg), *dv = scratch<T>(1, 16 * cg * B),
    *dm = scratch<T>(2, 16 * kg * B);
  std::fill(gx, gx + p.n * p.c * hw, T(0));
  for (int64_t g = 0; g < p.g; g++) {
    transform_weights(p, w + g * kg * cg * 9, u);
    for (int64_t r0 = 0; r0 < tl.rows; r0 += tl.block_rows) {
      const int64_t nr = std::min(tl.block_rows, tl.rows - r0), nt = nr * tl.tw;
      transform_grads(p, tl, gy + g * kg * p.oh * p.ow, r0, nr, dm);
#pragma omp parallel for schedule(dynamic)
      for (int xi = 0; xi < 16; xi++)
        blas_gemm(true, false, cg, nt, kg, T(1), u + xi * kg * cg, cg, dm + xi * kg * B, B, T(0),
                  dv + xi * cg * B, B);
        // d = B dV B^T per tile, added onto the overlapping 4x4 patches. One thread per channel
        // walks its tile rows in order, so the overlaps are added race-free.
#pragma omp parallel
      {
        std::vector<T> lo(4 * wp), hi(4 * wp);  // patch columns 0-1 and 2-3 of every tile
#pragma omp for schedule(static)
        for (int64_t c = 0; c < cg; c++)
          for (int64_t r = 0; r < nr; r++) {
            const T* vc = dv + c * B + r * tl.tw;
            const int64_t VB = cg * B;
            for (int64_t t = 0; t < tl.tw; t++) {
              T tt[4][4];  // B applied down the columns, then along the rows
              for (int j = 0; j < 4; j++)
                V4<T>::load(vc + j * VB + t, 4 * VB).bt_adjoint().store(&tt[0][j], 4);
              for (int i = 0; i < 4; i++) {
                const V4<T> d = V4<T>::load(&tt[i][0], 1).bt_adjoint();
                lo[i * wp + 2 * t] = d.a, lo[i * wp + 2 * t + 1] = d.b;
                hi[i * wp + 2 * t + 2] = d.c, hi[i * wp + 2 * t + 3] = d.d;
              }
            }
            const int64_t n = (r0 + r) / tl.th, h0 = (r0 + r) % tl.th * 2 - p.ph;
            T* plane = gx + (n * p.c + g * cg + c) * hw;
            for (int64_t i = 0; i < 4; i++) {
              if (h0 + i < 0 || h0 + i >= p.h) continue;
              T* row = plane + (h0 + i) * p.w;
              const int64_t j0 = std::max<int64_t>(0, p.pw), j1 = std::min(wp, p.w + p.pw);
              for (int64_t j = j0; j < j1; j++)
                row[j - p.pw] +=
                    (j < 2 * tl.tw ? lo[i * wp + j] : T(0)) + (j >= 2 ? hi[i * wp + j] : T(0));
            }
          }
      }
    }
  }
}

template <class T>
void backward_weight(const ConvShape& p, const T* gy, const T* x, T* gw) {
  const Tiling tl(p);
  const int64_t cg = p.cg(), kg = p.kg(), B = tl.block;
  T *du = scratch<T>(0, 16 * kg * cg), *v = scratch<T>(1, 16 * cg * B),
    *dm = scratch<T>(2, 16 * kg * B);
  for (int64_t g = 0; g < p.g; g++) {
    for (int64_t r0 = 0; r0 < tl.rows; r0 += tl.block_rows) {
      const int64_t nr = std::min(tl.block_rows, tl.rows - r0), nt = nr * tl.tw;
      transform_inputs(p, tl, x + g * cg * p.h * p.w, r0, nr, v);
      transform_grads(p, tl, gy + g * kg * p.oh * p.ow, r0, nr, dm);
#pragma omp parallel for schedule(dynamic)
      for (int xi = 0; xi < 16; xi++)
        blas_gemm(false, true, kg, cg, nt, T(1), dm + xi * kg * B, B, v + xi * cg * B, B,
                  T(r0 ? 1 : 0), du + xi * kg * cg, cg);
    }
    T* gwg = gw + g * kg * cg * 9;
    for (int64_t k = 0; k < kg; k++)
      for (int64_t c = 0; c < cg; c++) {
        const T* s = du + k * cg + c;
        T t[12];  // G^T down the columns (3 x 4), then along the rows
        for (int j = 0; j < 4; j++) V4<T>::load(s + j * kg * cg, 4 * kg * cg).g_adjoint(t + j, 4);
        for (int m = 0; m < 3; m++)
          V4<T>::load(t + 4 * m, 1).g_adjoint(gwg + (k * cg + c) * 9 + 3 * m, 1);
      }
  }
}

}  // namespace

UD_CONV_ALGO(conv_winograd)

}  // namespace ud_dense
