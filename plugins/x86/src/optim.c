/* optim.c — sgd_update and adam_update: checks, the device scalars (found_inf, grad_scale,
 * state_step), the step's coefficients in double, and one pass over the tensors split over the
 * pool. Tensors whose layouts match param's and cover their extent exactly (contiguous, or any
 * one permutation of it) run in place; other views go through packed tiles. */
#include <math.h>
#include <string.h>

#include "optim_ispc.h"
#include "x86.h"

#define UD_GRAIN (1 << 15)
#define UD_TILE 512
#define UD_MAX_T 5 /* tensors of the op's dtype: param, grad, and up to three states */

typedef struct {
  const UD_Tensor* t[UD_MAX_T];
  int nt, f32, adam, dense, ndim;
  int64_t shape[UD_KIT_MAX_DIMS];
  struct UD_Optim c;
} Step;

static double scalar_at(const UD_Tensor* t) {
  const void* p = ud_x86_ptr(t);
  return t->dtype.bits == 32 ? (double)*(const float*)p : *(const double*)p;
}

/* the view's elements cover [0, numel) of its own storage in some order */
static int dense(const UD_Tensor* t) {
  int64_t st[UD_KIT_MAX_DIMS], n[UD_KIT_MAX_DIMS], expect = 1;
  int m = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1) st[m] = t->strides[d], n[m++] = t->shape[d];
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
      int64_t s = st[j], k = n[j];
      st[j] = st[j - 1], n[j] = n[j - 1], st[j - 1] = s, n[j - 1] = k;
    }
  for (int i = 0; i < m; expect *= n[i++])
    if (st[i] != expect) return 0;
  return 1;
}

static int same_strides(const UD_Tensor* a, const UD_Tensor* b) {
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return 0;
  return 1;
}

static void run(const Step* S, int64_t n, void* const* v) {
  if (S->adam)
    (S->f32 ? ud_adam_step_f32 : ud_adam_step_f64)(n, v[0], v[1], v[2], v[3], v[4],
                                                   (struct UD_Optim*)&S->c);
  else
    (S->f32 ? ud_sgd_step_f32 : ud_sgd_step_f64)(n, v[0], v[1], v[2], (struct UD_Optim*)&S->c);
}

static void step_task(void* ctx, int64_t begin, int64_t end) {
  const Step* S = ctx;
  const int64_t size = S->f32 ? 4 : 8;
  void* v[UD_MAX_T] = {0};
  if (S->dense) {
    for (int k = 0; k < S->nt; k++)
      if (S->t[k]) v[k] = (char*)ud_x86_ptr(S->t[k]) + begin * size;
    run(S, end - begin, v);
    return;
  }
  double tile[UD_MAX_T][UD_TILE]; /* packed views: gather, step, scatter what the step wrote */
  for (int64_t i0 = begin; i0 < end; i0 += UD_TILE) {
    const int64_t n = end - i0 < UD_TILE ? end - i0 : UD_TILE;
    for (int k = 0; k < S->nt; k++) {
      if (!S->t[k]) continue;
      char *base = ud_x86_ptr(S->t[k]), *dst = (char*)tile[k];
      for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * size,
               base + ud_x86_offset(i0 + i, S->ndim, S->shape, S->t[k]->strides) * size, size);
      v[k] = tile[k];
    }
    run(S, n, v);
    for (int k = 0; k < S->nt; k++) {
      if (!S->t[k] || (k == 1 && !S->c.has_scale)) continue; /* grad: written when unscaled */
      char *base = ud_x86_ptr(S->t[k]), *src = (char*)tile[k];
      for (int64_t i = 0; i < n; i++)
        memcpy(base + ud_x86_offset(i0 + i, S->ndim, S->shape, S->t[k]->strides) * size,
               src + i * size, size);
    }
  }
}

/* Checks every tensor (op dtype and param's shape; scalars: one float element), reads
 * found_inf (*skip) and grad_scale, and decides how the tensors are walked. */
