/* nn.c — batch norm (forward, backward), nll loss and mse loss (forward, backward).
 * Batch norm works channel by channel: the other dimensions of each channel are collapsed into
 * 2-d blocks that ISPC reduces (a corrected two-pass mean and variance, gradient sums; in the
 * dtype over short blocks, in double across them) and rewrites (one affine map). Channels-last
 * tensors (every view's channels at unit stride, the rest collapsing to rows) run row blocks
 * with the channels in the lanes instead: the same passes, no gathers, no layout copy. */
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
  const UD_Tensor* view[3]; /* forward: y, x; backward: grad_x, grad_y, x */
  const UD_Tensor *weight, *bias; /* bias: forward only */
  const UD_Tensor *mean, *var;    /* running_mean/var; backward: save_mean/invstd */
  const UD_Tensor *out1, *out2;   /* save_mean/invstd; backward: grad_weight/bias */
  int backward, training, f32, nd, nv;
  int64_t count, shape[UD_KIT_MAX_DIMS], str[3][UD_KIT_MAX_DIMS]; /* one channel, collapsed */
  double momentum, eps;
} Bn;

/* View v of channel c at outer index o: the collapsed dims but the last two (usually none). */
static const char* bn_at(const Bn* B, int v, int64_t c, int64_t o) {
  const UD_Tensor* t = B->view[v];
  const int64_t off = c * t->strides[1] + ud_x86_offset(o, B->nd - 2, B->shape, B->str[v]);
  return (const char*)ud_x86_ptr(t) + off * (t->dtype.bits / 8);
}

/* The channel's data as `outer` 2-d blocks [rows, n] of row stride rs[v] and element stride
 * es[v]: one ISPC call per block (one per channel for contiguous x), not per row. */
typedef struct {
  int64_t outer, rows, n, rs[3], es[3];
} Blocks;

static Blocks bn_blocks(const Bn* B) {
  Blocks k = {1, B->nd >= 2 ? B->shape[B->nd - 2] : 1, B->shape[B->nd - 1], {0}, {0}};
  for (int d = 0; d < B->nd - 2; d++) k.outer *= B->shape[d];
  for (int v = 0; v < B->nv; v++) {
    k.es[v] = B->str[v][B->nd - 1];
    k.rs[v] = B->nd >= 2 ? B->str[v][B->nd - 2] : 0;
  }
  return k;
}

/* sums += the moments of channel c about `shift` (rounded to the dtype by the kernel). */
static void bn_moments(const Bn* B, const Blocks* k, int64_t c, double shift, double* sums) {
  for (int64_t o = 0; o < k->outer; o++)
    (B->f32 ? ud_bn_moments_f32 : ud_bn_moments_f64)(k->rows, k->n, bn_at(B, 1, c, o), k->rs[1],
                                                     k->es[1], shift, sums);
}

