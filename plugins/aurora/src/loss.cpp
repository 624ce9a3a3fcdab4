// loss.cpp — nll_loss and mse_loss with their gradients (reductions none, mean, sum).
#include <cstring>

#include "strided.h"

namespace aurora {

namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

bool reduction(Check& ck, int idx, int64_t* out) {
  const char* s = ck.args()->attrs[idx].value.s;
  *out = !strcmp(s, "none") ? int64_t(kNone) : !strcmp(s, "mean") ? int64_t(kMean)
         : !strcmp(s, "sum") ? int64_t(kSum) : -1;
  if (*out >= 0) return true;
  return ck.fail(UD_ERR_INVALID_ARGUMENT, "attribute 'reduction' = '%s', expected 'none', 'mean' "
                 "or 'sum'", s);
}

bool is_int(UD_DType d) { return d.code == UD_DTYPE_INT && (d.bits == 32 || d.bits == 64) && d.lanes == 1; }

// Target i of a [N] or [] target tensor of int32 or int64.
inline int64_t target_at(const Tensor& t, int64_t i) {
  int64_t off = t.ndim ? i * t.strides[0] : 0;
  return t.dtype.bits == 32 ? int64_t(t.ptr<int32_t>()[off]) : t.ptr<int64_t>()[off];
}

// Shared checks: logp [N, C] or [C], target [N] or [], weight [C].
bool nll_shapes(Check& ck, int lp, UD_DType dt) {
  const UD_Tensor &logp = ck.in(lp), &target = ck.in(lp + 1), &weight = ck.in(lp + 2);
  if (!ck.dtype(logp, "logp", dt) || !ck.ndim(logp, "logp", 1, 2) ||
      !ck.ndim(target, "target", logp.ndim - 1, logp.ndim - 1) ||
      (logp.ndim == 2 && !ck.dim(target, "target", 0, logp.shape[0])))
    return false;
  if (!is_int(target.dtype))
    return ck.fail(UD_ERR_INVALID_ARGUMENT, "'target' has dtype %s, expected int32 or int64",
                   ud_kit_dtype_name(target.dtype));
  if (weight.ndim >= 0 && (!ck.dtype(weight, "weight", dt) || !ck.ndim(weight, "weight", 1, 1) ||
                           !ck.dim(weight, "weight", 0, logp.shape[logp.ndim - 1])))
    return false;
  return true;
}

// Checks every target on the device; returns the error for the first bad one.
VESIMresult check_targets(VESIMkernel_ctx* k, const char* op, const Tensor& t, int64_t n,
                          int64_t classes, int64_t ignore) {
  for (int64_t i = 0; i < n; i++) {
    int64_t v = target_at(t, i);
    if (v != ignore && (v < 0 || v >= classes))
      return vesimDevFail(k, VESIM_ERROR_INVALID_VALUE, "%s: target %lld is outside [0, %lld) and "
                          "is not ignore_index (%lld)", op, (long long)v, (long long)classes,
                          (long long)ignore);
  }
  return VESIM_SUCCESS;
}

template <class T> struct NllLoss {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "nll_loss");
    int64_t red;
    if (!ck.signature(3, 2, "reduction:s,ignore_index:i") || !nll_shapes(ck, 0, DType<T>::ud) ||
        !reduction(ck, 0, &red) || !ck.dtypes(DType<T>::ud, 1 << 1) ||
        !ck.ndim(ck.out(1), "total_weight", 0, 0))
      return ck.take();
    if (red == kNone ? !ck.same_shape(ck.out(0), "loss", ck.in(1), "target") : !ck.ndim(ck.out(0), "loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, "nll_loss", body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &lp = c.in[0], &t = c.in[1], &w = c.in[2];
    int64_t red = c.iparams[0], ignore = c.attrs[1].i;
    int64_t n = lp.ndim == 2 ? lp.shape[0] : 1, classes = lp.shape[lp.ndim - 1];
    int64_t rs = lp.ndim == 2 ? lp.strides[0] : 0, cs = lp.strides[lp.ndim - 1];
    if (VESIMresult r = check_targets(k, "nll_loss", t, n, classes, ignore)) return r;
    Tensor& loss = c.out[0];
    double total = 0, sum = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t ti = target_at(t, i);
      double wi = ti == ignore ? 0.0 : w.present() ? double(w.ptr<T>()[ti * w.strides[0]]) : 1.0;
      double li = ti == ignore ? 0.0 : -wi * double(lp.ptr<T>()[i * rs + ti * cs]);
      total += wi;
      sum += li;
      if (red == kNone) loss.ptr<T>()[loss.ndim ? i * loss.strides[0] : 0] = T(li);
    }
    if (red != kNone) *loss.ptr<T>() = T(red == kMean ? sum / total : sum);
    *c.out[1].ptr<T>() = T(total);
    return VESIM_SUCCESS;
  }
};

