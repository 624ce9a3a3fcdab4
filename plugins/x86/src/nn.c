/* nn.c — batch norm (forward, backward), nll loss and mse loss (forward, backward).
 * Batch norm works channel by channel: the other dimensions of each channel are collapsed into
 * rows that ISPC reduces (moments, gradient sums in double) and rewrites (one affine map). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise_ispc.h"
#include "nn_ispc.h"
#include "x86.h"

#define UD_GRAIN (1 << 15)

/* Element i of a 0-d or 1-d tensor: float32/float64 as double, int32/int64 as int64. */
static char* at(const UD_Tensor* t, int64_t i) {
  return (char*)ud_x86_ptr(t) + (t->ndim ? i * t->strides[0] : 0) * (t->dtype.bits / 8);
}
static double get_f(const UD_Tensor* t, int64_t i) {
  return t->dtype.bits == 32 ? *(const float*)at(t, i) : *(const double*)at(t, i);
}
static void set_f(const UD_Tensor* t, int64_t i, double v) {
  if (t->dtype.bits == 32)
    *(float*)at(t, i) = (float)v;
  else
    *(double*)at(t, i) = v;
}
static int64_t get_i(const UD_Tensor* t, int64_t i) {
  return t->dtype.bits == 32 ? *(const int32_t*)at(t, i) : *(const int64_t*)at(t, i);
}
/* Row i of a [N, C] tensor (or the [C] tensor itself) as a 1-d view. */
static UD_Tensor row_of(const UD_Tensor* t, int64_t i) {
  UD_Tensor r = *t;
  r.ndim = 1;
  r.strides = &t->strides[t->ndim - 1];
  if (t->ndim == 2) r.byte_offset += (uint64_t)(i * t->strides[0] * (t->dtype.bits / 8));
  return r;
}

/* ---- batch norm ---- */
typedef struct {
  const UD_KernelArgs* a;
  int backward, training, f32, nd, nv;
  int64_t count, shape[UD_KIT_MAX_DIMS], str[3][UD_KIT_MAX_DIMS]; /* one channel, collapsed */
  double momentum, eps;
} Bn;

/* View v of channel c (forward: y, x; backward: grad_x, grad_y, x), row r. */
static char* bn_row(const Bn* B, int v, int64_t c, int64_t r) {
  const UD_Tensor* t = v == 0 ? &B->a->outputs[0] : &B->a->inputs[v - 1];
  const int64_t off = c * t->strides[1] + ud_x86_offset(r, B->nd - 1, B->shape, B->str[v]);
  return (char*)ud_x86_ptr(t) + off * (t->dtype.bits / 8);
}

static void bn_task(void* ctx, int64_t begin, int64_t end) {
  const Bn* B = ctx;
  const UD_Tensor *in = B->a->inputs, *out = B->a->outputs;
  int64_t rows = 1;
  for (int k = 0; k < B->nd - 1; k++) rows *= B->shape[k];
  const int64_t n = B->shape[B->nd - 1];
  const int64_t s0 = B->str[0][B->nd - 1], s1 = B->str[1][B->nd - 1], s2 = B->str[2][B->nd - 1];
  for (int64_t c = begin; c < end; c++) {
    const UD_Tensor* weight = &in[B->backward ? 2 : 1];
    const double w = weight->ndim >= 0 ? get_f(weight, c) : 1.0;
    double mean, invstd, sums[2] = {0, 0};
    if (!B->backward && B->training) {
      /* moments about the channel's first value: no cancellation when |mean| >> std (a
       * non-finite first value would make every difference nan: then about 0) */
      const char* first = bn_row(B, 1, c, 0);
      double shift = B->f32 ? (double)*(const float*)first : *(const double*)first;
      if (!isfinite(shift)) shift = 0;
      for (int64_t r = 0; r < rows; r++)
        (B->f32 ? ud_bn_moments_f32 : ud_bn_moments_f64)(n, bn_row(B, 1, c, r), s1, shift, sums);
      const double d = sums[0] / (double)B->count;
      const double v = sums[1] / (double)B->count - d * d, var = v < 0 ? 0 : v; /* nan stays */
      mean = shift + d;
      invstd = 1.0 / sqrt(var + B->eps);
      if (in[3].ndim >= 0) {
        /* one value per channel: 0 / 0 = nan, as torch */
        const double m = B->momentum, unbiased = var * (double)B->count / (double)(B->count - 1);
        set_f(&in[3], c, (1 - m) * get_f(&in[3], c) + m * mean);
        set_f(&in[4], c, (1 - m) * get_f(&in[4], c) + m * unbiased);
      }
    } else if (!B->backward) {
      mean = get_f(&in[3], c);
      invstd = 1.0 / sqrt(get_f(&in[4], c) + B->eps);
    } else {
      mean = get_f(&in[3], c);
      invstd = get_f(&in[4], c);
      for (int64_t r = 0; r < rows; r++)
        (B->f32 ? ud_bn_grad_sums_f32 : ud_bn_grad_sums_f64)(n, bn_row(B, 1, c, r), s1,
                                                             bn_row(B, 2, c, r), s2, mean, sums);
    }
    /* forward: y = a (x - mean) + k; backward: grad_x = a grad_y + b (x - mean) + k. x - mean
     * first: a x - a mean cancels when invstd is large (one value per channel: 1/sqrt(eps)) */
    double a = invstd * w, b = 0, k;
    if (!B->backward) {
      set_f(&out[1], c, mean);
      set_f(&out[2], c, invstd);
      k = in[2].ndim >= 0 ? get_f(&in[2], c) : 0.0;
    } else {
      set_f(&out[1], c, sums[1] * invstd);
      set_f(&out[2], c, sums[0]);
      b = B->training ? -a * invstd * sums[1] * invstd / (double)B->count : 0.0;
      k = B->training ? -a * sums[0] / (double)B->count : 0.0;
    }
    /* ud_bn_affine: o = p (u - m) + q v + k, v unread when NULL (0 * inf would be nan) */
    const int train_bw = B->backward && B->training, uv = train_bw ? 2 : 1;
    for (int64_t r = 0; r < rows; r++)
      (B->f32 ? ud_bn_affine_f32 : ud_bn_affine_f64)(
          n, bn_row(B, 0, c, r), s0, bn_row(B, uv, c, r), B->str[uv][B->nd - 1],
          train_bw ? bn_row(B, 1, c, r) : NULL, s1, train_bw ? b : a,
          B->backward && !B->training ? 0.0 : mean, a, k);
  }
}