static void bn_task(void* ctx, int64_t begin, int64_t end) {
  const Bn* B = ctx;
  const Blocks k = bn_blocks(B);
  for (int64_t c = begin; c < end; c++) {
    const double w = B->weight->ndim >= 0 ? get_f(B->weight, c) : 1.0;
    double mean, invstd, sums[2] = {0, 0};
    if (!B->backward && B->training) {
      /* corrected two-pass: the sum gives a mean, then moments about it (in the dtype, so
       * x - shift is exact near it): no cancellation when |mean| >> std. The channel stays in
       * L2 for the second pass and the affine map (a non-finite mean: moments about 0). */
      bn_moments(B, &k, c, 0.0, sums);
      double shift = sums[0] / (double)B->count;
      if (!isfinite(shift)) shift = 0;
      shift = B->f32 ? (double)(float)shift : shift;
      sums[0] = sums[1] = 0;
      bn_moments(B, &k, c, shift, sums);
      const double d = sums[0] / (double)B->count;
      const double v = sums[1] / (double)B->count - d * d, var = v < 0 ? 0 : v; /* nan stays */
      mean = shift + d;
      invstd = 1.0 / sqrt(var + B->eps);
      if (B->mean->ndim >= 0) {
        /* one value per channel: 0 / 0 = nan, as torch */
        const double m = B->momentum, unbiased = var * (double)B->count / (double)(B->count - 1);
        set_f(B->mean, c, (1 - m) * get_f(B->mean, c) + m * mean);
        set_f(B->var, c, (1 - m) * get_f(B->var, c) + m * unbiased);
      }
    } else if (!B->backward) {
      mean = get_f(B->mean, c);
      invstd = 1.0 / sqrt(get_f(B->var, c) + B->eps);
    } else {
      mean = get_f(B->mean, c);
      invstd = get_f(B->var, c);
      for (int64_t o = 0; o < k.outer; o++)
        (B->f32 ? ud_bn_grad_sums_f32 : ud_bn_grad_sums_f64)(
            k.rows, k.n, bn_at(B, 1, c, o), k.rs[1], k.es[1], bn_at(B, 2, c, o), k.rs[2],
            k.es[2], B->f32 ? (double)(float)mean : mean, sums);
    }
    /* forward: y = a (x - mean) + k; backward: grad_x = a grad_y + b (x - mean) + k. x - mean
     * first: a x - a mean cancels when invstd is large (one value per channel: 1/sqrt(eps)) */
    double a = invstd * w, b = 0, kk;
    if (!B->backward) {
      set_f(B->out1, c, mean);
      set_f(B->out2, c, invstd);
      kk = B->bias->ndim >= 0 ? get_f(B->bias, c) : 0.0;
    } else {
      set_f(B->out1, c, sums[1] * invstd);
      set_f(B->out2, c, sums[0]);
      b = B->training ? -a * invstd * sums[1] * invstd / (double)B->count : 0.0;
      kk = B->training ? -a * sums[0] / (double)B->count : 0.0;
    }
    /* ud_bn_affine: o = p (u - m) + q v + k, v unread when NULL (0 * inf would be nan) */
    const int train_bw = B->backward && B->training, uv = train_bw ? 2 : 1;
    for (int64_t o = 0; o < k.outer; o++)
      (B->f32 ? ud_bn_affine_f32 : ud_bn_affine_f64)(
          k.rows, k.n, (void*)bn_at(B, 0, c, o), k.rs[0], k.es[0], bn_at(B, uv, c, o), k.rs[uv],
          k.es[uv], train_bw ? bn_at(B, 1, c, o) : NULL, k.rs[1], k.es[1], train_bw ? b : a,
          B->backward && !B->training ? 0.0 : mean, a, kk);
  }
}

/* ---- channels-last batch norm: [rows, C] views of row stride str[v][0] ---- */
typedef struct {
  const Bn* B;
  int64_t rows, per; /* rows per block (a fixed split: sums add in the same order every run) */
  const double *shift, *p, *m, *q, *k;
  double* part; /* per block: s1[C], s2[C] */
  int affine, uv; /* affine pass: u = view uv, v = view 1 (backward in training) or none */
} BnRows;

static const char* bn_row(const Bn* B, int v, int64_t r) {
  const UD_Tensor* t = B->view[v];
  return (const char*)ud_x86_ptr(t) + r * B->str[v][0] * (t->dtype.bits / 8);
}

static void bn_rows_task(void* ctx, int64_t begin, int64_t end) {
  const BnRows* R = ctx;
  const Bn* B = R->B;
  const int64_t c = B->view[0]->shape[1];
  for (int64_t i = begin; i < end; i++) {
    const int64_t r0 = i * R->per, n = R->rows - r0 < R->per ? R->rows - r0 : R->per;
    if (R->affine) {
      const int tv = R->uv == 2;
      (B->f32 ? ud_bn_cl_affine_f32 : ud_bn_cl_affine_f64)(
          n, c, (void*)bn_row(B, 0, r0), B->str[0][0], bn_row(B, R->uv, r0), B->str[R->uv][0],
          tv ? bn_row(B, 1, r0) : NULL, B->str[1][0], R->p, R->m, R->q, R->k);
    } else {
      double* s = R->part + 2 * c * i;
      const int bw = B->backward, xv = bw ? 2 : 1;
      (B->f32 ? ud_bn_cl_sums_f32 : ud_bn_cl_sums_f64)(
          n, c, bn_row(B, xv, r0), B->str[xv][0], bw ? bn_row(B, 1, r0) : NULL, B->str[1][0],
          R->shift, s, s + c);
    }
  }
}

