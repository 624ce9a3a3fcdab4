// norm.cpp — batch normalization over x [N, C, ...] per channel, and its gradients, NCHW (a
// channel's values are N runs: the cores take channels) or channels-last (x is a matrix [rows,
// C]: the vector loops run along channels, the cores take blocks of rows and add up their sums).
#include "strided.h"

namespace aurora {

namespace {

// x viewed as [N, C, L]; element (n, c, l) at (n * C + c) * L + l of the dense buffer.
struct Dims {
  int64_t n, c, l;
  int64_t count() const { return n * l; }
};

Dims dims(const Tensor& x) {
  int64_t l = 1;
  for (int d = 2; d < x.ndim; d++) l *= x.shape[d];
  return {x.shape[0], x.shape[1], l};
}

bool channel_vec(Check& ck, const UD_Tensor& t, const char* name, int64_t c) {
  return t.ndim < 0 || (ck.ndim(t, name, 1, 1) && ck.dim(t, name, 0, c));
}

template <class T> inline T at(const Tensor& v, int64_t i, T fallback) {
  return v.present() ? v.ptr<T>()[i * v.strides[0]] : fallback;
}

// Channels-last: out[j * c + ch] (j < width) = the sums add(row, acc) accumulates over `rows`
// rows, each core into its own acc first.
template <class F>
VESIMresult channel_sums(VESIMkernel_ctx* k, int64_t rows, int64_t c, int64_t width, double* out, F&& add) {
  const int64_t cores = vesimDevCores(k), per = width * c;
  double* part = static_cast<double*>(vesimDevScratch(k, uint64_t(cores * per + 1) * sizeof(double)));
  if (!part) return VESIM_ERROR_OUT_OF_MEMORY;
  std::fill_n(part, cores * per, 0.0);
  VESIMresult r = parallel_chunks(k, rows, 16, [&](int64_t b, int64_t e, int chunk) {
    for (int64_t m = b; m < e; m++) add(m, part + chunk * per);
  });
  std::fill_n(out, per, 0.0);
  for (int64_t i = 0; i < cores * per; i++) out[i % per] += part[i];
  return r;
}

// Channels-last: f(row) for every row of x [rows, C], spread over the cores.
template <class F> VESIMresult each_row(VESIMkernel_ctx* k, int64_t rows, F&& f) {
  return parallel(k, rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; m++) f(m);
  });
}

double* doubles(VESIMkernel_ctx* k, int64_t n) {
  return static_cast<double*>(vesimDevScratch(k, uint64_t(n + 1) * sizeof(double)));
}

