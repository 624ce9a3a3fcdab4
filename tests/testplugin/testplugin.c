/* testplugin.c — the test plugin "testdev": the scaffold's generated plugin plus add, mul, matmul,
 * elementwise_program and the loader tests' build switches, layered on top without editing the
 * generated sources.
 *
 * src/ is `unidev new-plugin`'s C sources for "testdev" (tests/testplugin/__init__.py writes
 * them; tests/conformance/test_scaffold.py checks they are current). This file includes those
 * translation units, so the extra kernels reuse their helpers (at, load, store, next,
 * check_call), and wraps the generated table. wrongplugin.c and crashplugin.c include this file
 * the same way, with unidev_get_api renamed; they use kernel_lookup, device_count and k_*.
 * Build: cc -std=c17 -shared -fPIC -I<unidev/contract/include> testplugin.c -lpthread -lm
 * Switches: -DTESTPLUGIN_DEVICES=N (default 2; 0: no devices, with a reason);
 * -DTESTPLUGIN_ABI_MAJOR=N / -DTESTPLUGIN_ABI_MINOR=N claim another ABI version;
 * -DUD_TESTPLUGIN_ABI_1_0 a 1.0-sized table (struct_size UD_API_SIZE_1_0, abi_minor 0, no
 * mem_device; the bytes past it are garbage, so a loader that reads them fails loudly);
 * -DUD_TESTPLUGIN_ABI_1_1 likewise a 1.1-sized one (mem_device, no kernel_compile).
 * Tier 4 (float32/float64): elementwise_program through the kit's program parser and evaluator,
 * kernel_compile (1.2) for it, and naive conv2d_bias_act / gemm_bias_act. */
#include <pthread.h>

#ifndef TESTPLUGIN_DEVICES
#define TESTPLUGIN_DEVICES 2
#endif
#define PLUGIN_DEVICES TESTPLUGIN_DEVICES

/* the generated table is wrapped below; an includer may have renamed unidev_get_api already */
#pragma push_macro("unidev_get_api")
#undef unidev_get_api
#define unidev_get_api scaffold_get_api
#include "src/plugin.c"
#include "src/memory.c"
#include "src/kernels.c"
#undef unidev_get_api
#pragma pop_macro("unidev_get_api")

#ifndef TESTPLUGIN_ABI_MAJOR
#define TESTPLUGIN_ABI_MAJOR UD_ABI_MAJOR
#endif
#ifndef TESTPLUGIN_ABI_MINOR
#define TESTPLUGIN_ABI_MINOR UD_ABI_MINOR
#endif

static UD_Error* binary(int op, const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(op, a));
  const char* name = ud_op_info(op)->name;
  const UD_Tensor *x = &a->inputs[0], *y = &a->inputs[1], *out = &a->outputs[0];
  UD_KIT_TRY(ud_kit_check_same_shape(name, "x", x, out));
  UD_KIT_TRY(ud_kit_check_same_shape(name, "y", y, out));
  UD_KIT_TRY(ud_kit_check_dtype_in(name, "x", x, ud_op_info(op)->dtypes, NULL));
  UD_KIT_TRY(ud_kit_check_dtype(name, "y", y, x->dtype));
  UD_KIT_TRY(ud_kit_check_dtype(name, "out", out, x->dtype));
  const int is_mul = op == UD_OP_MUL, fl = x->dtype.code == UD_DTYPE_FLOAT;
  const double alpha = is_mul ? 1.0 : ud_kit_attr_float(a, UD_ATTR_ADD_ALPHA);
  UD_KIT_TRY(ud_kit_check_scalars(op, a, x->dtype)); /* add's alpha; mul has none */
  if (ud_kit_numel(out) == 0) return NULL;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do {
    Value u = load(x->dtype, at(x, idx)), v = load(y->dtype, at(y, idx)), r = {0, 0};
    if (fl) r.f = is_mul ? u.f * v.f : u.f + alpha * v.f;
    else if (is_mul) r.i = (int64_t)((uint64_t)u.i * (uint64_t)v.i);
    else r.i = (int64_t)((uint64_t)u.i + (uint64_t)((int64_t)alpha * v.i));
    store(out->dtype, at(out, idx), r, fl);
  } while (next(out->ndim, out->shape, idx));
  return NULL;
}
static UD_Error* k_add(const UD_KernelArgs* a) { return binary(UD_OP_ADD, a); }
static UD_Error* k_mul(const UD_KernelArgs* a) { return binary(UD_OP_MUL, a); }

