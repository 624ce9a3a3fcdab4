/* pool2d.c — max, average and adaptive-average 2-d pooling and their backwards: geometry checks
 * (torch's output-size and padding rules) here, one ISPC call per [H, W] plane, planes split
 * over the pool. */
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
  const UD_Tensor *x, *y, *idx;       /* x or grad_x, y or grad_y, indices */
  atomic_int any_bad;                 /* an out-of-plane index was seen: then `bad` holds one */
  atomic_llong bad;
} Planes;

static char* plane(const UD_Tensor* t, int64_t p, int64_t c) {
  return (char*)ud_x86_ptr(t) +
         ((p / c) * t->strides[0] + (p % c) * t->strides[1]) * ud_kit_itemsize(t->dtype);
}

static void planes_task(void* ctx, int64_t begin, int64_t end) {
  Planes* P = ctx;
  const int f32 = P->dt == UD_F32;
  for (int64_t p = begin; p < end; p++) {
    char *x = plane(P->x, p, P->c), *y = plane(P->y, p, P->c);
    int64_t* idx = P->idx ? (int64_t*)plane(P->idx, p, P->c) : NULL;
    if (P->kind == P_MAX && !P->backward) {
      (f32 ? ud_max_pool_f32 : ud_max_pool_f64)(&P->g, x, y, idx);
    } else if (P->kind == P_MAX) {
      int64_t bad = 0;
      int none = 0;
      if (!(f32 ? ud_max_pool_backward_f32 : ud_max_pool_backward_f64)(&P->g, x, y, idx, &bad) &&
          atomic_compare_exchange_strong(&P->any_bad, &none, 1))
        atomic_store(&P->bad, (long long)bad);
    } else if (P->backward) { /* average and adaptive average */
      (f32 ? ud_avg_pool_backward_f32 : ud_avg_pool_backward_f64)(&P->g, x, y);
    } else {
      (f32 ? ud_avg_pool_f32 : ud_avg_pool_f64)(&P->g, x, y);
    }
  }
}

/* Reads an ints attribute of 2 values (or `fallback` when it is empty and fallback != NULL). */
static UD_Error* pair(const char* op, const UD_Attr* at, const int64_t* fallback, int64_t lo,
                      int64_t out[2]) {
  const int64_t n = at->value.ints.len;
  const int64_t* v = n == 0 && fallback ? fallback : at->value.ints.data;
  UD_REQUIRE((n == 2 || (n == 0 && fallback)) && v[0] >= lo && v[1] >= lo,
             "%s: attribute '%s' must be 2 values >= %lld%s", op, at->name ? at->name : "?",
             (long long)lo, fallback ? " (or empty)" : "");
  out[0] = v[0];
  out[1] = v[1];
  return NULL;
}

static int64_t out_extent(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, int ceil) {
  int64_t o = (size + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (o - 1) * s >= size + p) o--;
  return o;
}