template <class T> struct BatchNorm {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_BATCH_NORM);
    const UD_Tensor &x = ck.in(UD_IN_BATCH_NORM_X), &rm = ck.in(UD_IN_BATCH_NORM_RUNNING_MEAN),
                    &rv = ck.in(UD_IN_BATCH_NORM_RUNNING_VAR);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(x, "x", 2, kMaxDims) ||
        !ck.same_shape(ck.out(UD_OUT_BATCH_NORM_Y), "y", x, "x"))
      return ck.take();
    int64_t c = x.shape[1];
    const UD_Tensor &sm = ck.out(UD_OUT_BATCH_NORM_SAVE_MEAN), &si = ck.out(UD_OUT_BATCH_NORM_SAVE_INVSTD);
    if (!channel_vec(ck, ck.in(UD_IN_BATCH_NORM_WEIGHT), "weight", c) ||
        !channel_vec(ck, ck.in(UD_IN_BATCH_NORM_BIAS), "bias", c) || !channel_vec(ck, rm, "running_mean", c) ||
        !channel_vec(ck, rv, "running_var", c) || !channel_vec(ck, sm, "save_mean", c) ||
        !channel_vec(ck, si, "save_invstd", c))
      return ck.take();
    bool training = ud_kit_attr_bool(a, UD_ATTR_BATCH_NORM_TRAINING);
    if ((rm.ndim < 0) != (rv.ndim < 0))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: give both running_mean and "
                          "running_var or neither");
    if (!training && rm.ndim < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: running_mean and running_var are "
                          "required when training is false");
    int64_t numel = ud_kit_numel(&x);
    // one value per channel is valid (variance 0; the unbiased running variance 0 / 0 = nan)
    if (training && numel == 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: training needs at least one "
                          "value per channel (x has none, C = %lld)", (long long)c);
    const int64_t lay = choose_layout(a, {UD_IN_BATCH_NORM_X}, {UD_OUT_BATCH_NORM_Y});
    return launch(a, make_call(a, UD_OP_BATCH_NORM, body, pack(lay)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &w = c.in[UD_IN_BATCH_NORM_WEIGHT], &b = c.in[UD_IN_BATCH_NORM_BIAS],
                 &rm = c.in[UD_IN_BATCH_NORM_RUNNING_MEAN], &rv = c.in[UD_IN_BATCH_NORM_RUNNING_VAR];
    Tensor &xt = c.in[UD_IN_BATCH_NORM_X], &yt = c.out[UD_OUT_BATCH_NORM_Y];
    const Tensor &smt = c.out[UD_OUT_BATCH_NORM_SAVE_MEAN], &sit = c.out[UD_OUT_BATCH_NORM_SAVE_INVSTD];
    Dims L = dims(xt);
    bool training = c.attrs[UD_ATTR_BATCH_NORM_TRAINING].i;
    double momentum = c.attrs[UD_ATTR_BATCH_NORM_MOMENTUM].f, eps = c.attrs[UD_ATTR_BATCH_NORM_EPS].f;
    const Layout lay = Layout(unpack<int64_t>(c));
    const T* x;
    T *y, *sm = smt.ptr<T>(), *si = sit.ptr<T>();
    if (VESIMresult r = dense_in(k, xt, &x, lay)) return r;
    if (VESIMresult r = dense_out(k, yt, &y, false, lay)) return r;
    const int64_t sms = smt.strides[0], sis = sit.strides[0];
    // channel ch's statistics done: the running ones updated, the saved ones written
    auto finish = [&](int64_t ch, double mean, double var, double* scale, double* shift) {
      if (training && rm.present()) {
        T* pm = rm.ptr<T>() + ch * rm.strides[0];
        T* pv = rv.ptr<T>() + ch * rv.strides[0];
        *pm = T((1 - momentum) * double(*pm) + momentum * mean);
        *pv = T((1 - momentum) * double(*pv) + momentum * var * double(L.count()) / double(L.count() - 1));
      }
      double invstd = 1.0 / std::sqrt(var + eps);
      *scale = invstd * double(at<T>(w, ch, T(1)));
      *shift = double(at<T>(b, ch, T(0)));
      sm[ch * sms] = T(mean);
      si[ch * sis] = T(invstd);
    };
    if (lay == kNHWC) {
      const int64_t rows = L.count(), C = L.c;
      double *mean = doubles(k, 4 * C), *var = mean + C, *scale = var + C, *shift = scale + C;
      if (!mean) return VESIM_ERROR_OUT_OF_MEMORY;
      VESIMresult r = VESIM_SUCCESS;
      if (training) {
        r = channel_sums(k, rows, C, 1, mean, [&](int64_t m, double* acc) {
          const T* p = x + m * C;
#pragma omp simd
          for (int64_t ch = 0; ch < C; ch++) acc[ch] += double(p[ch]);
        });
        for (int64_t ch = 0; ch < C; ch++) mean[ch] /= double(rows);
        if (!r) r = channel_sums(k, rows, C, 1, var, [&](int64_t m, double* acc) {
          const T* p = x + m * C;
#pragma omp simd
          for (int64_t ch = 0; ch < C; ch++) acc[ch] += (double(p[ch]) - mean[ch]) * (double(p[ch]) - mean[ch]);
        });
        for (int64_t ch = 0; ch < C; ch++) var[ch] /= double(rows);
      } else {
        for (int64_t ch = 0; ch < C; ch++) mean[ch] = double(at<T>(rm, ch, T(0))), var[ch] = double(at<T>(rv, ch, T(1)));
      }
      for (int64_t ch = 0; ch < C && !r; ch++) finish(ch, mean[ch], var[ch], scale + ch, shift + ch);
      if (!r) r = each_row(k, rows, [&](int64_t m) {
        const T* p = x + m * C;
        T* q = y + m * C;
#pragma omp simd
        for (int64_t ch = 0; ch < C; ch++) q[ch] = T((double(p[ch]) - mean[ch]) * scale[ch] + shift[ch]);
      });
      return r ? r : store(k, yt, y, lay);
    }
    VESIMresult r = parallel(k, L.c, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t ch = cb; ch < ce; ch++) {
        double mean, var;
        if (training) {
          double s = 0, ss = 0;
          for (int64_t n = 0; n < L.n; n++) {
            const T* p = x + (n * L.c + ch) * L.l;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < L.l; i++) s += double(p[i]);
          }
          mean = s / double(L.count());
          for (int64_t n = 0; n < L.n; n++) {
            const T* p = x + (n * L.c + ch) * L.l;
#pragma omp simd reduction(+ : ss)
            for (int64_t i = 0; i < L.l; i++) ss += (double(p[i]) - mean) * (double(p[i]) - mean);
          }
          var = ss / double(L.count());
        } else {
          mean = double(at<T>(rm, ch, T(0)));
          var = double(at<T>(rv, ch, T(1)));
        }
        double scale, shift;
        finish(ch, mean, var, &scale, &shift);
        for (int64_t n = 0; n < L.n; n++) {
          const T* p = x + (n * L.c + ch) * L.l;
          T* q = y + (n * L.c + ch) * L.l;
#pragma omp simd
          for (int64_t i = 0; i < L.l; i++) q[i] = T((double(p[i]) - mean) * scale + shift);
        }
      }
    });
    return r ? r : store(k, yt, y);
  }
};