/* sums[0..C) and sums[C..2C): the blocks' sums (about shift, or the gradient sums) added up. */
static void bn_rows_sums(BnRows* R, int64_t blocks, const double* shift, double* sums) {
  const int64_t c = R->B->view[0]->shape[1];
  memset(R->part, 0, sizeof(double) * (size_t)(2 * c * blocks));
  R->shift = shift;
  R->affine = 0;
  ud_x86_parallel(blocks, 1, bn_rows_task, R);
  memset(sums, 0, sizeof(double) * (size_t)(2 * c));
  for (int64_t i = 0; i < blocks; i++)
    for (int64_t j = 0; j < 2 * c; j++) sums[j] += R->part[2 * c * i + j];
}

static UD_Error* bn_channels_last(const Bn* B) {
  const int64_t c = B->view[0]->shape[1], rows = B->shape[0];
  BnRows R = {.B = B, .rows = rows, .per = (rows + 63) / 64};
  if (R.per * c < 8192) R.per = 8192 / c + 1; /* blocks worth a task */
  const int64_t blocks = rows ? (rows + R.per - 1) / R.per : 0;
  double* buf = calloc((size_t)(c * (8 + 2 * blocks) + 1), sizeof(double));
  if (!buf) return ud_kit_host_oom_error();
  double *sums = buf, *shift = buf + 2 * c, *p = shift + c, *m = p + c, *q = m + c, *k = q + c;
  R.part = k + c;
  for (int64_t j = 0; j < c; j++) {
    const double w = B->weight->ndim >= 0 ? get_f(B->weight, j) : 1.0;
    if (!B->backward && !B->training) {
      m[j] = get_f(B->mean, j);
      q[j] = 1.0 / sqrt(get_f(B->var, j) + B->eps); /* invstd */
    } else if (B->backward) {
      m[j] = get_f(B->mean, j);
      q[j] = get_f(B->var, j);
    }
    p[j] = w;
  }
  if (!B->backward && B->training) {
    /* moments about a sample of each channel (its first row): x - shift is then of the order
     * of the spread and one pass over the tensor does (the whole tensor, not one channel, goes
     * through the cache per pass). Where that still cancels (a far sample, non-finite values)
     * and for f64, the corrected second pass of bn_task about the mean follows. */
    const char* x0 = bn_row(B, 1, 0);
    for (int64_t j = 0; j < c; j++) {
      const double v = B->f32 ? ((const float*)x0)[j] : ((const double*)x0)[j];
      shift[j] = isfinite(v) ? v : 0;
    }
    bn_rows_sums(&R, blocks, shift, sums);
    int again = !B->f32;
    for (int64_t j = 0; j < c; j++) {
      const double d = sums[j] / (double)B->count, e2 = sums[c + j] / (double)B->count;
      again |= !(e2 - d * d >= e2 * 0x1p-20);
    }
    for (int64_t j = 0; j < c && again; j++) {
      double s = shift[j] + sums[j] / (double)B->count;
      if (!isfinite(s)) s = 0;
      shift[j] = B->f32 ? (double)(float)s : s;
    }
    if (again) bn_rows_sums(&R, blocks, shift, sums);
    for (int64_t j = 0; j < c; j++) {
      const double d = sums[j] / (double)B->count;
      const double v = sums[c + j] / (double)B->count - d * d, var = v < 0 ? 0 : v;
      m[j] = shift[j] + d;
      q[j] = 1.0 / sqrt(var + B->eps);
      if (B->mean->ndim >= 0) {
        const double mo = B->momentum, unbiased = var * (double)B->count / (double)(B->count - 1);
        set_f(B->mean, j, (1 - mo) * get_f(B->mean, j) + mo * m[j]);
        set_f(B->var, j, (1 - mo) * get_f(B->var, j) + mo * unbiased);
      }
    }
  } else if (B->backward) {
    for (int64_t j = 0; j < c; j++) shift[j] = B->f32 ? (double)(float)m[j] : m[j];
    bn_rows_sums(&R, blocks, shift, sums);
  }
  /* per channel, as bn_task: forward y = a (x - mean) + bias; backward grad_x = a grad_y
   * + b (x - mean) + kk (training) or a grad_y */
  const int train_bw = B->backward && B->training;
  for (int64_t j = 0; j < c; j++) {
    const double a = q[j] * p[j], mean = m[j];
    if (!B->backward) {
      set_f(B->out1, j, mean);
      set_f(B->out2, j, q[j]);
      k[j] = B->bias->ndim >= 0 ? get_f(B->bias, j) : 0.0;
      p[j] = a;
    } else {
      const double invstd = q[j], s1 = sums[j], s2 = sums[c + j];
      set_f(B->out1, j, s2 * invstd);
      set_f(B->out2, j, s1);
      p[j] = train_bw ? -a * invstd * s2 * invstd / (double)B->count : a;
      k[j] = train_bw ? -a * s1 / (double)B->count : 0.0;
      m[j] = train_bw ? mean : 0.0;
    }
    q[j] = a;
  }
  R.p = p, R.m = m, R.q = q, R.k = k, R.affine = 1, R.uv = train_bw ? 2 : 1;
  ud_x86_parallel(blocks, 1, bn_rows_task, &R);
  free(buf);
  return NULL;
}