static UD_Error* k_matmul(const UD_KernelArgs* a) {
  UD_KIT_TRY(check_call(UD_OP_MATMUL, a));
  const UD_Tensor *x = &a->inputs[0], *w = &a->inputs[1], *out = &a->outputs[0];
  const int n = out->ndim;
  UD_KIT_REQUIRE(n >= 2 && x->ndim == n && w->ndim == n, UD_ERR_INVALID_ARGUMENT,
                 "matmul: a, b, out have ndim %d, %d, %d, expected one ndim >= 2", x->ndim,
                 w->ndim, n);
  const int64_t M = out->shape[n - 2], N = out->shape[n - 1], K = x->shape[n - 1];
  UD_KIT_REQUIRE(x->shape[n - 2] == M && w->shape[n - 2] == K && w->shape[n - 1] == N,
                 UD_ERR_INVALID_ARGUMENT,
                 "matmul: shapes do not agree (a [..,%lld,%lld], b [..,%lld,%lld], out "
                 "[..,%lld,%lld])", (long long)x->shape[n - 2], (long long)K,
                 (long long)w->shape[n - 2], (long long)w->shape[n - 1], (long long)M,
                 (long long)N);
  for (int d = 0; d < n - 2; d++)
    UD_KIT_REQUIRE(x->shape[d] == out->shape[d] && w->shape[d] == out->shape[d],
                   UD_ERR_INVALID_ARGUMENT, "matmul: batch dim %d differs", d);
  UD_KIT_TRY(ud_kit_check_dtype_in("matmul", "a", x, UD_DTM_FLOAT32, NULL));
  UD_KIT_TRY(ud_kit_check_dtype("matmul", "b", w, x->dtype));
  UD_KIT_TRY(ud_kit_check_dtype("matmul", "out", out, x->dtype));
  if (ud_kit_numel(out) == 0) return NULL;
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  do { /* idx runs over out; the k loop walks a's row and b's column */
    int64_t ai[UD_KIT_MAX_DIMS], bi[UD_KIT_MAX_DIMS];
    memcpy(ai, idx, sizeof ai);
    memcpy(bi, idx, sizeof bi);
    Value r = {0, 0};
    for (int64_t k = 0; k < K; k++) {
      ai[n - 1] = k;
      bi[n - 2] = k;
      r.f += load(x->dtype, at(x, ai)).f * load(w->dtype, at(w, bi)).f;
    }
    store(out->dtype, at(out, idx), r, 1);
  } while (next(n, out->shape, idx));
  return NULL;
}

/* elementwise_program through the kit's parser and scalar evaluator, in double: each element
 * of S (the inputs' shape) is evaluated; with a reduction every output cell (S's leading dims)
 * accumulates its trailing elements in double, written once at the end. Memory-only checks
 * (placement) come from check_call. */
