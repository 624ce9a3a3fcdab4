// norm.cpp — batch normalization over x [N, C, ...] per channel, and its gradients.
#include "strided.h"

namespace aurora {

namespace {

// x viewed as [N, C, L]; element (n, c, l) at (n * C + c) * L + l of the dense buffer.
struct Layout {
  int64_t n, c, l;
  int64_t count() const { return n * l; }
};

Layout layout(const Tensor& x) {
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

template <class T> struct BatchNorm {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "batch_norm");
    if (!ck.signature(5, 3, "training:b,momentum:f,eps:f") || !ck.dtypes(DType<T>::ud) ||
        !ck.ndim(ck.in(0), "x", 2, kMaxDims) || !ck.same_shape(ck.out(0), "y", ck.in(0), "x"))
      return ck.take();
    const UD_Tensor& x = ck.in(0);
    int64_t c = x.shape[1];
    if (!channel_vec(ck, ck.in(1), "weight", c) || !channel_vec(ck, ck.in(2), "bias", c) ||
        !channel_vec(ck, ck.in(3), "running_mean", c) || !channel_vec(ck, ck.in(4), "running_var", c) ||
        !channel_vec(ck, ck.out(1), "save_mean", c) || !channel_vec(ck, ck.out(2), "save_invstd", c))
      return ck.take();
    bool training = a->attrs[0].value.b;
    if ((ck.in(3).ndim < 0) != (ck.in(4).ndim < 0))
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: give both running_mean and "
                          "running_var or neither");
    if (!training && ck.in(3).ndim < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: running_mean and running_var are "
                          "required when training is false");
    int64_t numel = ud_kit_numel(&x);
    // one value per channel is valid (variance 0; the unbiased running variance 0 / 0 = nan)
    if (training && numel == 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm: training needs at least one "
                          "value per channel (x has none, C = %lld)", (long long)c);
    return launch(a, make_call(a, "batch_norm", body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &w = c.in[1], &b = c.in[2], &rm = c.in[3], &rv = c.in[4];
    Layout L = layout(c.in[0]);
    bool training = c.attrs[0].i;
    double momentum = c.attrs[1].f, eps = c.attrs[2].f;
    const T* x;
    T *y, *sm = c.out[1].ptr<T>(), *si = c.out[2].ptr<T>();
    if (VESIMresult r = dense_in(k, c.in[0], &x)) return r;
    if (VESIMresult r = dense_out(k, c.out[0], &y, false)) return r;
    const int64_t sms = c.out[1].strides[0], sis = c.out[2].strides[0];
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
          if (rm.present()) {
            T* pm = rm.ptr<T>() + ch * rm.strides[0];
            T* pv = rv.ptr<T>() + ch * rv.strides[0];
            *pm = T((1 - momentum) * double(*pm) + momentum * mean);
            *pv = T((1 - momentum) * double(*pv) +
                    momentum * var * double(L.count()) / double(L.count() - 1));
          }
        } else {
          mean = double(at<T>(rm, ch, T(0)));
          var = double(at<T>(rv, ch, T(1)));
        }
        double invstd = 1.0 / std::sqrt(var + eps);
        double scale = invstd * double(at<T>(w, ch, T(1))), shift = double(at<T>(b, ch, T(0)));
        sm[ch * sms] = T(mean);
        si[ch * sis] = T(invstd);
        for (int64_t n = 0; n < L.n; n++) {
          const T* p = x + (n * L.c + ch) * L.l;
          T* q = y + (n * L.c + ch) * L.l;
#pragma omp simd
          for (int64_t i = 0; i < L.l; i++) q[i] = T((double(p[i]) - mean) * scale + shift);
        }
      }
    });
    return r ? r : store(k, c.out[0], y);
  }
};

template <class T> struct BatchNormBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "batch_norm_backward");
    if (!ck.signature(5, 3, "training:b") || !ck.dtypes(DType<T>::ud) ||
        !ck.ndim(ck.in(1), "x", 2, kMaxDims) || !ck.same_shape(ck.in(0), "grad_y", ck.in(1), "x") ||
        !ck.same_shape(ck.out(0), "grad_x", ck.in(1), "x"))
      return ck.take();
    int64_t c = ck.in(1).shape[1];
    if (ck.in(3).ndim < 0 || ck.in(4).ndim < 0)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "batch_norm_backward: save_mean and save_invstd "
                          "are required");
    if (!channel_vec(ck, ck.in(2), "weight", c) || !channel_vec(ck, ck.in(3), "save_mean", c) ||
        !channel_vec(ck, ck.in(4), "save_invstd", c) || !channel_vec(ck, ck.out(1), "grad_weight", c) ||
        !channel_vec(ck, ck.out(2), "grad_bias", c))
      return ck.take();
    return launch(a, make_call(a, "batch_norm_backward", body));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &w = c.in[2], &sm = c.in[3], &si = c.in[4];
    Layout L = layout(c.in[1]);
    bool training = c.attrs[0].i;
    const T *gy, *x;
    T* gx;
    if (VESIMresult r = dense_in(k, c.in[0], &gy)) return r;
    if (VESIMresult r = dense_in(k, c.in[1], &x)) return r;
    if (VESIMresult r = dense_out(k, c.out[0], &gx, false)) return r;
    Tensor &gw = c.out[1], &gb = c.out[2];
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
        gb.ptr<T>()[ch * gb.strides[0]] = T(sum_gy);
        gw.ptr<T>()[ch * gw.strides[0]] = T(sum_gyx);
        double scale = invstd * double(at<T>(w, ch, T(1)));
        double cnt = double(std::max<int64_t>(L.count(), 1));
        double mgy = training ? sum_gy / cnt : 0, mgyx = training ? sum_gyx / cnt : 0;
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
    return r ? r : store(k, c.out[0], gx);
  }
};

const RegisterTypes<BatchNorm, float, double> reg_bn("batch_norm");
const RegisterTypes<BatchNormBackward, float, double> reg_bnb("batch_norm_backward");

}  // namespace

}  // namespace aurora
