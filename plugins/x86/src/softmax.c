/* softmax.c — softmax, log_softmax and their backwards: one ISPC call per row along the axis,
 * rows (the other dimensions, collapsed) split over the pool. */
#include <stdbool.h>

#include "softmax_ispc.h"
#include "x86.h"

#define UD_GRAIN (1 << 14) /* elements per thread below which rows stay on one core */

typedef struct {
  int nv, kd, dt, log;
  int64_t n;                                   /* row length */
  int64_t astride[3];                          /* strides along the axis, per view */
  int64_t kshape[UD_KIT_MAX_DIMS], kstr[3][UD_KIT_MAX_DIMS];
  char* base[3];                               /* [0] output, then inputs */
  int size;
} Rows;

static void rows_task(void* ctx, int64_t begin, int64_t end) {
  const Rows* R = ctx;
  for (int64_t r = begin; r < end; r++) {
    char* p[3];
    for (int v = 0; v < R->nv; v++)
      p[v] = R->base[v] + ud_x86_offset(r, R->kd, R->kshape, R->kstr[v]) * R->size;
    if (R->nv == 2)
      (R->dt == UD_F32 ? ud_softmax_row_f32 : ud_softmax_row_f64)(R->n, p[0], R->astride[0], p[1],
                                                                  R->astride[1], R->log);
    else
      (R->dt == UD_F32 ? ud_softmax_backward_row_f32 : ud_softmax_backward_row_f64)(
          R->n, p[0], R->astride[0], p[1], R->astride[1], p[2], R->astride[2], R->log);
  }
}

/* views[0] is the output; every view has views[0]'s shape. */
static UD_Error* softmax_kernel(const char* op, const UD_KernelArgs* a, int nin, int log) {
  Rows R = {.nv = nin + 1, .log = log};
  UD_TRY(ud_x86_check_args(op, a, nin, 1, "i"));
  UD_TRY(ud_x86_check_dt(op, nin == 1 ? "x" : "grad_y", &a->inputs[0], UD_FLOAT_SET, &R.dt));
  const UD_Tensor* views[3] = {&a->outputs[0], &a->inputs[0], nin > 1 ? &a->inputs[1] : NULL};
  static const char* names[2][3] = {{"y", "x", ""}, {"grad_x", "grad_y", "y"}};
  for (int v = 0; v < R.nv; v++) {
    UD_TRY(ud_kit_check_dtype(op, names[nin - 1][v], views[v], a->inputs[0].dtype));
    UD_TRY(ud_kit_check_same_shape(op, names[nin - 1][v], views[v], views[0]));
  }
  const UD_Tensor* y = views[0];
  int axis;
  UD_TRY(ud_x86_axis(op, a->attrs[0].value.i, y->ndim, &axis));
  const int64_t total = ud_kit_numel(y);
  if (total == 0) return NULL;
  R.n = y->ndim ? y->shape[axis] : 1;
  for (int v = 0; v < R.nv; v++) {
    R.astride[v] = y->ndim ? views[v]->strides[axis] : 1;
    R.base[v] = ud_x86_ptr(views[v]);
  }
  R.kd = ud_x86_collapse_views(R.nv, views, 1u << axis, R.kshape, R.kstr);
  R.size = (int)ud_kit_itemsize(y->dtype);
  ud_x86_parallel(total / R.n, UD_GRAIN / R.n + 1, rows_task, &R);
  return NULL;
}

#define UD_SOFTMAX_KERNEL(NAME, NIN, LOG) \
  static UD_Error* k_##NAME(const UD_KernelArgs* a) { return softmax_kernel(#NAME, a, NIN, LOG); }
UD_SOFTMAX_KERNEL(softmax, 1, 0)
UD_SOFTMAX_KERNEL(log_softmax, 1, 1)
UD_SOFTMAX_KERNEL(softmax_backward, 2, 0)
UD_SOFTMAX_KERNEL(log_softmax_backward, 2, 1)

const UD_X86Kernel ud_x86_softmax_kernels[] = {
    {"softmax", UD_FLOAT_SET, k_softmax},
    {"log_softmax", UD_FLOAT_SET, k_log_softmax},
    {"softmax_backward", UD_FLOAT_SET, k_softmax_backward},
    {"log_softmax_backward", UD_FLOAT_SET, k_log_softmax_backward},
    {NULL, 0, NULL},
};
