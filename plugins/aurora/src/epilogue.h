// epilogue.h — the fused ops' epilogue (tier 4): y = act(y + bias + residual), applied to an
// output tile right after the GEMM or convolution loop wrote it (still in cache), computed in
// double and rounded once to the dtype.
#pragma once

#include "blas.h"

namespace aurora {

// What conv2d_bias_act adds to conv2d: a residual at the output's offsets (dense in the layout
// the call computes in) and an activation (a UD_ActivationId).
template <class T> struct Epi {
  const T* res = nullptr;
  int64_t act = UD_ACT_NONE;
  bool active() const { return res || act != UD_ACT_NONE; }
};

// f(g) with g the activation `act` on doubles: one instance per activation, so that the tile
// loops have no branch per element. Each is the op set's program operator of that name.
template <class F> void with_activation(int64_t act, F&& f) {
  switch (act) {
#define UD_ACT_CASE_(ID) \
  case UD_ACT_##ID: return f([](double v) { return ud_kit_program_op_f64(UD_PROG_##ID, v, 0, 0); });
    UD_ACT_CASE_(RELU) UD_ACT_CASE_(GELU) UD_ACT_CASE_(GELU_TANH) UD_ACT_CASE_(SIGMOID)
    UD_ACT_CASE_(TANH) UD_ACT_CASE_(SILU)
#undef UD_ACT_CASE_
    default: return f([](double v) { return v; });
  }
}

// y = act(y + brow[i] + bcol[j] + res) over the tile y (res: a tile of y's shape or res.p NULL;
// either bias may be NULL).
template <class T>
void epilogue(int64_t act, Mat<T> y, Mat<const T> res, const T* brow, const T* bcol) {
  with_activation(act, [&](auto f) {
    for (int64_t i = 0; i < y.rows; i++) {
      T* yr = y.p + i * y.rs;
      const T* rr = res.p ? res.p + i * res.rs : nullptr;
      const double bi = brow ? double(brow[i]) : 0.0;
#pragma omp simd
      for (int64_t j = 0; j < y.cols; j++)
        yr[j * y.cs] = T(f(double(yr[j * y.cs]) + bi + (bcol ? double(bcol[j]) : 0.0) +
                           (rr ? double(rr[j * res.cs]) : 0.0)));
    }
  });
}

// The same for a dense tile of `rows` runs of `cols` values, `ld` apart, at element `off` of
// y (and of the residual).
template <class T>
void epilogue(const Epi<T>& e, T* y, int64_t off, int64_t rows, int64_t cols, int64_t ld,
              const T* brow, const T* bcol) {
  epilogue<T>(e.act, {y + off, rows, cols, ld, 1}, {e.res ? e.res + off : nullptr, rows, cols, ld, 1}, brow, bcol);
}

}  // namespace aurora