template <class T> struct BatchNormBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_BATCH_NORM_BACKWARD);
    const UD_Tensor &x = ck.in(UD_IN_BATCH_NORM_BACKWARD_X), &sm = ck.in(UD_IN_BATCH_NORM_BACKWARD_SAVE_MEAN),
                    &si = ck.in(UD_IN_BATCH_NORM_BACKWARD_SAVE_INVSTD);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(x, "x", 2, kMaxDims) ||
        !ck.same_shape(ck.in(UD_IN_BATCH_NORM_BACKWARD_GRAD_Y), "grad_y", x, "x") ||
        !ck.same_shape(ck.out(UD_OUT_BATCH_NORM_BACKWARD_GRAD_X), "grad_x", x, "x"))
      return ck.take();
    int64_t c = x.shape[1];
    if (sm.ndim < 0 || si.ndim < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm_backward: save_mean and save_invstd "
                          "are required");
    const UD_Tensor &gw = ck.out(UD_OUT_BATCH_NORM_BACKWARD_GRAD_WEIGHT), &gb = ck.out(UD_OUT_BATCH_NORM_BACKWARD_GRAD_BIAS);
    if (!channel_vec(ck, ck.in(UD_IN_BATCH_NORM_BACKWARD_WEIGHT), "weight", c) || !channel_vec(ck, sm, "save_mean", c) ||
        !channel_vec(ck, si, "save_invstd", c) || !channel_vec(ck, gw, "grad_weight", c) || !channel_vec(ck, gb, "grad_bias", c))
      return ck.take();
    const int64_t lay = choose_layout(a, {UD_IN_BATCH_NORM_BACKWARD_GRAD_Y, UD_IN_BATCH_NORM_BACKWARD_X},
                                      {UD_OUT_BATCH_NORM_BACKWARD_GRAD_X});
    return launch(a, make_call(a, UD_OP_BATCH_NORM_BACKWARD, body, pack(lay)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &w = c.in[UD_IN_BATCH_NORM_BACKWARD_WEIGHT], &sm = c.in[UD_IN_BATCH_NORM_BACKWARD_SAVE_MEAN],
                 &si = c.in[UD_IN_BATCH_NORM_BACKWARD_SAVE_INVSTD];
    Tensor& gxt = c.out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_X];
    Dims L = dims(c.in[UD_IN_BATCH_NORM_BACKWARD_X]);
    bool training = c.attrs[UD_ATTR_BATCH_NORM_BACKWARD_TRAINING].i;
    const Layout lay = Layout(unpack<int64_t>(c));
    const T *gy, *x;
    T* gx;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_BATCH_NORM_BACKWARD_GRAD_Y], &gy, lay)) return r;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_BATCH_NORM_BACKWARD_X], &x, lay)) return r;
    if (VESIMresult r = dense_out(k, gxt, &gx, false, lay)) return r;
    Tensor &gw = c.out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_WEIGHT], &gb = c.out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_BIAS];
    const double cnt = double(std::max<int64_t>(L.count(), 1));
    // channel ch's sums done: the weight and bias gradients written; grad_x's coefficients
    auto finish = [&](int64_t ch, double sum_gy, double sum_gyx, double* scale, double* mgy, double* mgyx) {
      gb.ptr<T>()[ch * gb.strides[0]] = T(sum_gy);
      gw.ptr<T>()[ch * gw.strides[0]] = T(sum_gyx);
      *scale = double(at<T>(si, ch, T(1))) * double(at<T>(w, ch, T(1)));
      *mgy = training ? sum_gy / cnt : 0;
      *mgyx = training ? sum_gyx / cnt : 0;
    };
    if (lay == kNHWC) {
      const int64_t rows = L.count(), C = L.c;
      double *mean = doubles(k, 7 * C), *invstd = mean + C, *sums = invstd + C, *scale = sums + 2 * C,
             *mgy = scale + C, *mgyx = mgy + C;
      if (!mean) return VESIM_ERROR_OUT_OF_MEMORY;
      for (int64_t ch = 0; ch < C; ch++) mean[ch] = double(at<T>(sm, ch, T(0))), invstd[ch] = double(at<T>(si, ch, T(1)));
      VESIMresult r = channel_sums(k, rows, C, 2, sums, [&](int64_t m, double* acc) {
        const T *g = gy + m * C, *p = x + m * C;
#pragma omp simd
        for (int64_t ch = 0; ch < C; ch++) {
          acc[ch] += double(g[ch]);
          acc[C + ch] += double(g[ch]) * (double(p[ch]) - mean[ch]) * invstd[ch];
        }
      });
      for (int64_t ch = 0; ch < C && !r; ch++) finish(ch, sums[ch], sums[C + ch], scale + ch, mgy + ch, mgyx + ch);
      if (!r) r = each_row(k, rows, [&](int64_t m) {
        const T *g = gy + m * C, *p = x + m * C;
        T* q = gx + m * C;
#pragma omp simd
        for (int64_t ch = 0; ch < C; ch++) {
          const double xhat = (double(p[ch]) - mean[ch]) * invstd[ch];
          q[ch] = T(scale[ch] * (double(g[ch]) - mgy[ch] - xhat * mgyx[ch]));
        }
      });
      return r ? r : store(k, gxt, gx, lay);
    }
    VESIMresult r = parallel(k, L.c, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t ch = cb; ch < ce; ch++) {
        double mean = double(at<T>(sm, ch, T(0))), invstd = double(at<T>(si, ch, T(1)));
        double sum_gy = 0, sum_gyx = 0;
        for (int64_t n = 0; n < L.n; n++) {
          const T *g = gy + (n * L.c + ch) * L.l, *p = x + (n * L.c + ch) * L.l;
#pragma omp simd reduction(+ : sum_gy, sum_gyx)
          for (int64_t i = 0; i < L.l; i++) {
            sum_gy += double(g[i]);
            sum_gyx += double(g[i]) * (double(p[i]) - mean) * invstd;
          }
        }
        double scale, mgy, mgyx;
        finish(ch, sum_gy, sum_gyx, &scale, &mgy, &mgyx);
        for (int64_t n = 0; n < L.n; n++) {
          const T *g = gy + (n * L.c + ch) * L.l, *p = x + (n * L.c + ch) * L.l;
          T* q = gx + (n * L.c + ch) * L.l;
#pragma omp simd
          for (int64_t i = 0; i < L.l; i++) {
            double xhat = (double(p[i]) - mean) * invstd;
            q[i] = T(scale * (double(g[i]) - mgy - xhat * mgyx));
          }
        }
      }
    });
    return r ? r : store(k, gxt, gx);
  }
};

const RegisterTypes<BatchNorm, float, double> reg_bn(UD_OP_BATCH_NORM);
const RegisterTypes<BatchNormBackward, float, double> reg_bnb(UD_OP_BATCH_NORM_BACKWARD);

}  // namespace

}  // namespace aurora