static UD_Error* check_channel(const char* op, const char* arg, const UD_Tensor* t, int64_t c,
                               UD_DType dt, int optional) {
  if (t->ndim == -1 && optional) return NULL;
  UD_TRY(ud_kit_check_dtype(op, arg, t, dt));
  UD_REQUIRE(t->ndim == 1 && t->shape[0] == c, "%s: '%s' must have shape [%lld]", op, arg,
             (long long)c);
  return NULL;
}

static UD_Error* bn_kernel(const char* op, const UD_KernelArgs* a, int backward) {
  static const char* names[2][8] = {
      {"x", "weight", "bias", "running_mean", "running_var", "y", "save_mean", "save_invstd"},
      {"grad_y", "x", "weight", "save_mean", "save_invstd", "grad_x", "grad_weight", "grad_bias"}};
  Bn B = {.a = a, .backward = backward, .nv = backward ? 3 : 2};
  int dt;
  UD_TRY(ud_x86_check_args(op, a, 5, 3, backward ? "b" : "bff"));
  const UD_Tensor* x = &a->inputs[backward];
  UD_TRY(ud_x86_check_dt(op, "x", x, UD_FLOAT_SET, &dt));
  UD_REQUIRE(x->ndim >= 2, "%s: 'x' has ndim %d, expected [N, C, ...]", op, x->ndim);
  const int64_t c = x->shape[1];
  for (int i = 0; i < 8; i++) {
    const UD_Tensor* t = i < 5 ? &a->inputs[i] : &a->outputs[i - 5];
    if (i == 0 || i == 5 || (backward && i == 1)) {
      UD_TRY(ud_kit_check_dtype(op, names[backward][i], t, x->dtype));
      UD_TRY(ud_kit_check_same_shape(op, names[backward][i], t, x));
    } else {
      UD_TRY(check_channel(op, names[backward][i], t, c, x->dtype, i < 5 && (!backward || i == 2)));
    }
  }
  B.training = a->attrs[0].value.b;
  B.f32 = dt == UD_F32;
  B.count = c ? ud_kit_numel(x) / c : 0;
  if (!backward) {
    B.momentum = a->attrs[1].value.f;
    B.eps = a->attrs[2].value.f;
    UD_REQUIRE((a->inputs[3].ndim >= 0) == (a->inputs[4].ndim >= 0),
               "%s: give both 'running_mean' and 'running_var' or neither", op);
    UD_REQUIRE(!B.training || B.count > 0,
               "%s: training needs at least one value per channel, 'x' has none", op);
    UD_REQUIRE(B.training || a->inputs[3].ndim >= 0,
               "%s: 'running_mean' and 'running_var' are required when training is False", op);
  }
  if (B.count == 0) B.count = 1; /* an empty batch: the channels still write their statistics */
  const UD_Tensor* views[3] = {&a->outputs[0], &a->inputs[0], &a->inputs[1]};
  B.nd = ud_x86_collapse_views(B.nv, views, 1u << 1, B.shape, B.str); /* all but the channels */
  ud_x86_parallel(c, UD_GRAIN / (B.count + 1) + 1, bn_task, &B);
  return NULL;
}


