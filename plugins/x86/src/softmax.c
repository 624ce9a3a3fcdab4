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
      (R->dt == UD_DT_FLOAT32 ? ud_softmax_row_f32 : ud_softmax_row_f64)(
          R->n, p[0], R->astride[0], p[1], R->astride[1], R->log);
    else
      (R->dt == UD_DT_FLOAT32 ? ud_softmax_backward_row_f32 : ud_softmax_backward_row_f64)(
          R->n, p[0], R->astride[0], p[1], R->astride[1], p[2], R->astride[2], R->log);
  }
}

/* views[0] is the output; every view has views[0]'s shape. The log_ ops read their arguments
 * at the positions of softmax and softmax_backward (the UD_X86_SAME_POS lines below). */
static UD_Error* softmax_kernel(int id, const UD_KernelArgs* a, int log) {
  const UD_OpInfo* info = ud_op_info(id);
  const char* op = info->name;
  const int nin = info->num_inputs;
  Rows R = {.nv = nin + 1, .log = log};
  UD_KIT_TRY(ud_x86_check_args(id, a));
  const UD_Tensor* views[3] = {
      &a->outputs[0], &a->inputs[nin > 1 ? UD_IN_SOFTMAX_BACKWARD_GRAD_Y : UD_IN_SOFTMAX_X],
      nin > 1 ? &a->inputs[UD_IN_SOFTMAX_BACKWARD_Y] : NULL};
  UD_KIT_TRY(ud_kit_check_dtype_in(op, info->input_names[views[1] - a->inputs], views[1],
                                   UD_X86_FLOAT, &R.dt));
  for (int v = 0; v < R.nv; v++) {
    const char* name = v ? info->input_names[views[v] - a->inputs] : info->output_names[0];
    UD_KIT_TRY(ud_kit_check_dtype(op, name, views[v], views[1]->dtype));
    UD_KIT_TRY(ud_kit_check_same_shape(op, name, views[v], views[0]));
  }
  const UD_Tensor* y = views[0];
  int axis;
  UD_KIT_TRY(ud_x86_axis(op, a->attrs[UD_ATTR_SOFTMAX_AXIS].value.i, y->ndim, &axis));
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

#define UD_SOFTMAX_OPS(X) \
  X(SOFTMAX, 0) X(LOG_SOFTMAX, 1) X(SOFTMAX_BACKWARD, 0) X(LOG_SOFTMAX_BACKWARD, 1)
#define UD_SOFTMAX_KERNEL(K, LOG)                             \
  UD_X86_SAME_POS(UD_ATTR_##K##_AXIS, UD_ATTR_SOFTMAX_AXIS);  \
  static UD_Error* k_##K(const UD_KernelArgs* a) { return softmax_kernel(UD_OP_##K, a, LOG); }
UD_SOFTMAX_OPS(UD_SOFTMAX_KERNEL)
UD_X86_SAME_POS(UD_IN_LOG_SOFTMAX_X, UD_IN_SOFTMAX_X);
UD_X86_SAME_POS(UD_IN_LOG_SOFTMAX_BACKWARD_GRAD_Y, UD_IN_SOFTMAX_BACKWARD_GRAD_Y);
UD_X86_SAME_POS(UD_IN_LOG_SOFTMAX_BACKWARD_Y, UD_IN_SOFTMAX_BACKWARD_Y);

#define UD_SOFTMAX_ENTRY(K, LOG) {UD_OP_##K, UD_X86_FLOAT, k_##K},
const UD_X86Kernel ud_x86_softmax_kernels[] = {UD_SOFTMAX_OPS(UD_SOFTMAX_ENTRY){0, 0, NULL}};
