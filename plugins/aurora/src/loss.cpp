// loss.cpp — nll_loss and mse_loss with their gradients (reductions none, mean, sum).
#include <cstring>

#include "strided.h"

namespace aurora {

namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// One of the op set's choices for the reduction attribute at `idx`.
bool reduction(Check& ck, int idx, int64_t* out) {
  if (!ck.choice(idx)) return false;
  const char* s = ck.args()->attrs[idx].value.s;
  *out = !strcmp(s, "none") ? int64_t(kNone) : !strcmp(s, "mean") ? int64_t(kMean) : int64_t(kSum);
  return true;
}

// Target i of a [N] or [] target tensor of int32 or int64.
inline int64_t target_at(const Tensor& t, int64_t i) {
  int64_t off = t.ndim ? i * t.strides[0] : 0;
  return t.dtype.bits == 32 ? int64_t(t.ptr<int32_t>()[off]) : t.ptr<int64_t>()[off];
}

// Shared checks: logp [N, C] or [C], target [N] or [], weight [C] (of nll_loss or its backward).
bool nll_shapes(Check& ck, bool backward, UD_DType dt) {
  const UD_Tensor &logp = ck.in(backward ? UD_IN_NLL_LOSS_BACKWARD_LOGP : UD_IN_NLL_LOSS_LOGP),
                  &target = ck.in(backward ? UD_IN_NLL_LOSS_BACKWARD_TARGET : UD_IN_NLL_LOSS_TARGET),
                  &weight = ck.in(backward ? UD_IN_NLL_LOSS_BACKWARD_WEIGHT : UD_IN_NLL_LOSS_WEIGHT);
  if (!ck.dtype(logp, "logp", dt) || !ck.ndim(logp, "logp", 1, 2) ||
      !ck.ndim(target, "target", logp.ndim - 1, logp.ndim - 1) ||
      (logp.ndim == 2 && !ck.dim(target, "target", 0, logp.shape[0])))
    return false;
  if (int id = ud_dtype_id(target.dtype); id != DType<int32_t>::id && id != DType<int64_t>::id)
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
    Check ck(a, UD_OP_NLL_LOSS);
    int64_t red;
    const UD_Tensor& loss = ck.out(UD_OUT_NLL_LOSS_LOSS);
    if (!ck.signature() || !nll_shapes(ck, false, ud_of<T>()) || !reduction(ck, UD_ATTR_NLL_LOSS_REDUCTION, &red) ||
        !ck.dtypes(ud_of<T>(), skip_in(UD_IN_NLL_LOSS_TARGET)) ||
        !ck.ndim(ck.out(UD_OUT_NLL_LOSS_TOTAL_WEIGHT), "total_weight", 0, 0))
      return ck.take();
    if (red == kNone ? !ck.same_shape(loss, "loss", ck.in(UD_IN_NLL_LOSS_TARGET), "target") : !ck.ndim(loss, "loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, UD_OP_NLL_LOSS, body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &lp = c.in[UD_IN_NLL_LOSS_LOGP], &t = c.in[UD_IN_NLL_LOSS_TARGET], &w = c.in[UD_IN_NLL_LOSS_WEIGHT];
    int64_t red = c.iparams[0], ignore = c.attrs[UD_ATTR_NLL_LOSS_IGNORE_INDEX].i;
    int64_t n = lp.ndim == 2 ? lp.shape[0] : 1, classes = lp.shape[lp.ndim - 1];
    int64_t rs = lp.ndim == 2 ? lp.strides[0] : 0, cs = lp.strides[lp.ndim - 1];
    if (VESIMresult r = check_targets(k, "nll_loss", t, n, classes, ignore)) return r;
    Tensor& loss = c.out[UD_OUT_NLL_LOSS_LOSS];
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
    *c.out[UD_OUT_NLL_LOSS_TOTAL_WEIGHT].ptr<T>() = T(total);
    return VESIM_SUCCESS;
  }
};

template <class T> struct NllLossBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_NLL_LOSS_BACKWARD);
    int64_t red;
    const UD_Tensor &gl = ck.in(UD_IN_NLL_LOSS_BACKWARD_GRAD_LOSS), &lp = ck.in(UD_IN_NLL_LOSS_BACKWARD_LOGP);
    if (!ck.signature() || !nll_shapes(ck, true, ud_of<T>()) ||
        !reduction(ck, UD_ATTR_NLL_LOSS_BACKWARD_REDUCTION, &red) ||
        !ck.dtypes(ud_of<T>(), skip_in(UD_IN_NLL_LOSS_BACKWARD_TARGET)) ||
        !ck.ndim(ck.in(UD_IN_NLL_LOSS_BACKWARD_TOTAL_WEIGHT), "total_weight", 0, 0) ||
        !ck.same_shape(ck.out(UD_OUT_NLL_LOSS_BACKWARD_GRAD_LOGP), "grad_logp", lp, "logp"))
      return ck.take();
    const UD_Tensor& t = ck.in(UD_IN_NLL_LOSS_BACKWARD_TARGET);
    if (red == kNone ? !ck.same_shape(gl, "grad_loss", t, "target") : !ck.ndim(gl, "grad_loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, UD_OP_NLL_LOSS_BACKWARD, body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &gl = c.in[UD_IN_NLL_LOSS_BACKWARD_GRAD_LOSS], &lp = c.in[UD_IN_NLL_LOSS_BACKWARD_LOGP],
                 &t = c.in[UD_IN_NLL_LOSS_BACKWARD_TARGET], &w = c.in[UD_IN_NLL_LOSS_BACKWARD_WEIGHT];
    int64_t red = c.iparams[0], ignore = c.attrs[UD_ATTR_NLL_LOSS_BACKWARD_IGNORE_INDEX].i;
    int64_t n = lp.ndim == 2 ? lp.shape[0] : 1, classes = lp.shape[lp.ndim - 1];
    if (VESIMresult r = check_targets(k, "nll_loss_backward", t, n, classes, ignore)) return r;
    T* g;
    Tensor& gt = c.out[UD_OUT_NLL_LOSS_BACKWARD_GRAD_LOGP];
    if (VESIMresult r = dense_out(k, gt, &g, true)) return r;
    double total = double(*c.in[UD_IN_NLL_LOSS_BACKWARD_TOTAL_WEIGHT].ptr<T>());
    for (int64_t i = 0; i < n; i++) {
      int64_t ti = target_at(t, i);
      if (ti == ignore) continue;
      double wi = w.present() ? double(w.ptr<T>()[ti * w.strides[0]]) : 1.0;
      double gi = double(gl.ptr<T>()[red == kNone && gl.ndim ? i * gl.strides[0] : 0]);
      if (red == kMean) gi /= total;
      g[i * classes + ti] = T(-wi * gi);
    }
    return store(k, gt, g);
  }
};

template <class T> struct MseLoss {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_MSE_LOSS);
    int64_t red;
    const UD_Tensor &x = ck.in(UD_IN_MSE_LOSS_X), &loss = ck.out(UD_OUT_MSE_LOSS_LOSS);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.same_shape(ck.in(UD_IN_MSE_LOSS_TARGET), "target", x, "x") ||
        !reduction(ck, UD_ATTR_MSE_LOSS_REDUCTION, &red))
      return ck.take();
    if (red == kNone ? !ck.same_shape(loss, "loss", x, "x") : !ck.ndim(loss, "loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, UD_OP_MSE_LOSS, body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    int64_t red = c.iparams[0];
    Tensor &xt = c.in[UD_IN_MSE_LOSS_X], &tt = c.in[UD_IN_MSE_LOSS_TARGET], &loss = c.out[UD_OUT_MSE_LOSS_LOSS];
    auto sq = [](T x, T t) { return T((double(x) - double(t)) * (double(x) - double(t))); };
    if (red == kNone) return map_tensors<T>(k, loss, Types<T, T>{}, c.in, sq);  // (x, target)
    const T *x, *t;
    if (VESIMresult r = dense_in(k, xt, &x)) return r;
    if (VESIMresult r = dense_in(k, tt, &t)) return r;
    int64_t n = xt.numel();
    std::vector<double> part(size_t(vesimDevCores(k)), 0.0);
    VESIMresult r = parallel_chunks(k, n, kGrain, [&](int64_t b, int64_t e, int chunk) {
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = b; i < e; i++) s += (double(x[i]) - double(t[i])) * (double(x[i]) - double(t[i]));
      part[size_t(chunk)] = s;
    });
    double sum = 0;
    for (double p : part) sum += p;
    *loss.ptr<T>() = T(red == kMean ? sum / double(n) : sum);
    return r;
  }
};