static UD_Error* program_run(const UD_KernelArgs* a, const UD_KitProgram* prog, int reduce,
                             int reduced) {
  const UD_Tensor* x0 = &a->inputs[0];
  const int nd = x0->ndim, keep = nd - reduced, no = a->num_outputs;
  int64_t cells = 1, count = 1;
  for (int d = 0; d < nd; d++) *(d < keep ? &cells : &count) *= x0->shape[d];
  double in[UD_PROGRAM_MAX_INPUTS], out[UD_PROGRAM_MAX_OUTPUTS];
  double* acc = NULL;
  if (reduce != UD_RED_NONE && cells > 0) {
    acc = (double*)malloc(sizeof(double) * (size_t)(cells * no));
    if (!acc) return ud_kit_host_oom_error();
    const double init = reduce == UD_RED_MAX ? -INFINITY : reduce == UD_RED_MIN ? INFINITY : 0;
    for (int64_t c = 0; c < cells * no; c++) acc[c] = init;
  }
  int64_t idx[UD_KIT_MAX_DIMS] = {0};
  if (ud_kit_numel(x0) > 0) do {
    for (int i = 0; i < a->num_inputs; i++)
      in[i] = load(a->inputs[i].dtype, at(&a->inputs[i], idx)).f;
    ud_kit_program_eval_f64(prog, in, out);
    int64_t cell = 0;
    for (int d = 0; d < keep; d++) cell = cell * x0->shape[d] + idx[d];
    for (int k = 0; k < no; k++) {
      const double v = out[k];
      if (reduce == UD_RED_NONE) {
        store(a->outputs[k].dtype, at(&a->outputs[k], idx), (Value){v, 0}, 1);
        continue;
      }
      double* r = &acc[cell * no + k];
      if (reduce == UD_RED_SUM || reduce == UD_RED_MEAN) *r += v;
      else if (v != v || *r != *r) *r = NAN;
      else if (reduce == UD_RED_MAX ? v > *r : v < *r) *r = v;
    }
  } while (next(nd, x0->shape, idx));
  if (acc) { /* one store per output cell (the outputs' dims are S's leading ones) */
    int64_t oi[UD_KIT_MAX_DIMS] = {0}, cell = 0;
    do {
      for (int k = 0; k < no; k++) {
        double v = acc[cell * no + k];
        if (reduce == UD_RED_MEAN) v /= (double)count; /* 0 / 0: nan for an empty axis */
        store(a->outputs[k].dtype, at(&a->outputs[k], oi), (Value){v, 0}, 1);
      }
      cell++;
    } while (next(keep, a->outputs[0].shape, oi));
    free(acc);
  }
  return NULL;
}

static UD_Error* k_program(const UD_KernelArgs* a) {
  int reduce = 0, reduced = 0;
  UD_KIT_TRY(ud_kit_program_check_shapes(a, &reduce, &reduced));
  UD_KIT_TRY(check_call(UD_OP_ELEMENTWISE_PROGRAM, a));
  UD_KitProgram* prog = (UD_KitProgram*)malloc(sizeof *prog);
  if (!prog) return ud_kit_host_oom_error();
  UD_Error* e = ud_kit_program_parse("elementwise_program",
                                     ud_kit_attr_str(a, UD_ATTR_ELEMENTWISE_PROGRAM_PROGRAM),
                                     a->num_inputs, a->num_outputs, prog);
  if (!e) e = program_run(a, prog, reduce, reduced);
  free(prog);
  return e;
}

/* the fused ops in double, naively: out = act(acc + bias + residual) per output element */
static double elem(const UD_Tensor* t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  int64_t idx[4] = {i0, i1, i2, i3};
  return load(t->dtype, at(t, idx)).f;
}

static UD_Error* epilogue_store(const UD_KernelArgs* a, int bias_in, int act, int64_t* idx,
                                double acc) {
  const UD_Tensor *y = &a->outputs[0], *bias = &a->inputs[bias_in], *res = &a->inputs[bias_in + 1];
  if (ud_kit_present(bias)) acc += load(bias->dtype, at(bias, &idx[1])).f;
  if (ud_kit_present(res)) acc += load(res->dtype, at(res, idx)).f;
  store(y->dtype, at(y, idx), (Value){ud_kit_activation_f64(act, acc), 0}, 1);
  return NULL;
}

static UD_Error* k_gemm_bias_act(const UD_KernelArgs* a) {
  int act = 0;
  UD_KIT_TRY(ud_kit_check_epilogue(UD_OP_GEMM_BIAS_ACT, a, &act));
  UD_KIT_TRY(check_call(UD_OP_GEMM_BIAS_ACT, a));
  const UD_Tensor *x = &a->inputs[0], *w = &a->inputs[1], *y = &a->outputs[0];
  UD_KIT_REQUIRE(x->ndim == 2 && w->ndim == 2 && x->shape[0] == y->shape[0] &&
                     w->shape[1] == y->shape[1] && x->shape[1] == w->shape[0],
                 UD_ERR_INVALID_ARGUMENT, "gemm_bias_act: a, b and out shapes do not agree");
  UD_KIT_TRY(ud_kit_check_dtype("gemm_bias_act", "a", x, y->dtype));
  UD_KIT_TRY(ud_kit_check_dtype("gemm_bias_act", "b", w, y->dtype));
  const double alpha = ud_kit_attr_float(a, UD_ATTR_GEMM_BIAS_ACT_ALPHA);
  for (int64_t m = 0; m < y->shape[0]; m++)
    for (int64_t n = 0; n < y->shape[1]; n++) {
      double acc = 0;
      for (int64_t k = 0; k < x->shape[1]; k++) acc += elem(x, m, k, 0, 0) * elem(w, k, n, 0, 0);
      int64_t idx[2] = {m, n};
      epilogue_store(a, UD_IN_GEMM_BIAS_ACT_BIAS, act, idx, alpha * acc);
    }
  return NULL;
}