/* ---- losses ---- */
static UD_Error* reduction(const char* op, const UD_KernelArgs* a, int* out) {
  static const char* names[3] = {"none", "mean", "sum"};
  for (*out = 0; *out < 3; ++*out)
    if (strcmp(a->attrs[0].value.s, names[*out]) == 0) return NULL;
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT,
                      "%s: attribute 'reduction' is '%s', expected 'none', 'mean' or 'sum'", op,
                      a->attrs[0].value.s);
}

static UD_Error* check_shape(const char* op, const char* arg, const UD_Tensor* t, int ndim,
                             const int64_t* shape) {
  UD_REQUIRE(t->ndim == ndim && (!ndim || !memcmp(t->shape, shape, sizeof(int64_t) * ndim)),
             "%s: '%s' has ndim %d or a shape that does not match the op's rule", op, arg, t->ndim);
  return NULL;
}

/* Checks of nll_loss and its backward (logp [N, C] or [C]), then every target: class or -1. */
static UD_Error* nll_check(const char* op, const UD_KernelArgs* a, int first, int* red) {
  const UD_Tensor *logp = &a->inputs[first], *target = &a->inputs[first + 1];
  UD_TRY(reduction(op, a, red));
  UD_TRY(ud_x86_check_dt(op, "logp", logp, UD_FLOAT_SET, NULL));
  UD_REQUIRE(logp->ndim == 1 || logp->ndim == 2,
             "%s: 'logp' has ndim %d, expected [N, C] or [C]", op, logp->ndim);
  UD_TRY(ud_x86_check_dt(op, "target", target, (1u << UD_I32) | (1u << UD_I64), NULL));
  UD_TRY(check_shape(op, "target", target, logp->ndim - 1, logp->shape));
  const int64_t classes = logp->shape[logp->ndim - 1], ignore = a->attrs[1].value.i;
  UD_TRY(check_channel(op, "weight", &a->inputs[first + 2], classes, logp->dtype, 1));
  for (int64_t i = 0; i < (target->ndim ? target->shape[0] : 1); i++) {
    const int64_t t = get_i(target, i);
    UD_REQUIRE(t == ignore || (t >= 0 && t < classes),
               "%s: 'target' holds %lld, outside [0, %lld) and not ignore_index (%lld)", op,
               (long long)t, (long long)classes, (long long)ignore);
  }
  return NULL;
}

/* nll_loss (loss, total_weight = outputs) and its backward (grad_loss, ..., total_weight =
 * inputs, grad_logp = output): per sample i of class t, weight w (0 when ignored),
 * loss_i = -w logp[i, t] and grad_logp[i, t] = -w grad_loss_i / (total_weight or 1). */
static UD_Error* nll_kernel(const char* op, const UD_KernelArgs* a, int bw) {
  int red;
  UD_TRY(ud_x86_check_args(op, a, bw ? 5 : 3, bw ? 1 : 2, "si"));
  UD_TRY(nll_check(op, a, bw, &red));
  const UD_Tensor *logp = &a->inputs[bw], *target = &a->inputs[bw + 1], *w = &a->inputs[bw + 2];
  const UD_Tensor* loss = bw ? &a->inputs[0] : &a->outputs[0];
  const UD_Tensor* total = bw ? &a->inputs[4] : &a->outputs[1];
  const char* loss_name = bw ? "grad_loss" : "loss";
  UD_TRY(ud_kit_check_dtype(op, loss_name, loss, logp->dtype));
  UD_TRY(check_shape(op, loss_name, loss, red == 0 ? target->ndim : 0, target->shape));
  UD_TRY(ud_kit_check_dtype(op, "total_weight", total, logp->dtype));
  UD_TRY(check_shape(op, "total_weight", total, 0, NULL));
  if (bw) {
    UD_TRY(ud_kit_check_dtype(op, "grad_logp", &a->outputs[0], logp->dtype));
    UD_TRY(ud_kit_check_same_shape(op, "grad_logp", &a->outputs[0], logp));
    ud_x86_fill_view(&a->outputs[0], 0.0);
  }
  const double norm = bw && red == 1 ? get_f(total, 0) : 1.0;
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < (target->ndim ? target->shape[0] : 1); i++) {
    const int64_t cls = get_i(target, i);
    const double wi = cls == a->attrs[1].value.i ? 0.0 : w->ndim >= 0 ? get_f(w, cls) : 1.0;
    const UD_Tensor row = row_of(bw ? &a->outputs[0] : logp, i);
    if (bw && wi != 0.0) set_f(&row, cls, -wi * get_f(loss, red == 0 ? i : 0) / norm);
    if (bw) continue;
    const double li = wi == 0.0 ? 0.0 : -wi * get_f(&row, cls);
    sum += li;
    wsum += wi;
    if (red == 0) set_f(loss, i, li);
  }
  if (bw) return NULL;
  if (red != 0) set_f(loss, 0, red == 1 ? sum / wsum : sum);
  set_f(total, 0, wsum);
  return NULL;
}