template <class T> struct NllLossBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "nll_loss_backward");
    int64_t red;
    if (!ck.signature(5, 1, "reduction:s,ignore_index:i") || !nll_shapes(ck, 1, DType<T>::ud) ||
        !reduction(ck, 0, &red) || !ck.dtypes(DType<T>::ud, 1 << 2) ||
        !ck.ndim(ck.in(4), "total_weight", 0, 0) ||
        !ck.same_shape(ck.out(0), "grad_logp", ck.in(1), "logp"))
      return ck.take();
    if (red == kNone ? !ck.same_shape(ck.in(0), "grad_loss", ck.in(2), "target") : !ck.ndim(ck.in(0), "grad_loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, "nll_loss_backward", body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &gl = c.in[0], &lp = c.in[1], &t = c.in[2], &w = c.in[3];
    int64_t red = c.iparams[0], ignore = c.attrs[1].i;
    int64_t n = lp.ndim == 2 ? lp.shape[0] : 1, classes = lp.shape[lp.ndim - 1];
    if (VESIMresult r = check_targets(k, "nll_loss_backward", t, n, classes, ignore)) return r;
    T* g;
    if (VESIMresult r = dense_out(k, c.out[0], &g, true)) return r;
    double total = double(*c.in[4].ptr<T>());
    for (int64_t i = 0; i < n; i++) {
      int64_t ti = target_at(t, i);
      if (ti == ignore) continue;
      double wi = w.present() ? double(w.ptr<T>()[ti * w.strides[0]]) : 1.0;
      double gi = double(gl.ptr<T>()[red == kNone && gl.ndim ? i * gl.strides[0] : 0]);
      if (red == kMean) gi /= total;
      g[i * classes + ti] = T(-wi * gi);
    }
    return store(k, c.out[0], g);
  }
};

template <class T> struct MseLoss {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "mse_loss");
    int64_t red;
    if (!ck.signature(2, 1, "reduction:s") || !ck.dtypes(DType<T>::ud) ||
        !ck.same_shape(ck.in(1), "target", ck.in(0), "x") || !reduction(ck, 0, &red))
      return ck.take();
    if (red == kNone ? !ck.same_shape(ck.out(0), "loss", ck.in(0), "x") : !ck.ndim(ck.out(0), "loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, "mse_loss", body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    int64_t red = c.iparams[0];
    auto sq = [](T x, T t) { return T((double(x) - double(t)) * (double(x) - double(t))); };
    if (red == kNone) return map_tensors<T>(k, c.out[0], Types<T, T>{}, c.in, sq);
    const T *x, *t;
    if (VESIMresult r = dense_in(k, c.in[0], &x)) return r;
    if (VESIMresult r = dense_in(k, c.in[1], &t)) return r;
    int64_t n = c.in[0].numel();
    std::vector<double> part(size_t(vesimDevCores(k)), 0.0);
    VESIMresult r = parallel_chunks(k, n, kGrain, [&](int64_t b, int64_t e, int chunk) {
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = b; i < e; i++) s += (double(x[i]) - double(t[i])) * (double(x[i]) - double(t[i]));
      part[size_t(chunk)] = s;
    });
    double sum = 0;
    for (double p : part) sum += p;
    *c.out[0].ptr<T>() = T(red == kMean ? sum / double(n) : sum);
    return r;
  }
};

template <class T> struct MseLossBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, "mse_loss_backward");
    int64_t red;
    if (!ck.signature(3, 1, "reduction:s") || !ck.dtypes(DType<T>::ud) ||
        !ck.same_shape(ck.in(2), "target", ck.in(1), "x") ||
        !ck.same_shape(ck.out(0), "grad_x", ck.in(1), "x") || !reduction(ck, 0, &red))
      return ck.take();
    if (red == kNone ? !ck.same_shape(ck.in(0), "grad_loss", ck.in(1), "x") : !ck.ndim(ck.in(0), "grad_loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, "mse_loss_backward", body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    int64_t red = c.iparams[0], n = c.in[1].numel();
    double norm = red == kMean && n ? 2.0 / double(n) : 2.0;
    if (red == kNone)
      return map_tensors<T>(k, c.out[0], Types<T, T, T>{}, c.in, [norm](T g, T x, T t) {
        return T(norm * (double(x) - double(t)) * double(g));
      });
    double g = n ? double(*c.in[0].ptr<T>()) : 0.0;
    std::vector<Tensor> xt = {c.in[1], c.in[2]};
    return map_tensors<T>(k, c.out[0], Types<T, T>{}, xt, [norm, g](T x, T t) {
      return T(norm * (double(x) - double(t)) * g);
    });
  }
};

const RegisterTypes<NllLoss, float, double> reg_nll("nll_loss");
const RegisterTypes<NllLossBackward, float, double> reg_nllb("nll_loss_backward");
const RegisterTypes<MseLoss, float, double> reg_mse("mse_loss");
const RegisterTypes<MseLossBackward, float, double> reg_mseb("mse_loss_backward");

}  // namespace

}  // namespace aurora