static UD_Error* k_conv2d_bias_act(const UD_KernelArgs* a) {
  int act = 0;
  UD_KIT_TRY(ud_kit_check_epilogue(UD_OP_CONV2D_BIAS_ACT, a, &act));
  UD_KIT_TRY(check_call(UD_OP_CONV2D_BIAS_ACT, a));
  const UD_Tensor *x = &a->inputs[0], *w = &a->inputs[1], *y = &a->outputs[0];
  const UD_Attr* at_ = a->attrs;
  UD_KIT_REQUIRE(x->ndim == 4 && w->ndim == 4, UD_ERR_INVALID_ARGUMENT,
                 "conv2d_bias_act: x and weight must be 4-D");
  UD_KIT_TRY(ud_kit_check_dtype("conv2d_bias_act", "x", x, y->dtype));
  UD_KIT_TRY(ud_kit_check_dtype("conv2d_bias_act", "weight", w, y->dtype));
  const int64_t* st = at_[UD_ATTR_CONV2D_BIAS_ACT_STRIDE].value.ints.data;
  const int64_t* pd = at_[UD_ATTR_CONV2D_BIAS_ACT_PADDING].value.ints.data;
  const int64_t* dl = at_[UD_ATTR_CONV2D_BIAS_ACT_DILATION].value.ints.data;
  const int64_t g = at_[UD_ATTR_CONV2D_BIAS_ACT_GROUPS].value.i;
  UD_KIT_REQUIRE(at_[UD_ATTR_CONV2D_BIAS_ACT_STRIDE].value.ints.len == 2 &&
                     at_[UD_ATTR_CONV2D_BIAS_ACT_PADDING].value.ints.len == 2 &&
                     at_[UD_ATTR_CONV2D_BIAS_ACT_DILATION].value.ints.len == 2 && g >= 1 &&
                     x->shape[1] == w->shape[1] * g && y->shape[1] == w->shape[0] &&
                     w->shape[0] % g == 0 && y->shape[0] == x->shape[0],
                 UD_ERR_INVALID_ARGUMENT, "conv2d_bias_act: shapes and attributes disagree");
  const int64_t kg = w->shape[0] / g, cg = w->shape[1];
  for (int64_t n = 0; n < y->shape[0]; n++)
    for (int64_t k = 0; k < y->shape[1]; k++)
      for (int64_t oh = 0; oh < y->shape[2]; oh++)
        for (int64_t ow = 0; ow < y->shape[3]; ow++) {
          double acc = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t r = 0; r < w->shape[2]; r++)
              for (int64_t q = 0; q < w->shape[3]; q++) {
                const int64_t h = oh * st[0] - pd[0] + r * dl[0], v = ow * st[1] - pd[1] + q * dl[1];
                if (h >= 0 && h < x->shape[2] && v >= 0 && v < x->shape[3])
                  acc += elem(x, n, (k / kg) * cg + c, h, v) * elem(w, k, c, r, q);
              }
          int64_t idx[4] = {n, k, oh, ow};
          epilogue_store(a, UD_IN_CONV2D_BIAS_ACT_BIAS, act, idx, acc);
        }
  return NULL;
}

/* kernel_compile (ABI 1.2): refuses a malformed program at once and otherwise returns the
 * interpreter (no specialization to make: this tests the entry, not a code generator) */
