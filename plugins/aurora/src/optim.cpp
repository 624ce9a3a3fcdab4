// optim.cpp — sgd_update and adam_update: the host half checks dtypes and shapes; the device half
// reads found_inf, grad_scale and state_step from device memory, derives the step's coefficients
// in double (torch's fused kernels) and updates every tensor in one pass, in the op's dtype.
#include "aurora.h"

namespace aurora {

namespace {

constexpr int kMaxT = 5;  // tensors of the op's dtype: param, grad and up to three states

double scalar_at(const Tensor& t) {  // a one-element float tensor, on the device
  return t.dtype.bits == 32 ? double(*t.ptr<float>()) : *t.ptr<double>();
}

bool same_layout(const Tensor& a, const Tensor& b) {
  for (int d = 0; d < a.ndim; d++)
    if (a.shape[d] > 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

// Runs f(p, g, s1, s2, s3) on every element: in lockstep over memory when every tensor is
// contiguous with param's layout, else through each view's offsets. Absent tensors get a dummy.
template <class T, class F>
VESIMresult each(VESIMkernel_ctx* k, Call& c, int nt, F f) {
  const Tensor& p = c.in[0];
  T* base[kMaxT];
  bool flat = p.contiguous();
  for (int i = 0; i < kMaxT; i++) {
    base[i] = i < nt && c.in[i].present() ? c.in[i].ptr<T>() : nullptr;
    flat = flat && (!base[i] || same_layout(c.in[i], p));
  }
  return parallel(k, p.numel(), kGrain, [&](int64_t b, int64_t e) {
    T dummy[kMaxT] = {};
    if (flat) {
#pragma omp simd
      for (int64_t i = b; i < e; i++)
        f(base[0][i], base[1][i], base[2] ? base[2][i] : dummy[2], base[3] ? base[3][i] : dummy[3],
          base[4] ? base[4][i] : dummy[4]);
      return;
    }
    for (int64_t i = b; i < e; i++) {
      T* at[kMaxT];
      for (int t = 0; t < kMaxT; t++)
        at[t] = base[t] ? base[t] + offset_of(i, p.ndim, p.shape, c.in[t].strides) : &dummy[t];
      f(*at[0], *at[1], *at[2], *at[3], *at[4]);
    }
  });
}

// The scalars the device reads first: found_inf == 1 skips the step (torch's fused kernels).
struct Amp {
  bool skip, has_scale;
  double scale;
  Amp(const Call& c, int scale_in, int inf_in)
      : skip(c.in[inf_in].present() && scalar_at(c.in[inf_in]) == 1.0),
        has_scale(c.in[scale_in].present()),
        scale(has_scale ? scalar_at(c.in[scale_in]) : 1.0) {}
};

template <class T>
VESIMresult sgd_body(VESIMkernel_ctx* k, Call& c) {
  const Amp amp(c, UD_IN_SGD_UPDATE_GRAD_SCALE, UD_IN_SGD_UPDATE_FOUND_INF);
  if (amp.skip) return VESIM_SUCCESS;
  auto f = [&](int i) { return c.attrs[i].f; };
  auto b = [&](int i) { return c.attrs[i].i != 0; };
  const double lr = f(UD_ATTR_SGD_UPDATE_LR), m = f(UD_ATTR_SGD_UPDATE_MOMENTUM);
  const bool keras = b(UD_ATTR_SGD_UPDATE_LR_IN_MOMENTUM), use_m = m != 0;
  const bool nesterov = b(UD_ATTR_SGD_UPDATE_NESTEROV), maximize = b(UD_ATTR_SGD_UPDATE_MAXIMIZE);
  const bool first = b(UD_ATTR_SGD_UPDATE_FIRST_STEP), has_scale = amp.has_scale;
  const double wd_ = f(UD_ATTR_SGD_UPDATE_WEIGHT_DECAY);
  const T scale = T(amp.scale), wd = T(wd_), mom = T(m), gain = T(keras ? -lr : 1.0);
  const T damp1 = T(1 - f(UD_ATTR_SGD_UPDATE_DAMPENING)), step = T(keras ? -1.0 : lr);
  return each<T>(k, c, use_m ? 3 : 2, [=](T& p, T& g, T& buf, T&, T&) {
    T v = g;
    if (has_scale) g = v = v / scale;
    if (maximize) v = -v;
    if (wd_ != 0) v = v + p * wd;
    if (keras) v = v * gain;
    if (use_m) {
      buf = first ? v : buf * mom + v * damp1;
      v = nesterov ? v + buf * mom : buf;
    }
    p = p - v * step;
  });
}

template <class T>
VESIMresult adam_body(VESIMkernel_ctx* k, Call& c) {
  const Amp amp(c, UD_IN_ADAM_UPDATE_GRAD_SCALE, UD_IN_ADAM_UPDATE_FOUND_INF);
  if (amp.skip) return VESIM_SUCCESS;
  auto f = [&](int i) { return c.attrs[i].f; };
  auto b = [&](int i) { return c.attrs[i].i != 0; };
  const Tensor& st = c.in[UD_IN_ADAM_UPDATE_STATE_STEP];
  const double lr = f(UD_ATTR_ADAM_UPDATE_LR), b1 = f(UD_ATTR_ADAM_UPDATE_BETA1);
  const double b2 = f(UD_ATTR_ADAM_UPDATE_BETA2), wd_ = f(UD_ATTR_ADAM_UPDATE_WEIGHT_DECAY);
  const double t = st.present() ? scalar_at(st) : f(UD_ATTR_ADAM_UPDATE_STEP);
  const bool bc = b(UD_ATTR_ADAM_UPDATE_BIAS_CORRECTION), decoupled = b(UD_ATTR_ADAM_UPDATE_DECOUPLED);
  const bool maximize = b(UD_ATTR_ADAM_UPDATE_MAXIMIZE), nesterov = b(UD_ATTR_ADAM_UPDATE_NESTEROV);
  const bool amsgrad = c.in[UD_IN_ADAM_UPDATE_MAX_EXP_AVG_SQ].present(), has_scale = amp.has_scale;
  const T scale = T(amp.scale), wd = T(wd_), decay = T(1 - lr * wd_), tb1 = T(b1), tb2 = T(b2);
  const T w = T(1 - b1), w1 = T(1) - w, c2 = T(1 - b2), eps = T(f(UD_ATTR_ADAM_UPDATE_EPS));
  const T ss = T(lr / (bc ? 1 - std::pow(b1, t) : 1.0));
  const T bc2s = T(bc ? std::sqrt(1 - std::pow(b2, t)) : 1.0);
  const bool small = std::abs(w) < T(0.5);
  return each<T>(k, c, 5, [=](T& p, T& g, T& m, T& v, T& vmax) {
    T gv = g, pv = p;
    if (has_scale) g = gv = gv / scale;
    if (maximize) gv = -gv;
    if (wd_ != 0) {
      if (decoupled) pv = pv * decay;
      else gv = gv + pv * wd;
    }
    T mv = small ? m + w * (gv - m) : gv - (gv - m) * w1;  // torch's lerp
    m = mv;
    T vv = v * tb2 + c2 * gv * gv;
    v = vv;
    if (amsgrad) vmax = vv = isnan_(vmax) || isnan_(vv) ? vmax + vv : std::max(vmax, vv);
    if (nesterov) mv = mv * tb1 + w * gv;
    p = pv - ss * mv / (std::sqrt(vv) / bc2s + eps);
  });
}

// Host half: tensors of the op's dtype and param's shape, one-element float scalars.
template <class T, int kOp>
struct Step {
  static UD_Error* run(const UD_KernelArgs* a) {
    constexpr bool sgd = kOp == UD_OP_SGD_UPDATE;
    constexpr int nt = sgd ? 3 : 5;
    Check ck(a, kOp);
    if (!ck.signature()) return ck.take();
    const UD_OpInfo* info = ud_op_info(kOp);
    for (int i = 0; i < a->num_inputs && ck.ok(); i++) {
      const UD_Tensor& t = ck.in(i);
      if (t.ndim < 0) continue;
      if (i < nt) {
        if (ck.dtype(t, info->input_names[i], ud_of<T>()))
          ck.same_shape(t, info->input_names[i], ck.in(0), "param");
        continue;
      }
      int id = ud_dtype_id(t.dtype);
      if (id != UD_DT_FLOAT32 && id != UD_DT_FLOAT64)
        ck.fail(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has dtype %s, expected float32 or float64",
                info->name, info->input_names[i], ud_dtype_name(t.dtype));
      else if (ud_kit_numel(&t) != 1)
        ck.fail(UD_ERR_INVALID_ARGUMENT, "%s: '%s' has %lld elements, expected one", info->name,
                info->input_names[i], (long long)ud_kit_numel(&t));
    }
    if (sgd && ck.ok() && ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM) != 0 &&
        ck.in(UD_IN_SGD_UPDATE_MOMENTUM_BUFFER).ndim < 0)
      ck.fail(UD_ERR_INVALID_ARGUMENT, "sgd_update: 'momentum_buffer' is absent, required when "
              "momentum = %g (not 0)", ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM));
    if (!ck.ok()) return ck.take();
    return launch(a, make_call(a, kOp, sgd ? sgd_body<T> : adam_body<T>));
  }
};
template <class T> using Sgd = Step<T, UD_OP_SGD_UPDATE>;
template <class T> using Adam = Step<T, UD_OP_ADAM_UPDATE>;

const RegisterTypes<Sgd, float, double> reg_sgd(UD_OP_SGD_UPDATE);
const RegisterTypes<Adam, float, double> reg_adam(UD_OP_ADAM_UPDATE);

}  // namespace

}  // namespace aurora
