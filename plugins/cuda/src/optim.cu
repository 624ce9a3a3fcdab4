/* optim.cu — sgd_update and adam_update: one grid-stride pass over every tensor, in the op's dtype
 * with torch's fused-kernel order of operations; found_inf, grad_scale and state_step are read on
 * the device (a step never synchronizes), the coefficients derived per thread in double. */
#include "device.cuh"

namespace udc {
namespace {

struct OptimArgs {
  Strided<5> sp;           /* param, grad, then momentum_buffer or exp_avg, exp_avg_sq, max */
  const char *inf, *scale, *step; /* one-element float tensors (NULL: absent) */
  int inf64, scale64, step64;
  bool adam, maximize, nesterov, first, use_momentum, keras, decoupled, amsgrad, bias_correction;
  double lr, momentum, dampening, wd, beta1, beta2, eps, step_attr;
};

__device__ __forceinline__ double scalar(const char* p, int is64) {
  return is64 ? *(const double*)p : (double)*(const float*)p;
}

template <class T>
__global__ void k_optim(OptimArgs a) {
  if (a.inf && scalar(a.inf, a.inf64) == 1.0) return; /* torch: found_inf == 1 skips the step */
  const bool has_scale = a.scale != nullptr;
  const T scale = T(has_scale ? scalar(a.scale, a.scale64) : 1.0), wd = T(a.wd);
  const double t = a.step ? scalar(a.step, a.step64) : a.step_attr;
  const double bc1 = a.bias_correction ? 1 - pow(a.beta1, t) : 1.0;
  const T ss = T(a.lr / bc1), bc2s = T(a.bias_correction ? sqrt(1 - pow(a.beta2, t)) : 1.0);
  const T w = T(1 - a.beta1), w1 = T(1) - w, c2 = T(1 - a.beta2), decay = T(1 - a.lr * a.wd);
  const T mom = T(a.momentum), damp1 = T(1 - a.dampening), gain = T(a.keras ? -a.lr : 1.0);
  const T lr = T(a.keras ? -1.0 : a.lr), b1 = T(a.beta1), b2 = T(a.beta2), eps = T(a.eps);
  const bool small = fabs((double)w) < 0.5;
  UDC_GRID_LOOP(i, a.sp.numel) {
    int64_t off[5];
    a.sp.offsets(i, off);
    T* p = (T*)(a.sp.base[0] + off[0]);
    T* g = (T*)(a.sp.base[1] + off[1]);
    T gv = *g;
    if (has_scale) *g = gv = gv / scale;
    if (a.maximize) gv = -gv;
    if (!a.adam) {
      if (a.wd != 0) gv = gv + *p * wd;
      if (a.keras) gv = gv * gain;
      if (a.use_momentum) {
        T* bp = (T*)(a.sp.base[2] + off[2]);
        const T buf = a.first ? gv : *bp * mom + gv * damp1;
        *bp = buf;
        gv = a.nesterov ? gv + buf * mom : buf;
      }
      *p = *p - gv * lr;
      continue;
    }
    T pv = *p;
    if (a.wd != 0) {
      if (a.decoupled) pv = pv * decay;
      else gv = gv + pv * wd;
    }
    T* mp = (T*)(a.sp.base[2] + off[2]);
    T* vp = (T*)(a.sp.base[3] + off[3]);
    T mv = small ? *mp + w * (gv - *mp) : gv - (gv - *mp) * w1; /* torch's lerp */
    *mp = mv;
    T vv = *vp * b2 + c2 * gv * gv;
    *vp = vv;
    if (a.amsgrad) {
      T* xp = (T*)(a.sp.base[4] + off[4]);
      const T x = *xp;
      vv = x != x || vv != vv ? x + vv : (x > vv ? x : vv); /* nan from either side wins */
      *xp = vv;
    }
    if (a.nesterov) mv = mv * b1 + w * gv;
    *p = pv - ss * mv / (sqrt(vv) / bc2s + eps);
  }
}

}  // namespace

UD_Error* launch_optim(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  const bool adam = op.id == UD_OP_ADAM_UPDATE;
  const UD_Tensor* in = a->inputs;
  const int n_state = adam ? 5 : 3;
  const int64_t* strides[5];
  char* base[5];
  int isz[5];
  for (int t = 0; t < 5; t++) { /* absent states read nothing: param's strides, no base */
    const bool here = t < n_state && ud_kit_present(&in[t]);
    strides[t] = here ? in[t].strides : in[0].strides;
    base[t] = here ? data_ptr(in[t]) : nullptr;
    isz[t] = (int)ud_kit_itemsize(in[0].dtype);
  }
  OptimArgs o{};
  o.sp = make_strided<5>(in[0].ndim, in[0].shape, strides, base, isz);
  const int first_scalar = adam ? UD_IN_ADAM_UPDATE_STATE_STEP : UD_IN_SGD_UPDATE_GRAD_SCALE;
  const char** slots[3] = {adam ? &o.step : nullptr, &o.scale, &o.inf};
  int* wide[3] = {&o.step64, &o.scale64, &o.inf64};
  for (int k = adam ? 0 : 1; k < 3; k++) {
    const UD_Tensor& s = in[first_scalar + k - (adam ? 0 : 1)];
    *slots[k] = ud_kit_present(&s) ? data_ptr(s) : nullptr;
    *wide[k] = s.dtype.bits == 64;
  }
  o.adam = adam;
  if (adam) {
    o.lr = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_LR);
    o.beta1 = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_BETA1);
    o.beta2 = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_BETA2);
    o.eps = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_EPS);
    o.wd = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_WEIGHT_DECAY);
    o.decoupled = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_DECOUPLED);
    o.maximize = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_MAXIMIZE);
    o.step_attr = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_STEP);
    o.bias_correction = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_BIAS_CORRECTION);
    o.nesterov = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_NESTEROV);
    o.amsgrad = ud_kit_present(&in[UD_IN_ADAM_UPDATE_MAX_EXP_AVG_SQ]);
  } else {
    o.lr = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_LR);
    o.momentum = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM);
    o.dampening = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_DAMPENING);
    o.wd = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_WEIGHT_DECAY);
    o.nesterov = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_NESTEROV);
    o.maximize = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_MAXIMIZE);
    o.first = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_FIRST_STEP);
    o.keras = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_LR_IN_MOMENTUM);
    o.use_momentum = o.momentum != 0;
  }
  if (!o.sp.numel) return nullptr;
  cudaStream_t s = (cudaStream_t)stream;
  return by_dtype<UD_DTM_FLOAT_GROUP>(in[0].dtype, op.name, [&](auto t) {
    using T = decltype(t);
    /* a few elements per thread: the coefficients (two pow in double) are derived once each */
    k_optim<T><<<blocks_for((o.sp.numel + 7) / 8), kThreads, 0, s>>>(o);
    return launched(op.name);
  });
}

}  // namespace udc
