// optim.cpp — torch.optim's fused steps (_fused_sgd_, _fused_adam_, _fused_adamw_, float and
// Tensor lr): one plugin call per parameter (sgd_update / adam_update), every scalar (state_step,
// grad_scale, found_inf) read on the device, so a step never waits for the device. Without the
// plugin's kernel for a dtype the same math runs as torch's device ops (no host copies).
#include <cmath>

#include "aten.h"

namespace unidev_torch {
namespace {

using at::TensorList;

struct Lists {  // the op's name and its tensor lists, checked once per call
  const char* op;
  TensorList params;
  c10::Device dev{kPU1};

  Lists(const char* op_, TensorList p) : op(op_), params(p) {
    if (!p.empty()) dev = p[0].device();
  }
  // `list` holds one tensor per param (or none when `optional`), each on params[0]'s device
  void need(const char* name, TensorList list, bool optional = false) const {
    TORCH_CHECK(list.size() == params.size() || (optional && list.empty()), op, ": ", name,
                " has ", list.size(), " tensors, expected ", params.size(), " (one per param)");
    for (size_t i = 0; i < list.size(); ++i)
      TORCH_CHECK(on_device(list[i]) && list[i].device() == dev, op, ": ", name, "[", i,
                  "] is on ", list[i].defined() ? list[i].device().str() : "no device",
                  ", expected ", dev, " like self[0] (every tensor of a fused step on one device)");
  }
  // the composite path's found_inf: read (it synchronizes) once, when a param first needs it
  bool skip(const OptTensor& found_inf) const {
    if (skip_ < 0) skip_ = found_inf.has_value() && found_inf->item<double>() == 1.0;
    return skip_ == 1;
  }
  mutable int skip_ = -1;
  // a one-element scalar (grad_scale, found_inf) on the device; CPU ones are copied once
  OptTensor scalar(const char* name, const OptTensor& t) const {
    if (!t.has_value() || !t->defined()) return std::nullopt;
    TORCH_CHECK(t->numel() == 1, op, ": ", name, " has ", t->numel(), " elements, expected one");
    return t->device() == dev ? *t : t->to(dev);
  }
};

double lr_value(const char* op, const Tensor& lr) {
  TORCH_CHECK(lr.numel() == 1, op, ": lr has ", lr.numel(), " elements, expected one");
  return lr.item<double>();
}

struct Sgd {
  double wd, momentum, lr, dampening;
  bool nesterov, maximize, first;
};

// torch's fused SGD as device ops: the path for dtypes the plugin has no sgd_update kernel for
void sgd_composite(const Tensor& p, const Tensor& grad, const Tensor* buf, const Sgd& s,
                   const OptTensor& scale) {
  if (scale) grad.div_(*scale);
  Tensor g = s.maximize ? grad.neg() : grad;
  if (s.wd != 0) g = g.add(p, s.wd);
  if (s.momentum != 0) {
    if (s.first) buf->copy_(g);
    else buf->mul_(s.momentum).add_(g, 1 - s.dampening);
    g = s.nesterov ? g.add(*buf, s.momentum) : *buf;
  }
  p.add_(g, -s.lr);
}

void fused_sgd(TensorList self, TensorList grads, TensorList bufs, const Sgd& s,
               const OptTensor& grad_scale, const OptTensor& found_inf) {
  const Lists L("_fused_sgd_", self);
  if (self.empty()) return;
  L.need("self", self);
  L.need("grads", grads);
  L.need("momentum_buffer_list", bufs, s.momentum == 0);
  const OptTensor scale = L.scalar("grad_scale", grad_scale), inf = L.scalar("found_inf", found_inf);
  Attrs at(UD_OP_SGD_UPDATE);
  at.f(UD_ATTR_SGD_UPDATE_LR, s.lr).f(UD_ATTR_SGD_UPDATE_MOMENTUM, s.momentum)
      .f(UD_ATTR_SGD_UPDATE_DAMPENING, s.dampening).f(UD_ATTR_SGD_UPDATE_WEIGHT_DECAY, s.wd)
      .b(UD_ATTR_SGD_UPDATE_NESTEROV, s.nesterov).b(UD_ATTR_SGD_UPDATE_MAXIMIZE, s.maximize)
      .b(UD_ATTR_SGD_UPDATE_FIRST_STEP, s.first);
  for (size_t i = 0; i < self.size(); ++i) {
    const Tensor* buf = s.momentum != 0 ? &bufs[i] : nullptr;
    if (UD_KernelFn fn = kernel(UD_OP_SGD_UPDATE, self[i].scalar_type())) {
      UD_Tensor in[] = {desc(self[i]), desc(grads[i]), buf ? desc(*buf) : absent(),
                        opt_desc(scale), opt_desc(inf)};
      launch(fn, UD_OP_SGD_UPDATE, L.dev.index(), in, 5, nullptr, 0, at);
      continue;
    }
    if (!L.skip(inf)) sgd_composite(self[i], grads[i], buf, s, scale);
  }
}

template <int E>
void k_fused_sgd(TensorList self, TensorList grads, TensorList bufs, double wd, double momentum,
                 double lr, double dampening, bool nesterov, bool maximize, bool first,
                 const OptTensor& grad_scale, const OptTensor& found_inf) {
  fused_sgd(self, grads, bufs, {wd, momentum, lr, dampening, nesterov, maximize, first},
            grad_scale, found_inf);
}

template <int E>
void k_fused_sgd_tensor_lr(TensorList self, TensorList grads, TensorList bufs, double wd,
                           double momentum, const Tensor& lr, double dampening, bool nesterov,
                           bool maximize, bool first, const OptTensor& grad_scale,
                           const OptTensor& found_inf) {
  if (self.empty()) return;
  fused_sgd(self, grads, bufs,
            {wd, momentum, lr_value(ROW, lr), dampening, nesterov, maximize, first}, grad_scale,
            found_inf);
}

struct Adam {
  double lr, beta1, beta2, wd, eps;
  bool amsgrad, maximize, decoupled;
};

// torch's fused Adam/AdamW as device ops (dtypes without an adam_update kernel)
void adam_composite(const Tensor& p, const Tensor& grad, const Tensor& m, const Tensor& v,
                    const Tensor* vmax, const Tensor& step, const Adam& a, const OptTensor& scale) {
  if (scale) grad.div_(*scale);
  Tensor g = a.maximize ? grad.neg() : grad;
  if (a.wd != 0) {
    if (a.decoupled) p.mul_(1 - a.lr * a.wd);
    else g = g.add(p, a.wd);
  }
  const double t = step.item<double>();
  const double bc1 = 1 - std::pow(a.beta1, t), bc2_sqrt = std::sqrt(1 - std::pow(a.beta2, t));
  m.lerp_(g, 1 - a.beta1);
  v.mul_(a.beta2).addcmul_(g, g, 1 - a.beta2);
  if (vmax) vmax->copy_(vmax->maximum(v));
  p.addcdiv_(m, (vmax ? *vmax : v).sqrt().div_(bc2_sqrt).add_(a.eps), -a.lr / bc1);
}

void fused_adam(const char* op, TensorList self, TensorList grads, TensorList exp_avgs,
                TensorList exp_avg_sqs, TensorList max_exp_avg_sqs, TensorList steps,
                const Adam& a, const OptTensor& grad_scale, const OptTensor& found_inf) {
  const Lists L(op, self);
  if (self.empty()) return;
  L.need("self", self);
  L.need("grads", grads);
  L.need("exp_avgs", exp_avgs);
  L.need("exp_avg_sqs", exp_avg_sqs);
  L.need("max_exp_avg_sqs", max_exp_avg_sqs, !a.amsgrad);
  L.need("state_steps", steps);
  const OptTensor scale = L.scalar("grad_scale", grad_scale), inf = L.scalar("found_inf", found_inf);
  Attrs at(UD_OP_ADAM_UPDATE);
  at.f(UD_ATTR_ADAM_UPDATE_LR, a.lr).f(UD_ATTR_ADAM_UPDATE_BETA1, a.beta1)
      .f(UD_ATTR_ADAM_UPDATE_BETA2, a.beta2).f(UD_ATTR_ADAM_UPDATE_EPS, a.eps)
      .f(UD_ATTR_ADAM_UPDATE_WEIGHT_DECAY, a.wd).b(UD_ATTR_ADAM_UPDATE_DECOUPLED, a.decoupled)
      .b(UD_ATTR_ADAM_UPDATE_MAXIMIZE, a.maximize);
  for (size_t i = 0; i < self.size(); ++i) {
    TORCH_CHECK(steps[i].numel() == 1, op, ": state_steps[", i, "] has ", steps[i].numel(),
                " elements, expected one");
    const Tensor* vmax = a.amsgrad ? &max_exp_avg_sqs[i] : nullptr;
    if (UD_KernelFn fn = kernel(UD_OP_ADAM_UPDATE, self[i].scalar_type())) {
      UD_Tensor in[] = {desc(self[i]), desc(grads[i]), desc(exp_avgs[i]), desc(exp_avg_sqs[i]),
                        vmax ? desc(*vmax) : absent(), desc(steps[i]), opt_desc(scale),
                        opt_desc(inf)};
      launch(fn, UD_OP_ADAM_UPDATE, L.dev.index(), in, 8, nullptr, 0, at);
      continue;
    }
    if (!L.skip(inf))
      adam_composite(self[i], grads[i], exp_avgs[i], exp_avg_sqs[i], vmax, steps[i], a, scale);
  }
}

constexpr bool decoupled(const char* aten) { return aten[11] == 'w'; }  // "_fused_adamw_"
static_assert(decoupled("_fused_adamw_") && !decoupled("_fused_adam_"));

template <int E>
void k_fused_adam(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                  TensorList max_exp_avg_sqs, TensorList steps, double lr, double beta1,
                  double beta2, double wd, double eps, bool amsgrad, bool maximize,
                  const OptTensor& grad_scale, const OptTensor& found_inf) {
  fused_adam(ROW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
             {lr, beta1, beta2, wd, eps, amsgrad, maximize, decoupled(ROW)}, grad_scale,
             found_inf);
}

template <int E>
void k_fused_adam_tensor_lr(TensorList self, TensorList grads, TensorList exp_avgs,
                            TensorList exp_avg_sqs, TensorList max_exp_avg_sqs, TensorList steps,
                            const Tensor& lr, double beta1, double beta2, double wd, double eps,
                            bool amsgrad, bool maximize, const OptTensor& grad_scale,
                            const OptTensor& found_inf) {
  if (self.empty()) return;
  fused_adam(ROW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
             {lr_value(ROW, lr), beta1, beta2, wd, eps, amsgrad, maximize, decoupled(ROW)},
             grad_scale, found_inf);
}

}  // namespace

UD_TORCH_REGISTER(UD_TORCH_ROWS_OPTIM)

}  // namespace unidev_torch