template <class T> struct MseLossBackward {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_MSE_LOSS_BACKWARD);
    int64_t red;
    const UD_Tensor &x = ck.in(UD_IN_MSE_LOSS_BACKWARD_X), &gl = ck.in(UD_IN_MSE_LOSS_BACKWARD_GRAD_LOSS);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) ||
        !ck.same_shape(ck.in(UD_IN_MSE_LOSS_BACKWARD_TARGET), "target", x, "x") ||
        !ck.same_shape(ck.out(UD_OUT_MSE_LOSS_BACKWARD_GRAD_X), "grad_x", x, "x") ||
        !reduction(ck, UD_ATTR_MSE_LOSS_BACKWARD_REDUCTION, &red))
      return ck.take();
    if (red == kNone ? !ck.same_shape(gl, "grad_loss", x, "x") : !ck.ndim(gl, "grad_loss", 0, 0))
      return ck.take();
    return launch(a, make_call(a, UD_OP_MSE_LOSS_BACKWARD, body, pack(int64_t(red))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    int64_t red = c.iparams[0], n = c.in[UD_IN_MSE_LOSS_BACKWARD_X].numel();
    Tensor& gx = c.out[UD_OUT_MSE_LOSS_BACKWARD_GRAD_X];
    double norm = red == kMean && n ? 2.0 / double(n) : 2.0;
    if (red == kNone)  // (grad_loss, x, target)
      return map_tensors<T>(k, gx, Types<T, T, T>{}, c.in, [norm](T g, T x, T t) {
        return T(norm * (double(x) - double(t)) * double(g));
      });
    double g = n ? double(*c.in[UD_IN_MSE_LOSS_BACKWARD_GRAD_LOSS].ptr<T>()) : 0.0;
    std::vector<Tensor> xt = {c.in[UD_IN_MSE_LOSS_BACKWARD_X], c.in[UD_IN_MSE_LOSS_BACKWARD_TARGET]};
    return map_tensors<T>(k, gx, Types<T, T>{}, xt, [norm, g](T x, T t) {
      return T(norm * (double(x) - double(t)) * g);
    });
  }
};

const RegisterTypes<NllLoss, float, double> reg_nll(UD_OP_NLL_LOSS);
const RegisterTypes<NllLossBackward, float, double> reg_nllb(UD_OP_NLL_LOSS_BACKWARD);
const RegisterTypes<MseLoss, float, double> reg_mse(UD_OP_MSE_LOSS);
const RegisterTypes<MseLossBackward, float, double> reg_mseb(UD_OP_MSE_LOSS_BACKWARD);

}  // namespace

}  // namespace aurora
