// norm.cc — FusedBatchNormV3 and its gradient on the op set's batch_norm: NHWC/NDHWC tensors as
// channels-first views (no copies). TF's op returns the updated running statistics instead of
// updating them in place: they are computed into its batch_mean/batch_variance outputs.
// reserve_space_1/2 hold the batch mean and (biased) variance as on TF's CPU, so every output
// matches it; the gradient turns the variance back into 1/sqrt(var + eps).
#include "call.h"

namespace udtf {
namespace {

// A 4-D or 5-D tensor of this kernel's data format as an N, C, spatial... view.
Desc channels_first(const Kern* k, const Desc& d) {
  static const int kLast4[4] = {0, 3, 1, 2}, kLast5[5] = {0, 4, 1, 2, 3};
  return k->nchw ? d : d.permuted(d.t.ndim == 4 ? kLast4 : kLast5);
}

bool per_channel(Call& c, const char* what, const Desc& d, int64_t ch) {
  return (d.t.ndim == 1 && d.shape[0] == ch) ||
         c.fail(TF_INVALID_ARGUMENT, std::string(what) + " must be 1-dimensional with " +
                                         std::to_string(ch) + " elements (the input's depth), "
                                         "got " + std::to_string(d.t.ndim) + "-D");
}

Desc channel_output(Call& c, int i, int64_t ch) {
  TF_Tensor* t = c.output(i, TF_FLOAT, {ch});
  return t ? desc(c, t) : absent();
}

// TF CPU gives placeholders for the reserve spaces it does not use: [0] forward, [] backward.
bool placeholder(Call& c, int i, std::vector<int64_t> dims) {
  return c.output(i, TF_FLOAT, dims) != nullptr;
}

// A device scalar of `value` seen as a [ch] vector (stride 0).
Desc scalar(Call& c, double value, int64_t ch) {
  TF_Tensor* t = c.temp(TF_FLOAT, {});
  if (!t) return absent();
  Desc d = desc(c, t);
  c.run(UD_OP_FILL, {}, {&d}, Attrs(UD_OP_FILL).f("value", value));
  return broadcast(d, {ch});
}

void h_batch_norm(Call& c) {
  Desc xin, scale, offset, mean, var;
  if (!c.device_input(0, &xin) || !c.device_input(1, &scale) || !c.device_input(2, &offset) ||
      !c.device_input(3, &mean) || !c.device_input(4, &var))
    return;
  if (xin.t.ndim != 4 && xin.t.ndim != 5)
    return void(c.fail(TF_INVALID_ARGUMENT, "input must be 4 or 5-dimensional, got " +
                                                std::to_string(xin.t.ndim) + "-D"));
  Desc x = channels_first(c.k, xin);
  int64_t ch = x.shape[1];
  // a training step with exponential_avg_factor 1 needs no running statistics (they may be empty)
  bool fresh = c.k->training && c.k->avg_factor == 1.0f;
  if (!per_channel(c, "scale", scale, ch) || !per_channel(c, "offset", offset, ch) ||
      (!fresh && (!per_channel(c, "mean", mean, ch) || !per_channel(c, "variance", var, ch))))
    return;
  TF_Tensor* yt = c.output(0, c.out_type(), dims_of(xin));
  if (!yt) return;
  Desc y = channels_first(c.k, desc(c, yt));
  Desc bm = channel_output(c, 1, ch), bv = channel_output(c, 2, ch);
  Desc saved_mean = channel_output(c, 3, ch), saved_var = channel_output(c, 4, ch);
  if (!c.ok() || !placeholder(c, 5, {0})) return;
  TF_Tensor* t = c.temp(TF_FLOAT, {ch});
  if (!t) return;
  Desc invstd = desc(c, t);
  Attrs a = Attrs(UD_OP_BATCH_NORM).b("training", c.k->training)
                .f("momentum", c.k->avg_factor).f("eps", c.k->epsilon);
  if (!c.k->training) {
    c.run(UD_OP_BATCH_NORM, {&x, &scale, &offset, &mean, &var}, {&y, &saved_mean, &invstd}, a) &&
        c.run(UD_OP_COPY, {&mean}, {&bm}) && c.run(UD_OP_COPY, {&var}, {&bv}) &&
        c.run(UD_OP_COPY, {&var}, {&saved_var});
    return;
  }
  // The outputs start as the old statistics and the kernel updates them in place.
  Attrs zero = Attrs(UD_OP_FILL).f("value", 0.0);
  bool init = fresh ? c.run(UD_OP_FILL, {}, {&bm}, zero) && c.run(UD_OP_FILL, {}, {&bv}, zero)
                    : c.run(UD_OP_COPY, {&mean}, {&bm}) && c.run(UD_OP_COPY, {&var}, {&bv});
  if (!init ||
      !c.run(UD_OP_BATCH_NORM, {&x, &scale, &offset, &bm, &bv}, {&y, &saved_mean, &invstd}, a))
    return;
  // the batch variance 1/invstd^2 - eps (elementwise ops may write their first input)
  Desc eps = scalar(c, c.k->epsilon, ch);
  c.run(UD_OP_MUL, {&invstd, &invstd}, {&saved_var}) &&
      c.run(UD_OP_RECIPROCAL, {&saved_var}, {&saved_var}) &&
      c.run(UD_OP_SUB, {&saved_var, &eps}, {&saved_var});
}

void h_batch_norm_grad(Call& c) {
  Desc gin, xin, scale, saved_mean, saved_var;
  if (!c.device_input(0, &gin) || !c.device_input(1, &xin) || !c.device_input(2, &scale) ||
      !c.device_input(3, &saved_mean) || !c.device_input(4, &saved_var))
    return;
  if ((xin.t.ndim != 4 && xin.t.ndim != 5) || gin.t.ndim != xin.t.ndim ||
      dims_of(gin) != dims_of(xin))
    return void(c.fail(TF_INVALID_ARGUMENT, "x and y_backprop must be 4 or 5-dimensional and of "
                                            "the same shape"));
  Desc x = channels_first(c.k, xin), g = channels_first(c.k, gin);
  int64_t ch = x.shape[1];
  if (!per_channel(c, "scale", scale, ch) ||
      !per_channel(c, "reserve_space_1", saved_mean, ch) ||
      !per_channel(c, "reserve_space_2", saved_var, ch))
    return;
  TF_Tensor* dxt = c.output(0, c.out_type(), dims_of(xin));
  if (!dxt) return;
  Desc dx = channels_first(c.k, desc(c, dxt));
  Desc dscale = channel_output(c, 1, ch), doffset = channel_output(c, 2, ch);
  if (!c.ok() || !placeholder(c, 3, {}) || !placeholder(c, 4, {})) return;
  // reserve_space_2: the batch variance (training) or, from TF's gradient in inference, the
  // population variance
  TF_Tensor* t = c.temp(TF_FLOAT, {ch});
  if (!t) return;
  Desc invstd = desc(c, t), eps = scalar(c, c.k->epsilon, ch);
  if (!c.run(UD_OP_ADD, {&saved_var, &eps}, {&invstd}) || !c.run(UD_OP_RSQRT, {&invstd}, {&invstd}))
    return;
  c.run(UD_OP_BATCH_NORM_BACKWARD, {&g, &x, &scale, &saved_mean, &invstd},
        {&dx, &dscale, &doffset}, Attrs(UD_OP_BATCH_NORM_BACKWARD).b("training", c.k->training));
}

}  // namespace

void register_norm() {
  handler("batch_norm", h_batch_norm);
  handler("batch_norm_grad", h_batch_norm_grad);
}

}  // namespace udtf
