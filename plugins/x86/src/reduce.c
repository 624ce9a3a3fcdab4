/* reduce.c — sum, mean, max, min, prod, argmax, argmin over any axes of any strided view.
 *
 * The kept and the reduced dimensions are collapsed separately. When the reduced dimensions end
 * in a unit stride (or nothing else fits), every output element reduces its rows with one ISPC
 * call per row ("row" layout); when the kept dimensions are the contiguous ones (reducing over
 * an outer axis), tiles of output elements accumulate whole input rows ("column" layout). Large
 * work splits over output elements, or over the reduced range when there are few outputs. */
#include <math.h>

#include "reduce_ispc.h"
#include "x86.h"

#define UD_TILE 1024
#define UD_GRAIN (1 << 15) /* input elements per thread below which work stays on one core */

typedef void (*RowFn)(int64_t n, const void* x, int64_t st, void* acc, int64_t base,
                      int64_t* where);
typedef void (*ColFn)(int64_t n, void* acc, const void* x);
typedef void (*FinishFn)(int64_t n, void* out, int64_t st, const void* acc, double div);

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ARGMAX, R_ARGMIN };
typedef union {
  double f;
  int64_t i;
} Acc;

/* per-dtype functions, indexed by ops.h's UD_DT_* ids */
#define UD_BY_DT(F, OP)                                                                 \
  {[UD_DT_FLOAT32] = ud_##F##OP##_f32, [UD_DT_FLOAT64] = ud_##F##OP##_f64,            \
   [UD_DT_INT32] = ud_##F##OP##_i32, [UD_DT_INT64] = ud_##F##OP##_i64}
#define UD_ROWS(OP) UD_BY_DT(row_, OP)
#define UD_COLS(OP) UD_BY_DT(col_, OP)
static const struct {
  int op;
  RowFn row[UD_DT_COUNT];
  ColFn col[UD_DT_COUNT];
  Acc init[2]; /* the accumulator's start: float dtypes, integer dtypes */
} g_red[] = {
    {UD_OP_SUM, UD_ROWS(sum), UD_COLS(sum), {{.f = 0.0}, {.i = 0}}},
    {UD_OP_MEAN, UD_ROWS(sum), UD_COLS(sum), {{.f = 0.0}, {.i = 0}}},
    {UD_OP_MAX, UD_ROWS(max), UD_COLS(max), {{.f = -INFINITY}, {.i = INT64_MIN}}},
    {UD_OP_MIN, UD_ROWS(min), UD_COLS(min), {{.f = INFINITY}, {.i = INT64_MAX}}},
    {UD_OP_PROD, UD_ROWS(prod), UD_COLS(prod), {{.f = 1.0}, {.i = 1}}},
    {UD_OP_ARGMAX, UD_ROWS(argmax), {NULL}, {{.f = 0.0}, {.i = 0}}},
    {UD_OP_ARGMIN, UD_ROWS(argmin), {NULL}, {{.f = 0.0}, {.i = 0}}},
};
static const FinishFn g_finish[UD_DT_COUNT] = UD_BY_DT(finish, );

typedef struct {
  int op, dt, is_arg, kd, rd; /* kd/rd: collapsed kept/reduced ndim */
  int64_t kshape[UD_KIT_MAX_DIMS], kstr[2][UD_KIT_MAX_DIMS]; /* [0] x, [1] out */
  int64_t rshape[UD_KIT_MAX_DIMS], rstr[1][UD_KIT_MAX_DIMS];
  int64_t kept_n, red_n;
  const char* x;
  char* out;
  int xsize, osize;
  double div;
  Acc init; /* the accumulator's start value */
} Red;

/* Combine reduced elements [begin, end) (flat, row-major) of the input at `x` into acc/where. */
static void reduce_range(const Red* R, const char* x, int64_t begin, int64_t end, Acc* acc,
                         int64_t* where) {
  const RowFn row = g_red[R->op].row[R->dt];
  const int last = R->rd - 1;
  const int64_t inner = R->rshape[last], st = R->rstr[0][last];
  for (int64_t pos = begin; pos < end;) {
    const int64_t i = pos % inner;
    const int64_t n = inner - i < end - pos ? inner - i : end - pos;
    const int64_t off = ud_x86_offset(pos, R->rd, R->rshape, R->rstr[0]);
    row(n, x + off * R->xsize, st, acc, pos, where);
    pos += n;
  }
}

static void store(const Red* R, int64_t k, Acc acc, int64_t where) {
  char* out = R->out + ud_x86_offset(k, R->kd, R->kshape, R->kstr[1]) * R->osize;
  if (R->is_arg)
    *(int64_t*)out = where;
  else
    g_finish[R->dt](1, out, 1, &acc, R->div);
}

static void rows_task(void* ctx, int64_t begin, int64_t end) {
  const Red* R = ctx;
  if (R->kd == 1 && R->rd == 1 && !R->is_arg) { /* one strided row per output (e.g. a mean over
                                                * H, W): no flat-index arithmetic per row */
    const RowFn row = g_red[R->op].row[R->dt];
    for (int64_t k = begin; k < end; k++) {
      Acc acc = R->init;
      row(R->red_n, R->x + k * R->kstr[0][0] * R->xsize, R->rstr[0][0], &acc, 0, NULL);
      g_finish[R->dt](1, R->out + k * R->kstr[1][0] * R->osize, 1, &acc, R->div);
    }
    return;
  }
  for (int64_t k = begin; k < end; k++) {
    Acc acc = R->init;
    int64_t where = -1;
    const char* x = R->x + ud_x86_offset(k, R->kd, R->kshape, R->kstr[0]) * R->xsize;
    reduce_range(R, x, 0, R->red_n, &acc, &where);
    store(R, k, acc, where);
  }
}

/* Few outputs, long reductions: each output's reduced range is split over the pool. */
typedef struct {
  const Red* R;
  const char* x;
  int64_t part;
  Acc acc[64];
  int64_t where[64];
} Split;

static void split_task(void* ctx, int64_t begin, int64_t end) {
  Split* S = ctx;
  for (int64_t p = begin; p < end; p++) {
    int64_t lo = p * S->part, hi = lo + S->part < S->R->red_n ? lo + S->part : S->R->red_n;
    S->acc[p] = S->R->init;
    S->where[p] = -1;
    if (lo < hi) reduce_range(S->R, S->x, lo, hi, &S->acc[p], &S->where[p]);
  }
}

static void reduce_split(const Red* R) {
  int parts = 4 * ud_x86_threads() > 64 ? 64 : 4 * ud_x86_threads(); /* see ud_x86_parallel */
  for (int64_t k = 0; k < R->kept_n; k++) {
    Split S = {R, R->x + ud_x86_offset(k, R->kd, R->kshape, R->kstr[0]) * R->xsize,
               (R->red_n + parts - 1) / parts, {{0}}, {0}};
    ud_x86_parallel(parts, 1, split_task, &S);
    /* the partials are accumulators (double or int64): combine them with the f64/i64 rows */
    const int wide = (UD_X86_FLOAT >> R->dt & 1) ? UD_DT_FLOAT64 : UD_DT_INT64;
    Acc acc = R->init;
    int64_t best = -1; /* argmax/argmin: the winning part */
    for (int p = 0; R->is_arg && p < parts; p++) /* drop empty parts: their value means nothing */
      if (S.where[p] < 0) S.acc[p] = S.acc[0];
    g_red[R->op].row[wide](parts, S.acc, 1, &acc, 0, &best);
    store(R, k, acc, R->is_arg ? S.where[best] : -1);
  }
}

/* Column layout: tiles of contiguous output elements accumulate whole input rows. */
static void cols_task(void* ctx, int64_t begin, int64_t end) {
  const Red* R = ctx;
  const ColFn col = g_red[R->op].col[R->dt];
  const int last = R->kd - 1;
  const int64_t inner = R->kshape[last], tiles = (inner + UD_TILE - 1) / UD_TILE;
  _Alignas(64) Acc acc[UD_TILE];
  for (int64_t t = begin; t < end; t++) {
    const int64_t outer = t / tiles, j0 = (t % tiles) * UD_TILE;
    const int64_t n = inner - j0 < UD_TILE ? inner - j0 : UD_TILE;
    const int64_t kflat = outer * inner + j0;
    const char* x = R->x + ud_x86_offset(kflat, R->kd, R->kshape, R->kstr[0]) * R->xsize;
    char* out = R->out + ud_x86_offset(kflat, R->kd, R->kshape, R->kstr[1]) * R->osize;
    for (int64_t j = 0; j < n; j++) acc[j] = R->init;
    for (int64_t r = 0; r < R->red_n; r++)
      col(n, acc, x + ud_x86_offset(r, R->rd, R->rshape, R->rstr[0]) * R->xsize);
    g_finish[R->dt](n, out, R->kstr[1][last], acc, R->div);
  }
}

static UD_Error* reduce_kernel(int op, uint32_t dtypes, const UD_KernelArgs* a) {
  const char* name = ud_op_info(g_red[op].op)->name;
  Red R = {.op = op, .is_arg = op >= R_ARGMAX};
  UD_KIT_TRY(ud_x86_check_args(g_red[op].op, a));
  const UD_Tensor *x = &a->inputs[UD_IN_SUM_X], *y = &a->outputs[UD_OUT_SUM_Y];
  UD_KIT_TRY(ud_kit_check_dtype_in(name, "x", x, dtypes, &R.dt));
  UD_KIT_TRY(ud_kit_check_dtype(name, ud_op_info(g_red[op].op)->output_names[0], y,
                                R.is_arg ? ud_dtype_of(UD_DT_INT64) : x->dtype));
  const int64_t* axes = a->attrs[UD_ATTR_SUM_AXES].value.ints.data;
  const int64_t naxes = a->attrs[UD_ATTR_SUM_AXES].value.ints.len;
  const int keepdims = a->attrs[UD_ATTR_SUM_KEEPDIMS].value.b;
  UD_KIT_REQUIRE(!R.is_arg || naxes <= 1, UD_ERR_INVALID_ARGUMENT,
                 "%s: 'axes' has %lld axes, expected at most 1", name, (long long)naxes);
  int reduced[UD_KIT_MAX_DIMS] = {0};
  for (int64_t i = 0; i < naxes; i++) {
    int ax;
    UD_KIT_TRY(ud_x86_axis(name, axes[i], x->ndim, &ax));
    UD_KIT_REQUIRE(x->ndim == 0 || !reduced[ax], UD_ERR_INVALID_ARGUMENT,
                   "%s: axis %lld appears twice in 'axes'", name, (long long)axes[i]);
    reduced[ax] = x->ndim > 0;
  }
  /* split x's dims into kept and reduced; check y's shape and align its strides with x's */
  int64_t ystr[UD_KIT_MAX_DIMS];
  unsigned red_mask = 0;
  int yd = 0, shape_ok = 1;
  R.kept_n = R.red_n = 1;
  for (int k = 0; k < x->ndim; k++) {
    const int red = naxes == 0 || reduced[k];
    red_mask |= (unsigned)red << k;
    *(red ? &R.red_n : &R.kept_n) *= x->shape[k];
    if (red && !keepdims) continue;
    shape_ok &= yd < y->ndim && y->shape[yd] == (red ? 1 : x->shape[k]);
    ystr[k] = yd < y->ndim ? y->strides[yd++] : 0;
  }
  UD_KIT_REQUIRE(shape_ok && yd == y->ndim, UD_ERR_INVALID_ARGUMENT,
                 "%s: output 'y' has ndim %d or a shape that does not match x reduced over 'axes' "
                 "(keepdims=%d)", name, y->ndim, keepdims);
  if (R.kept_n == 0) return NULL;
  UD_KIT_REQUIRE(R.red_n > 0 || op == R_SUM || op == R_MEAN || op == R_PROD,
                 UD_ERR_INVALID_ARGUMENT, "%s: reducing an empty axis has no identity", name);
  R.x = ud_x86_ptr(x);
  R.out = ud_x86_ptr(y);
  R.xsize = (int)ud_kit_itemsize(x->dtype);
  R.osize = (int)ud_kit_itemsize(y->dtype);
  R.div = op == R_MEAN ? (double)R.red_n : 1.0;
  R.init = g_red[op].init[!(UD_X86_FLOAT >> R.dt & 1)];
  UD_Tensor y_as_x = *x; /* y's strides along x's kept dims */
  y_as_x.strides = ystr;
  const UD_Tensor* views[2] = {x, &y_as_x};
  R.kd = ud_x86_collapse_views(2, views, red_mask, R.kshape, R.kstr);
  R.rd = ud_x86_collapse_views(1, views, ~red_mask, R.rshape, R.rstr);
  if (R.is_arg && x->ndim > 1 && naxes == 0) { /* the index is row-major in x's dim order */
    const int64_t* xs[1] = {x->strides};
    R.rd = ud_kit_collapse(x->ndim, x->shape, 1, xs, R.rshape, R.rstr);
    if (R.rd == 0) R.rd = R.rshape[0] = R.rstr[0][0] = 1;
  }
  if (R.red_n == 0) {
    for (int64_t k = 0; k < R.kept_n; k++) store(&R, k, R.init, -1);
    return NULL;
  }
  const int threads = ud_x86_threads();
  const int cols = !R.is_arg && R.rstr[0][R.rd - 1] != 1 && R.kstr[0][R.kd - 1] == 1;
  if (cols) {
    const int64_t inner = R.kshape[R.kd - 1];
    const int64_t tiles = R.kept_n / inner * ((inner + UD_TILE - 1) / UD_TILE);
    const int64_t per_tile = R.red_n * (inner < UD_TILE ? inner : UD_TILE);
    ud_x86_parallel(tiles, UD_GRAIN / per_tile + 1, cols_task, &R);
  } else if (R.kept_n < threads && R.red_n >= 2 * UD_GRAIN) {
    reduce_split(&R);
  } else {
    ud_x86_parallel(R.kept_n, UD_GRAIN / R.red_n + 1, rows_task, &R);
  }
  return NULL;
}

/* every reduction reads its input, output and attributes at sum's positions */
#define UD_RED_OPS(X) \
  X(SUM, NUMERIC) X(MEAN, FLOAT) X(MAX, NUMERIC) X(MIN, NUMERIC) X(PROD, NUMERIC) \
  X(ARGMAX, NUMERIC) X(ARGMIN, NUMERIC)
#define UD_RED_KERNEL(K, G)                                                      \
  UD_X86_SAME_POS(UD_IN_##K##_X, UD_IN_SUM_X);                                   \
  UD_X86_SAME_POS(UD_ATTR_##K##_AXES, UD_ATTR_SUM_AXES);                         \
  UD_X86_SAME_POS(UD_ATTR_##K##_KEEPDIMS, UD_ATTR_SUM_KEEPDIMS);                 \
  static UD_Error* k_##K(const UD_KernelArgs* a) { return reduce_kernel(R_##K, UD_X86_##G, a); }
UD_RED_OPS(UD_RED_KERNEL)
#define UD_RED_ENTRY(K, G) {UD_OP_##K, UD_X86_##G, k_##K},
const UD_X86Kernel ud_x86_reduce_kernels[] = {UD_RED_OPS(UD_RED_ENTRY){0, 0, NULL}};