static UD_Error* mse_kernel(const char* op, const UD_KernelArgs* a, int backward) {
  int dt, red;
  UD_TRY(ud_x86_check_args(op, a, backward ? 3 : 2, 1, "s"));
  UD_TRY(reduction(op, a, &red));
  const UD_Tensor *x = &a->inputs[backward], *t = &a->inputs[backward + 1], *out = &a->outputs[0];
  UD_TRY(ud_x86_check_dt(op, "x", x, UD_FLOAT_SET, &dt));
  UD_TRY(ud_kit_check_dtype(op, "target", t, x->dtype));
  UD_TRY(ud_kit_check_same_shape(op, "target", t, x));
  UD_TRY(ud_kit_check_dtype(op, backward ? "grad_x" : "loss", out, x->dtype));
  UD_TRY(backward || red == 0 ? ud_kit_check_same_shape(op, "out", out, x)
                              : check_shape(op, "loss", out, 0, NULL));
  const int f32 = dt == UD_F32;
  const int64_t numel = ud_kit_numel(x);
  if (backward) {
    UD_Tensor g = a->inputs[0];
    const int64_t zeros[UD_KIT_MAX_DIMS] = {0};
    UD_TRY(ud_kit_check_dtype(op, "grad_loss", &g, x->dtype));
    UD_REQUIRE(g.ndim == 0 || (red == 0 && ud_kit_same_shape(&g, x)),
               "%s: 'grad_loss' must be 0-d%s", op, red == 0 ? " or have x's shape" : "");
    if (g.ndim == 0) { /* a scalar gradient, broadcast */
      g.ndim = x->ndim;
      g.shape = x->shape;
      g.strides = zeros;
    }
    const double norm = red == 1 && numel ? 2.0 / (double)numel : 2.0;
    const UD_Tensor* views[4] = {out, x, t, &g};
    ud_x86_map(f32 ? ud_mse_backward_f32 : ud_mse_backward_f64, 4, views, &norm);
  } else {
    /* the squares: into `out`, or (sum, mean) into a contiguous scratch tensor then summed in
     * double precision */
    void* sq = red ? malloc((size_t)(numel ? numel : 1) * (size_t)ud_kit_itemsize(x->dtype)) : NULL;
    if (red && !sq) return ud_kit_host_oom_error();
    int64_t strides[UD_KIT_MAX_DIMS], stride = 1;
    for (int k = x->ndim - 1; k >= 0; stride *= x->shape[k--]) strides[k] = stride;
    const UD_Tensor flat = {(UD_Handle)(uintptr_t)sq, x->device, x->ndim, x->dtype, x->shape,
                            strides, 0};
    const UD_Tensor* views[3] = {red ? &flat : out, x, t};
    ud_x86_map(f32 ? ud_mse_f32 : ud_mse_f64, 3, views, NULL);
    if (!red) return NULL;
    double sums[2] = {0, 0};
    (f32 ? ud_bn_moments_f32 : ud_bn_moments_f64)(numel, sq, 1, 0.0, sums);
    free(sq);
    set_f(out, 0, red == 1 ? sums[0] / (double)numel : sums[0]);
  }
  return NULL;
}

#define UD_NN_KERNEL(NAME, FN, BWD) \
  static UD_Error* k_##NAME(const UD_KernelArgs* a) { return FN(#NAME, a, BWD); }
UD_NN_KERNEL(batch_norm, bn_kernel, 0)
UD_NN_KERNEL(batch_norm_backward, bn_kernel, 1)
UD_NN_KERNEL(nll_loss, nll_kernel, 0)
UD_NN_KERNEL(nll_loss_backward, nll_kernel, 1)
UD_NN_KERNEL(mse_loss, mse_kernel, 0)
UD_NN_KERNEL(mse_loss_backward, mse_kernel, 1)

const UD_X86Kernel ud_x86_nn_kernels[] = {
    {"batch_norm", UD_FLOAT_SET, k_batch_norm},
    {"batch_norm_backward", UD_FLOAT_SET, k_batch_norm_backward},
    {"nll_loss", UD_FLOAT_SET, k_nll_loss},
    {"nll_loss_backward", UD_FLOAT_SET, k_nll_loss_backward},
    {"mse_loss", UD_FLOAT_SET, k_mse_loss},
    {"mse_loss_backward", UD_FLOAT_SET, k_mse_loss_backward},
    {NULL, 0, NULL},
};