static UD_Error* testplugin_kernel_compile(const char* op, UD_DType dtype, const UD_Attr* attrs,
                                           int32_t num_attrs, UD_KernelFn* kernel) {
  UD_KIT_REQUIRE(kernel, UD_ERR_INVALID_ARGUMENT, "kernel_compile: kernel is NULL");
  *kernel = NULL;
  if (!op || strcmp(op, "elementwise_program") != 0 || dtype.code != UD_DTYPE_FLOAT)
    return NULL;
  UD_KIT_REQUIRE(attrs && num_attrs == ud_op_info(UD_OP_ELEMENTWISE_PROGRAM)->num_attrs &&
                     attrs[0].type == UD_ATTR_STRING && attrs[0].value.s,
                 UD_ERR_INVALID_ARGUMENT, "elementwise_program: kernel_compile takes the op's "
                 "%d attributes in op-set order", ud_op_info(UD_OP_ELEMENTWISE_PROGRAM)->num_attrs);
  UD_KitProgram* prog = (UD_KitProgram*)malloc(sizeof *prog);
  if (!prog) return ud_kit_host_oom_error();
  /* the output count is the program's; the kernel checks it against the call */
  UD_Error* e = ud_kit_program_parse("elementwise_program", attrs[0].value.s,
                                     UD_PROGRAM_MAX_INPUTS, -1, prog);
  free(prog);
  if (!e) *kernel = k_program;
  return e;
}

/* the scaffold's kernels, then the extra ones (matmul only for float32) */
static UD_Error* testplugin_kernel_lookup(const char* op, UD_DType dtype, UD_KernelFn* out) {
  UD_KIT_TRY(kernel_lookup(op, dtype, out));
  const int id = ud_op_id(op), dt = ud_dtype_id(dtype);
  if (*out || id < 0 || dt < 0 || !(ud_op_info(id)->dtypes & PLUGIN_DTYPES & (1u << dt)))
    return NULL;
  if (id == UD_OP_ADD) *out = k_add;
  if (id == UD_OP_MUL) *out = k_mul;
  if (id == UD_OP_MATMUL && dt == UD_DT_FLOAT32) *out = k_matmul;
  if (dt == UD_DT_FLOAT32 || dt == UD_DT_FLOAT64) { /* tier 4 */
    if (id == UD_OP_ELEMENTWISE_PROGRAM) *out = k_program;
    if (id == UD_OP_GEMM_BIAS_ACT) *out = k_gemm_bias_act;
    if (id == UD_OP_CONV2D_BIAS_ACT) *out = k_conv2d_bias_act;
  }
  return NULL;
}

static UD_Error* testplugin_device_count(int32_t* count, const char** reason) {
  UD_KIT_TRY(device_count(count, reason));
  if (reason && *count == 0) *reason = "built with TESTPLUGIN_DEVICES=0";
  return NULL;
}

/* what including files call: the test plugin's versions (function-like, so that the UD_Api
 * members of the same names stay untouched) */
#define kernel_lookup(op, dtype, out) testplugin_kernel_lookup(op, dtype, out)
#define device_count(count, reason) testplugin_device_count(count, reason)

static union {
  UD_Api api;
  unsigned char bytes[sizeof(UD_Api)];
} g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_table(void) {
  g_table.api = *scaffold_get_api();
  g_table.api.plugin_name = "testdev";
  g_table.api.abi_major = TESTPLUGIN_ABI_MAJOR;
  g_table.api.abi_minor = TESTPLUGIN_ABI_MINOR;
  g_table.api.device_count = testplugin_device_count;
  g_table.api.kernel_lookup = testplugin_kernel_lookup;
  g_table.api.kernel_compile = testplugin_kernel_compile;
#ifdef UD_TESTPLUGIN_ABI_1_1
  g_table.api.struct_size = UD_API_SIZE_1_1;
  g_table.api.abi_minor = 1;
  memset(g_table.bytes + UD_API_SIZE_1_1, 0xA5, sizeof(UD_Api) - UD_API_SIZE_1_1);
#endif
#ifdef UD_TESTPLUGIN_ABI_1_0
  g_table.api.struct_size = UD_API_SIZE_1_0;
  g_table.api.abi_minor = 0;
  memset(g_table.bytes + UD_API_SIZE_1_0, 0xA5, sizeof(UD_Api) - UD_API_SIZE_1_0);
#endif
}

UD_EXPORT const UD_Api* unidev_get_api(void) {
  pthread_once(&g_once, init_table);
  return &g_table.api;
}