static UD_Error* pool_kernel(const char* op, int kind, int backward, const UD_KernelArgs* a) {
  static const char* sigs[] = {"nnnnb", "nnnbb", "n"};
  static const char* names[2][3] = {{"x", "y", "indices"}, {"grad_x", "grad_y", "indices"}};
  Planes P = {.kind = kind, .backward = backward};
  atomic_init(&P.any_bad, 0);
  atomic_init(&P.bad, 0);
  const int nin = backward ? (kind == P_MAX ? 3 : 2) : 1;
  UD_TRY(ud_x86_check_args(op, a, nin, kind == P_MAX && !backward ? 2 : 1, sigs[kind]));
  const UD_Tensor* x = &a->inputs[backward];
  UD_TRY(ud_x86_check_dt(op, "x", x, UD_FLOAT_SET, &P.dt));
  UD_REQUIRE(x->ndim == 4, "%s: 'x' has ndim %d, expected 4 [N, C, H, W]", op, x->ndim);
  Geom* g = &P.g;
  int64_t k[2], s[2], p[2], d[2] = {1, 1};
  UD_TRY(pair(op, &a->attrs[0], NULL, 1, k)); /* output_size or kernel_size */
  if (kind == P_ADAPTIVE) {
    UD_REQUIRE(x->shape[2] && x->shape[3], "%s: 'x' has an empty plane", op);
    *g = (Geom){.h = x->shape[2], .w = x->shape[3], .oh = k[0], .ow = k[1], .adaptive = 1};
  } else {
    UD_TRY(pair(op, &a->attrs[1], k, 1, s));
    UD_TRY(pair(op, &a->attrs[2], NULL, 0, p));
    if (kind == P_MAX) UD_TRY(pair(op, &a->attrs[3], NULL, 1, d));
    UD_REQUIRE(p[0] <= k[0] / 2 && p[1] <= k[1] / 2,
               "%s: padding (%lld, %lld) must be at most half of kernel_size", op,
               (long long)p[0], (long long)p[1]);
    const int ceil = a->attrs[kind == P_MAX ? 4 : 3].value.b;
    const int64_t h = x->shape[2], w = x->shape[3];
    *g = (Geom){h, w, out_extent(h, k[0], s[0], p[0], d[0], ceil),
                out_extent(w, k[1], s[1], p[1], d[1], ceil), k[0], k[1], s[0], s[1], p[0], p[1],
                d[0], d[1], kind == P_AVG && a->attrs[4].value.b, 0, {0}, {0}, {0}};
    UD_REQUIRE(g->oh >= 1 && g->ow >= 1,
               "%s: 'x' plane %lldx%lld is too small for kernel_size (%lld, %lld)", op,
               (long long)h, (long long)w, (long long)k[0], (long long)k[1]);
  }
  /* x-shaped: x or grad_x; y-shaped: y or grad_y, and indices */
  P.x = backward ? &a->outputs[0] : x;
  P.y = backward ? &a->inputs[0] : &a->outputs[0];
  P.idx = kind != P_MAX ? NULL : backward ? &a->inputs[2] : &a->outputs[1];
  const int64_t yshape[4] = {x->shape[0], x->shape[1], g->oh, g->ow};
  const UD_Tensor* checks[3] = {P.x, P.y, P.idx};
  for (int i = 0; i < 3 && checks[i]; i++) {
    const int64_t* shape = i == 0 ? x->shape : yshape;
    UD_TRY(ud_kit_check_dtype(op, names[backward][i], checks[i],
                              i == 2 ? ud_x86_dtype(UD_I64) : x->dtype));
    UD_REQUIRE(checks[i]->ndim == 4 && !memcmp(checks[i]->shape, shape, sizeof yshape),
               "%s: '%s' must have shape [%lld, %lld, %lld, %lld]", op, names[backward][i],
               (long long)shape[0], (long long)shape[1], (long long)shape[2], (long long)shape[3]);
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
  ud_x86_parallel(planes, (1 << 15) / (work + 1) + 1, planes_task, &P);
  const long long bad = atomic_load(&P.bad);
  UD_REQUIRE(!atomic_load(&P.any_bad), "%s: 'indices' holds %lld, outside the input plane [0, %lld)", op, bad,
             (long long)(g->h * g->w));
  return NULL;
}

#define UD_POOL_KERNEL(NAME, KIND, BWD) \
  static UD_Error* k_##NAME(const UD_KernelArgs* a) { return pool_kernel(#NAME, KIND, BWD, a); }
UD_POOL_KERNEL(max_pool2d, P_MAX, 0)
UD_POOL_KERNEL(max_pool2d_backward, P_MAX, 1)
UD_POOL_KERNEL(avg_pool2d, P_AVG, 0)
UD_POOL_KERNEL(avg_pool2d_backward, P_AVG, 1)
UD_POOL_KERNEL(adaptive_avg_pool2d, P_ADAPTIVE, 0)
UD_POOL_KERNEL(adaptive_avg_pool2d_backward, P_ADAPTIVE, 1)

const UD_X86Kernel ud_x86_pool_kernels[] = {
    {"max_pool2d", UD_FLOAT_SET, k_max_pool2d},
    {"max_pool2d_backward", UD_FLOAT_SET, k_max_pool2d_backward},
    {"avg_pool2d", UD_FLOAT_SET, k_avg_pool2d},
    {"avg_pool2d_backward", UD_FLOAT_SET, k_avg_pool2d_backward},
    {"adaptive_avg_pool2d", UD_FLOAT_SET, k_adaptive_avg_pool2d},
    {"adaptive_avg_pool2d_backward", UD_FLOAT_SET, k_adaptive_avg_pool2d_backward},
    {NULL, 0, NULL},
};