static UD_Error* prepare(int id, const UD_KernelArgs* a, int nt, int first_scalar, Step* S,
                         int* skip) {
  const UD_OpInfo* info = ud_op_info(id);
  const UD_Tensor* in = a->inputs;
  int dt = -1;
  UD_KIT_TRY(ud_x86_check_args(id, a));
  UD_KIT_TRY(ud_kit_check_dtype_in(info->name, "param", &in[0], UD_X86_FLOAT, &dt));
  memset(S, 0, sizeof *S);
  S->nt = nt, S->f32 = dt == UD_DT_FLOAT32, S->ndim = in[0].ndim, S->dense = dense(&in[0]);
  memcpy(S->shape, in[0].shape, sizeof(int64_t) * (size_t)in[0].ndim);
  for (int k = 0; k < nt; k++) {
    if (!ud_kit_present(&in[k])) continue;
    const char* name = info->input_names[k];
    UD_KIT_TRY(ud_kit_check_dtype(info->name, name, &in[k], in[0].dtype));
    UD_KIT_REQUIRE(ud_kit_same_shape(&in[k], &in[0]), UD_ERR_INVALID_ARGUMENT,
                   "%s: '%s' has ndim %d and another shape than param's (ndim %d); expected "
                   "param's shape", info->name, name, in[k].ndim, in[0].ndim);
    S->t[k] = &in[k];
    S->dense = S->dense && dense(&in[k]) && same_strides(&in[k], &in[0]);
  }
  for (int k = first_scalar; k < a->num_inputs; k++) {
    if (!ud_kit_present(&in[k])) continue;
    const char* name = info->input_names[k];
    UD_KIT_TRY(ud_kit_check_dtype_in(info->name, name, &in[k], UD_X86_FLOAT, NULL));
    UD_KIT_REQUIRE(ud_kit_numel(&in[k]) == 1, UD_ERR_INVALID_ARGUMENT,
                   "%s: '%s' has %lld elements, expected one", info->name, name,
                   (long long)ud_kit_numel(&in[k]));
  }
  const UD_Tensor *scale = &in[a->num_inputs - 2], *inf = &in[a->num_inputs - 1];
  *skip = ud_kit_present(inf) && scalar_at(inf) == 1.0; /* torch: found_inf == 1 skips */
  S->c.has_scale = ud_kit_present(scale);
  S->c.scale = S->c.has_scale ? scalar_at(scale) : 1.0;
  return NULL;
}

static UD_Error* go(Step* S, const UD_Tensor* param) {
  const int64_t n = ud_kit_numel(param);
  if (n > 0) ud_x86_parallel(n, UD_GRAIN, step_task, S);
  return NULL;
}

static UD_Error* sgd_update(const UD_KernelArgs* a) {
  Step S;
  int skip;
  UD_KIT_TRY(prepare(UD_OP_SGD_UPDATE, a, 3, UD_IN_SGD_UPDATE_GRAD_SCALE, &S, &skip));
  const double mom = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM);
  const double lr = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_LR);
  const int keras = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_LR_IN_MOMENTUM);
  UD_KIT_REQUIRE(mom == 0 || S.t[UD_IN_SGD_UPDATE_MOMENTUM_BUFFER], UD_ERR_INVALID_ARGUMENT,
                 "sgd_update: 'momentum_buffer' is absent, required when momentum = %g (not 0)",
                 mom);
  if (skip) return NULL;
  S.c.use_momentum = mom != 0;
  S.c.momentum = mom;
  S.c.damp1 = 1 - ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_DAMPENING);
  S.c.wd = ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_WEIGHT_DECAY);
  S.c.nesterov = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_NESTEROV);
  S.c.maximize = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_MAXIMIZE);
  S.c.first = ud_kit_attr_bool(a, UD_ATTR_SGD_UPDATE_FIRST_STEP);
  S.c.gain = keras ? -lr : 1.0;
  S.c.lr = keras ? -1.0 : lr;
  if (!S.c.use_momentum) S.t[UD_IN_SGD_UPDATE_MOMENTUM_BUFFER] = NULL; /* unread */
  return go(&S, &a->inputs[0]);
}

static UD_Error* adam_update(const UD_KernelArgs* a) {
  Step S;
  int skip;
  UD_KIT_TRY(prepare(UD_OP_ADAM_UPDATE, a, 5, UD_IN_ADAM_UPDATE_STATE_STEP, &S, &skip));
  if (skip) return NULL;
  const UD_Tensor* st = &a->inputs[UD_IN_ADAM_UPDATE_STATE_STEP];
  const double lr = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_LR);
  const double b1 = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_BETA1);
  const double b2 = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_BETA2);
  const double t = ud_kit_present(st) ? scalar_at(st) : ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_STEP);
  const int bc = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_BIAS_CORRECTION);
  S.adam = 1;
  S.c.wd = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_WEIGHT_DECAY);
  S.c.decay = 1 - lr * S.c.wd;
  S.c.decoupled = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_DECOUPLED);
  S.c.maximize = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_MAXIMIZE);
  S.c.nesterov = ud_kit_attr_bool(a, UD_ATTR_ADAM_UPDATE_NESTEROV);
  S.c.amsgrad = S.t[UD_IN_ADAM_UPDATE_MAX_EXP_AVG_SQ] != NULL;
  S.c.beta1 = b1, S.c.beta2 = b2, S.c.one_minus_beta1 = 1 - b1, S.c.one_minus_beta2 = 1 - b2;
  S.c.lerp_small = fabs(S.f32 ? (double)(float)(1 - b1) : 1 - b1) < 0.5;
  S.c.eps = ud_kit_attr_float(a, UD_ATTR_ADAM_UPDATE_EPS);
  S.c.step_size = lr / (bc ? 1 - pow(b1, t) : 1.0);
  S.c.bc2_sqrt = bc ? sqrt(1 - pow(b2, t)) : 1.0;
  return go(&S, &a->inputs[0]);
}

const UD_X86Kernel ud_x86_optim_kernels[] = {
    {UD_OP_SGD_UPDATE, UD_X86_FLOAT, sgd_update},
    {UD_OP_ADAM_UPDATE, UD_X86_FLOAT, adam_update},
    {0, 0, NULL},
};