/* A [C] tensor, or an absent one (ud_kit_check_signature let only optional inputs be absent). */
static UD_Error* check_channel(const char* op, const char* arg, const UD_Tensor* t, int64_t c,
                               UD_DType dt) {
  if (t->ndim == -1) return NULL;
  UD_KIT_TRY(ud_kit_check_dtype(op, arg, t, dt));
  UD_KIT_REQUIRE(t->ndim == 1 && t->shape[0] == c, UD_ERR_INVALID_ARGUMENT,
                 "%s: '%s' must have shape [%lld]", op, arg, (long long)c);
  return NULL;
}

static UD_Error* bn_kernel(int id, const UD_KernelArgs* a, int backward) {
  const UD_Tensor *in = a->inputs, *out = a->outputs;
  const char* op = ud_op_info(id)->name;
  Bn B;
  int dt;
  UD_KIT_TRY(ud_x86_check_args(id, a));
  if (!backward) {
    B = (Bn){{&out[UD_OUT_BATCH_NORM_Y], &in[UD_IN_BATCH_NORM_X]},
             &in[UD_IN_BATCH_NORM_WEIGHT], &in[UD_IN_BATCH_NORM_BIAS],
             &in[UD_IN_BATCH_NORM_RUNNING_MEAN], &in[UD_IN_BATCH_NORM_RUNNING_VAR],
             &out[UD_OUT_BATCH_NORM_SAVE_MEAN], &out[UD_OUT_BATCH_NORM_SAVE_INVSTD], .nv = 2};
  } else {
    B = (Bn){{&out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_X], &in[UD_IN_BATCH_NORM_BACKWARD_GRAD_Y],
              &in[UD_IN_BATCH_NORM_BACKWARD_X]},
             &in[UD_IN_BATCH_NORM_BACKWARD_WEIGHT], NULL,
             &in[UD_IN_BATCH_NORM_BACKWARD_SAVE_MEAN], &in[UD_IN_BATCH_NORM_BACKWARD_SAVE_INVSTD],
             &out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_WEIGHT],
             &out[UD_OUT_BATCH_NORM_BACKWARD_GRAD_BIAS], .backward = 1, .nv = 3};
  }
  const UD_Tensor* x = B.view[B.nv - 1];
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "x", x, UD_X86_FLOAT, &dt));
  UD_KIT_REQUIRE(x->ndim >= 2, UD_ERR_INVALID_ARGUMENT,
                 "%s: 'x' has ndim %d, expected [N, C, ...]", op, x->ndim);
  const int64_t c = x->shape[1];
  for (int i = 0; i < a->num_inputs + a->num_outputs; i++) { /* x-shaped views, or [C] */
    const UD_Tensor* t = i < a->num_inputs ? &in[i] : &out[i - a->num_inputs];
    const char* name = ud_x86_arg_name(id, a, t);
    if (t == B.view[0] || t == B.view[1] || t == B.view[B.nv - 1]) {
      UD_KIT_TRY(ud_kit_check_dtype(op, name, t, x->dtype));
      UD_KIT_TRY(ud_kit_check_same_shape(op, name, t, x));
    } else {
      UD_KIT_TRY(check_channel(op, name, t, c, x->dtype));
    }
  }
  UD_X86_SAME_POS(UD_ATTR_BATCH_NORM_TRAINING, UD_ATTR_BATCH_NORM_BACKWARD_TRAINING);
  B.training = a->attrs[UD_ATTR_BATCH_NORM_TRAINING].value.b;
  B.f32 = dt == UD_DT_FLOAT32;
  B.count = c ? ud_kit_numel(x) / c : 0;
  if (!backward) {
    B.momentum = a->attrs[UD_ATTR_BATCH_NORM_MOMENTUM].value.f;
    B.eps = a->attrs[UD_ATTR_BATCH_NORM_EPS].value.f;
    UD_KIT_REQUIRE((B.mean->ndim >= 0) == (B.var->ndim >= 0), UD_ERR_INVALID_ARGUMENT,
                   "%s: give both 'running_mean' and 'running_var' or neither", op);
    UD_KIT_REQUIRE(!B.training || B.count > 0, UD_ERR_INVALID_ARGUMENT,
                   "%s: training needs at least one value per channel, 'x' has none", op);
    UD_KIT_REQUIRE(B.training || B.mean->ndim >= 0, UD_ERR_INVALID_ARGUMENT,
                   "%s: 'running_mean' and 'running_var' are required when training is False",
                   op);
  }
  if (B.count == 0) B.count = 1; /* an empty batch: the channels still write their statistics */
  B.nd = ud_x86_collapse_views(B.nv, B.view, 1u << 1, B.shape, B.str); /* all but the channels */
  int cl = c > 1 && B.nd == 1;
  for (int v = 0; v < B.nv; v++) cl = cl && B.view[v]->strides[1] == 1 && B.str[v][0] >= c;
  if (cl) return bn_channels_last(&B);
  /* channels of ~8K elements and more go to the pool one by one: each runs three passes */
  ud_x86_parallel(c, UD_GRAIN / 4 / (B.count + 1) + 1, bn_task, &B);
  return NULL;
}

