/* pool2d.c — max, average and adaptive-average 2-d pooling and their backwards: geometry checks
 * (torch's output-size and padding rules) here, one ISPC call per [H, W] plane, planes split
 * over the pool. Channels-last tensors (x channels-last, every tensor of unit channel stride)
 * run one ISPC call per image and block of channels instead, channels in the lanes. Any other
 * strides are read and written in place (no layout copy). */
#include <stdatomic.h>
#include <string.h>

#include "nn_ispc.h"
#include "x86.h"

typedef struct UD_Pool2d Geom; /* ispc/pool2d.h, as nn_ispc.h declares it */

enum { P_MAX, P_AVG, P_ADAPTIVE };

typedef struct {
  int kind, backward, dt;
  Geom g;
  int64_t c;                          /* channels: plane p is (p / c, p % c) */
  int cl;                             /* channels-last: task p is image p / nb, block p % nb */
  int64_t nb, cbs;                    /* channel blocks per image, channels per block */
  const UD_Tensor *x, *y, *idx;       /* x or grad_x, y or grad_y, indices */
  atomic_int any_bad;                 /* an out-of-plane index was seen: then `bad` holds one */
  atomic_llong bad;
} Planes;

/* Task p's part of tensor t: plane p (image p / c, channel p % c), or channels-last, image
 * p / nb's channel block p % nb. */
static char* part(const Planes* P, const UD_Tensor* t, int64_t p) {
  const int64_t n = P->cl ? p / P->nb : p / P->c, c = P->cl ? p % P->nb * P->cbs : p % P->c;
  const int64_t off = n * t->strides[0] + c * t->strides[1];
  return (char*)ud_x86_ptr(t) + off * ud_kit_itemsize(t->dtype);
}

static void planes_task(void* ctx, int64_t begin, int64_t end) {
  Planes* P = ctx;
  const int f32 = P->dt == UD_DT_FLOAT32, cl = P->cl;
  for (int64_t p = begin; p < end; p++) {
    char *x = part(P, P->x, p), *y = part(P, P->y, p);
    int64_t* idx = P->idx ? (int64_t*)part(P, P->idx, p) : NULL;
    const int64_t c0 = cl ? p % P->nb * P->cbs : 0, nc = P->c - c0 < P->cbs ? P->c - c0 : P->cbs;
    if (P->kind == P_MAX && !P->backward) {
      if (cl) (f32 ? ud_max_pool_cl_f32 : ud_max_pool_cl_f64)(&P->g, nc, x, y, idx);
      else (f32 ? ud_max_pool_f32 : ud_max_pool_f64)(&P->g, x, y, idx);
    } else if (P->kind == P_MAX) {
      int64_t bad = 0;
      int none = 0;
      const int ok =
          cl ? (f32 ? ud_max_pool_backward_cl_f32 : ud_max_pool_backward_cl_f64)(&P->g, nc, x, y,
                                                                                idx, &bad)
             : (f32 ? ud_max_pool_backward_f32 : ud_max_pool_backward_f64)(&P->g, x, y, idx, &bad);
      if (!ok && atomic_compare_exchange_strong(&P->any_bad, &none, 1))
        atomic_store(&P->bad, (long long)bad);
    } else if (P->backward) { /* average and adaptive average */
      if (cl) (f32 ? ud_avg_pool_backward_cl_f32 : ud_avg_pool_backward_cl_f64)(&P->g, nc, x, y);
      else (f32 ? ud_avg_pool_backward_f32 : ud_avg_pool_backward_f64)(&P->g, x, y);
    } else {
      if (cl) (f32 ? ud_avg_pool_cl_f32 : ud_avg_pool_cl_f64)(&P->g, nc, x, y);
      else (f32 ? ud_avg_pool_f32 : ud_avg_pool_f64)(&P->g, x, y);
    }
  }
}

/* Reads an ints attribute of 2 values (or `fallback` when it is empty and fallback != NULL). */
static UD_Error* pair(const char* op, const UD_Attr* at, const int64_t* fallback, int64_t lo,
                      int64_t out[2]) {
  const int64_t n = at->value.ints.len;
  const int64_t* v = n == 0 && fallback ? fallback : at->value.ints.data;
  UD_KIT_REQUIRE((n == 2 || (n == 0 && fallback)) && v[0] >= lo && v[1] >= lo,
                 UD_ERR_INVALID_ARGUMENT, "%s: attribute '%s' must be 2 values >= %lld%s", op,
                 at->name ? at->name : "?", (long long)lo, fallback ? " (or empty)" : "");
  out[0] = v[0];
  out[1] = v[1];
  return NULL;
}

static int64_t out_extent(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, int ceil) {
  int64_t o = (size + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= size + p) o--;
  return o;
}

/* Every pool reads its arguments at max_pool2d's positions (or avg_pool2d's, where they differ;
 * the UD_X86_SAME_POS lines below), the backwards at max_pool2d_backward's. */