/* ---- losses ---- */
static UD_Error* check_shape(const char* op, const char* arg, const UD_Tensor* t, int ndim,
                             const int64_t* shape) {
  UD_KIT_REQUIRE(t->ndim == ndim && (!ndim || !memcmp(t->shape, shape, sizeof(int64_t) * ndim)),
                 UD_ERR_INVALID_ARGUMENT,
                 "%s: '%s' has ndim %d or a shape that does not match the op's rule", op, arg,
                 t->ndim);
  return NULL;
}

/* nll_loss's arguments; the backward's are these and grad_loss (the UD_X86_SAME_POS lines) */
typedef struct {
  const UD_Tensor *logp, *target, *weight, *loss, *total;
  int reduction; /* index in the op set's choices: none, mean, sum */
  int64_t ignore;
} Nll;
UD_X86_SAME_POS(UD_ATTR_NLL_LOSS_REDUCTION, UD_ATTR_NLL_LOSS_BACKWARD_REDUCTION);
UD_X86_SAME_POS(UD_ATTR_NLL_LOSS_IGNORE_INDEX, UD_ATTR_NLL_LOSS_BACKWARD_IGNORE_INDEX);

/* Checks of nll_loss and its backward (logp [N, C] or [C]), then every target: class or -1. */
static UD_Error* nll_check(int id, const UD_KernelArgs* a, int bw, Nll* L) {
  const char* op = ud_op_info(id)->name;
  const UD_Tensor* in = a->inputs;
  *L = bw ? (Nll){&in[UD_IN_NLL_LOSS_BACKWARD_LOGP], &in[UD_IN_NLL_LOSS_BACKWARD_TARGET],
                  &in[UD_IN_NLL_LOSS_BACKWARD_WEIGHT], &in[UD_IN_NLL_LOSS_BACKWARD_GRAD_LOSS],
                  &in[UD_IN_NLL_LOSS_BACKWARD_TOTAL_WEIGHT], 0, 0}
          : (Nll){&in[UD_IN_NLL_LOSS_LOGP], &in[UD_IN_NLL_LOSS_TARGET],
                  &in[UD_IN_NLL_LOSS_WEIGHT], &a->outputs[UD_OUT_NLL_LOSS_LOSS],
                  &a->outputs[UD_OUT_NLL_LOSS_TOTAL_WEIGHT], 0, 0};
  const UD_Tensor *logp = L->logp, *target = L->target;
  UD_KIT_TRY(ud_kit_check_choice(id, a, UD_ATTR_NLL_LOSS_REDUCTION, &L->reduction));
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "logp", logp, UD_X86_FLOAT, NULL));
  UD_KIT_REQUIRE(logp->ndim == 1 || logp->ndim == 2, UD_ERR_INVALID_ARGUMENT,
                 "%s: 'logp' has ndim %d, expected [N, C] or [C]", op, logp->ndim);
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "target", target, UD_DTM_INT32 | UD_DTM_INT64, NULL));
  UD_KIT_TRY(check_shape(op, "target", target, logp->ndim - 1, logp->shape));
  const int64_t classes = logp->shape[logp->ndim - 1];
  L->ignore = a->attrs[UD_ATTR_NLL_LOSS_IGNORE_INDEX].value.i;
  UD_KIT_TRY(check_channel(op, "weight", L->weight, classes, logp->dtype));
  for (int64_t i = 0; i < (target->ndim ? target->shape[0] : 1); i++) {
    const int64_t t = get_i(target, i);
    UD_KIT_REQUIRE(t == L->ignore || (t >= 0 && t < classes), UD_ERR_INVALID_ARGUMENT,
                   "%s: 'target' holds %lld, outside [0, %lld) and not ignore_index (%lld)", op,
                   (long long)t, (long long)classes, (long long)L->ignore);
  }
  return NULL;
}

/* nll_loss (loss, total_weight = outputs) and its backward (grad_loss, ..., total_weight =
 * inputs, grad_logp = output): per sample i of class t, weight w (0 when ignored),
 * loss_i = -w logp[i, t] and grad_logp[i, t] = -w grad_loss_i / (total_weight or 1). */
static UD_Error* nll_kernel(int id, const UD_KernelArgs* a, int bw) {
  const char* op = ud_op_info(id)->name;
  Nll L;
  UD_KIT_TRY(ud_x86_check_args(id, a));
  UD_KIT_TRY(nll_check(id, a, bw, &L));
  const UD_Tensor *logp = L.logp, *target = L.target, *w = L.weight, *loss = L.loss;
  const UD_Tensor *total = L.total, *grad = &a->outputs[UD_OUT_NLL_LOSS_BACKWARD_GRAD_LOGP];
  const int red = L.reduction;
  const char* loss_name = ud_x86_arg_name(id, a, loss);
  UD_KIT_TRY(ud_kit_check_dtype(op, loss_name, loss, logp->dtype));
  UD_KIT_TRY(check_shape(op, loss_name, loss, red == 0 ? target->ndim : 0, target->shape));
  UD_KIT_TRY(ud_kit_check_dtype(op, "total_weight", total, logp->dtype));
  UD_KIT_TRY(check_shape(op, "total_weight", total, 0, NULL));
  if (bw) {
    UD_KIT_TRY(ud_kit_check_dtype(op, "grad_logp", grad, logp->dtype));
    UD_KIT_TRY(ud_kit_check_same_shape(op, "grad_logp", grad, logp));
    ud_x86_fill_view(grad, 0.0);
  }
  const double norm = bw && red == 1 ? get_f(total, 0) : 1.0;
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < (target->ndim ? target->shape[0] : 1); i++) {
    const int64_t cls = get_i(target, i);
    const double wi = cls == L.ignore ? 0.0 : w->ndim >= 0 ? get_f(w, cls) : 1.0;
    const UD_Tensor row = row_of(bw ? grad : logp, i);
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

static UD_Error* mse_kernel(int id, const UD_KernelArgs* a, int backward) {
  const char* op = ud_op_info(id)->name;
  int dt, red;
  UD_KIT_TRY(ud_x86_check_args(id, a));
  UD_X86_SAME_POS(UD_ATTR_MSE_LOSS_REDUCTION, UD_ATTR_MSE_LOSS_BACKWARD_REDUCTION);
  UD_KIT_TRY(ud_kit_check_choice(id, a, UD_ATTR_MSE_LOSS_REDUCTION, &red));
  const UD_Tensor* x = &a->inputs[backward ? UD_IN_MSE_LOSS_BACKWARD_X : UD_IN_MSE_LOSS_X];
  const UD_Tensor* t =
      &a->inputs[backward ? UD_IN_MSE_LOSS_BACKWARD_TARGET : UD_IN_MSE_LOSS_TARGET];
  const UD_Tensor* out = &a->outputs[UD_OUT_MSE_LOSS_LOSS]; /* or grad_x */
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "x", x, UD_X86_FLOAT, &dt));
  UD_KIT_TRY(ud_kit_check_dtype(op, "target", t, x->dtype));
  UD_KIT_TRY(ud_kit_check_same_shape(op, "target", t, x));
  UD_KIT_TRY(ud_kit_check_dtype(op, backward ? "grad_x" : "loss", out, x->dtype));
  UD_KIT_TRY(backward || red == 0 ? ud_kit_check_same_shape(op, "out", out, x)
                                  : check_shape(op, "loss", out, 0, NULL));
  const int f32 = dt == UD_DT_FLOAT32;
  const int64_t numel = ud_kit_numel(x);
  if (backward) {
    UD_Tensor g = a->inputs[UD_IN_MSE_LOSS_BACKWARD_GRAD_LOSS];
    const int64_t zeros[UD_KIT_MAX_DIMS] = {0};
    UD_KIT_TRY(ud_kit_check_dtype(op, "grad_loss", &g, x->dtype));
    UD_KIT_REQUIRE(g.ndim == 0 || (red == 0 && ud_kit_same_shape(&g, x)),
                   UD_ERR_INVALID_ARGUMENT, "%s: 'grad_loss' must be 0-d%s", op,
                   red == 0 ? " or have x's shape" : "");
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
    (f32 ? ud_bn_moments_f32 : ud_bn_moments_f64)(1, numel, sq, 0, 1, 0.0, sums);
    free(sq);
    set_f(out, 0, red == 1 ? sums[0] / (double)numel : sums[0]);
  }
  return NULL;
}

#define UD_NN_OPS(X)                                                                     \
  X(BATCH_NORM, bn_kernel, 0) X(BATCH_NORM_BACKWARD, bn_kernel, 1) X(NLL_LOSS, nll_kernel, 0) \
  X(NLL_LOSS_BACKWARD, nll_kernel, 1) X(MSE_LOSS, mse_kernel, 0)                             \
  X(MSE_LOSS_BACKWARD, mse_kernel, 1)
#define UD_NN_KERNEL(K, FN, BWD) \
  static UD_Error* k_##K(const UD_KernelArgs* a) { return FN(UD_OP_##K, a, BWD); }
UD_NN_OPS(UD_NN_KERNEL)
#define UD_NN_ENTRY(K, FN, BWD) {UD_OP_##K, UD_X86_FLOAT, k_##K},
const UD_X86Kernel ud_x86_nn_kernels[] = {UD_NN_OPS(UD_NN_ENTRY){0, 0, NULL}};