static UD_Error* pool_kernel(int id, int kind, int backward, const UD_KernelArgs* a) {
  const char* op = ud_op_info(id)->name;
  Planes P = {.kind = kind, .backward = backward};
  atomic_init(&P.any_bad, 0);
  atomic_init(&P.bad, 0);
  UD_KIT_TRY(ud_x86_check_args(id, a));
  const UD_Tensor* x = &a->inputs[backward ? UD_IN_MAX_POOL2D_BACKWARD_X : UD_IN_MAX_POOL2D_X];
  UD_KIT_TRY(ud_kit_check_dtype_in(op, "x", x, UD_X86_FLOAT, &P.dt));
  UD_KIT_REQUIRE(x->ndim == 4, UD_ERR_INVALID_ARGUMENT,
                 "%s: 'x' has ndim %d, expected 4 [N, C, H, W]", op, x->ndim);
  Geom* g = &P.g;
  int64_t k[2], s[2], p[2], d[2] = {1, 1};
  UD_KIT_TRY(pair(op, &a->attrs[UD_ATTR_MAX_POOL2D_KERNEL_SIZE], NULL, 1, k)); /* or output_size */
  if (kind == P_ADAPTIVE) {
    UD_KIT_REQUIRE(x->shape[2] && x->shape[3], UD_ERR_INVALID_ARGUMENT,
                   "%s: 'x' has an empty plane", op);
    *g = (Geom){.h = x->shape[2], .w = x->shape[3], .oh = k[0], .ow = k[1], .adaptive = 1};
  } else {
    UD_KIT_TRY(pair(op, &a->attrs[UD_ATTR_MAX_POOL2D_STRIDE], k, 1, s));
    UD_KIT_TRY(pair(op, &a->attrs[UD_ATTR_MAX_POOL2D_PADDING], NULL, 0, p));
    if (kind == P_MAX) UD_KIT_TRY(pair(op, &a->attrs[UD_ATTR_MAX_POOL2D_DILATION], NULL, 1, d));
    UD_KIT_REQUIRE(p[0] <= k[0] / 2 && p[1] <= k[1] / 2, UD_ERR_INVALID_ARGUMENT,
                   "%s: padding (%lld, %lld) must be at most half of kernel_size", op,
                   (long long)p[0], (long long)p[1]);
    const int ceil_at = kind == P_MAX ? UD_ATTR_MAX_POOL2D_CEIL_MODE : UD_ATTR_AVG_POOL2D_CEIL_MODE;
    const int ceil = a->attrs[ceil_at].value.b;
    const int include_pad = kind == P_AVG && a->attrs[UD_ATTR_AVG_POOL2D_COUNT_INCLUDE_PAD].value.b;
    const int64_t h = x->shape[2], w = x->shape[3];
    *g = (Geom){h, w, out_extent(h, k[0], s[0], p[0], d[0], ceil),
                out_extent(w, k[1], s[1], p[1], d[1], ceil), k[0], k[1], s[0], s[1], p[0], p[1],
                d[0], d[1], include_pad, 0, {0}, {0}, {0}};
    UD_KIT_REQUIRE(g->oh >= 1 && g->ow >= 1, UD_ERR_INVALID_ARGUMENT,
                   "%s: 'x' plane %lldx%lld is too small for kernel_size (%lld, %lld)", op,
                   (long long)h, (long long)w, (long long)k[0], (long long)k[1]);
  }
  /* x-shaped: x or grad_x; y-shaped: y or grad_y, and indices */
  P.x = backward ? &a->outputs[UD_OUT_MAX_POOL2D_BACKWARD_GRAD_X] : x;
  P.y = backward ? &a->inputs[UD_IN_MAX_POOL2D_BACKWARD_GRAD_Y] : &a->outputs[UD_OUT_MAX_POOL2D_Y];
  P.idx = kind != P_MAX ? NULL
          : backward    ? &a->inputs[UD_IN_MAX_POOL2D_BACKWARD_INDICES]
                        : &a->outputs[UD_OUT_MAX_POOL2D_INDICES];
  const int64_t yshape[4] = {x->shape[0], x->shape[1], g->oh, g->ow};
  const UD_Tensor* checks[3] = {P.x, P.y, P.idx};
  for (int i = 0; i < 3 && checks[i]; i++) {
    const int64_t* shape = i == 0 ? x->shape : yshape;
    const char* name = ud_x86_arg_name(id, a, checks[i]);
    UD_KIT_TRY(ud_kit_check_dtype(op, name, checks[i],
                                  i == 2 ? ud_dtype_of(UD_DT_INT64) : x->dtype));
    UD_KIT_REQUIRE(checks[i]->ndim == 4 && !memcmp(checks[i]->shape, shape, sizeof yshape),
                   UD_ERR_INVALID_ARGUMENT, "%s: '%s' must have shape [%lld, %lld, %lld, %lld]",
                   op, name, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                   (long long)shape[3]);
  }
  P.c = x->shape[1];
  for (int j = 0; j < 2; j++) {
    g->xs[j] = P.x->strides[2 + j];
    g->ys[j] = P.y->strides[2 + j];
    g->is[j] = P.idx ? P.idx->strides[2 + j] : 0;
  }
  const int64_t planes = x->shape[0] * x->shape[1];
  const int64_t work = (g->h * g->w + g->oh * g->ow) * (g->adaptive ? 1 : g->kh * g->kw);
  if (planes == 0 || (backward ? g->h * g->w : g->oh * g->ow) == 0) return NULL;
  P.cl = P.c > 1 && ud_x86_layout4(x) == UD_X86_NHWC && P.x->strides[1] == 1 &&
         P.y->strides[1] == 1 && (!P.idx || P.idx->strides[1] == 1);
  if (P.cl) { /* blocks of >= 16 channels, about four per core (whole images when N allows) */
    P.nb = 1;
    while (x->shape[0] * P.nb < 4 * ud_x86_threads() && P.c / (2 * P.nb) >= 16) P.nb *= 2;
    P.cbs = (P.c + P.nb - 1) / P.nb;
    P.nb = (P.c + P.cbs - 1) / P.cbs;
    ud_x86_parallel(x->shape[0] * P.nb, (1 << 15) / (work * P.cbs + 1) + 1, planes_task, &P);
  } else {
    ud_x86_parallel(planes, (1 << 15) / (work + 1) + 1, planes_task, &P);
  }
  const long long bad = atomic_load(&P.bad);
  UD_KIT_REQUIRE(!atomic_load(&P.any_bad), UD_ERR_INVALID_ARGUMENT,
                 "%s: 'indices' holds %lld, outside the input plane [0, %lld)", op, bad,
                 (long long)(g->h * g->w));
  return NULL;
}

#define UD_POOL_OPS(X)                                                                     \
  X(MAX_POOL2D, P_MAX, 0) X(MAX_POOL2D_BACKWARD, P_MAX, 1) X(AVG_POOL2D, P_AVG, 0)             \
  X(AVG_POOL2D_BACKWARD, P_AVG, 1) X(ADAPTIVE_AVG_POOL2D, P_ADAPTIVE, 0)                       \
  X(ADAPTIVE_AVG_POOL2D_BACKWARD, P_ADAPTIVE, 1)
#define UD_POOL_KERNEL(K, KIND, BWD) \
  static UD_Error* k_##K(const UD_KernelArgs* a) { return pool_kernel(UD_OP_##K, KIND, BWD, a); }
UD_POOL_OPS(UD_POOL_KERNEL)
#define UD_POOL_ENTRY(K, KIND, BWD) {UD_OP_##K, UD_X86_FLOAT, k_##K},
const UD_X86Kernel ud_x86_pool_kernels[] = {UD_POOL_OPS(UD_POOL_ENTRY){0, 0, NULL}};

/* the shared positions pool_kernel reads: each backward's are its forward's, avg_pool2d's and
 * adaptive_avg_pool2d's are max_pool2d's where they share a name (output_size: kernel_size) */
#define UD_SAME(A, B) UD_X86_SAME_POS(UD_##A, UD_##B);
#define UD_BWD(F, A) UD_SAME(ATTR_##F##_BACKWARD_##A, ATTR_##F##_##A)
#define UD_AVG(F, A) UD_SAME(ATTR_AVG_POOL2D_##A, ATTR_MAX_POOL2D_##A)
#define UD_POOL_COMMON(F, X) X(F, KERNEL_SIZE) X(F, STRIDE) X(F, PADDING)
UD_POOL_COMMON(MAX_POOL2D, UD_BWD) UD_BWD(MAX_POOL2D, DILATION) UD_BWD(MAX_POOL2D, CEIL_MODE)
UD_POOL_COMMON(AVG_POOL2D, UD_BWD) UD_BWD(AVG_POOL2D, CEIL_MODE)
UD_BWD(AVG_POOL2D, COUNT_INCLUDE_PAD) UD_BWD(ADAPTIVE_AVG_POOL2D, OUTPUT_SIZE)
UD_POOL_COMMON(, UD_AVG) UD_SAME(ATTR_ADAPTIVE_AVG_POOL2D_OUTPUT_SIZE, ATTR_MAX_POOL2D_KERNEL_SIZE)
#define UD_IN(F, A) UD_SAME(IN_##F##_##A, IN_MAX_POOL2D_##A)
UD_IN(AVG_POOL2D, X) UD_IN(ADAPTIVE_AVG_POOL2D, X) UD_IN(AVG_POOL2D, BACKWARD_X)
UD_IN(ADAPTIVE_AVG_POOL2D, BACKWARD_X) UD_IN(AVG_POOL2D, BACKWARD_GRAD_Y)
UD_IN(ADAPTIVE_AVG_POOL2D, BACKWARD_GRAD_Y)
