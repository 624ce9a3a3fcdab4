/* check.cpp — which launcher serves each op, and every argument check made before a launch beyond
 * the op set's signature (plain C++: no CUDA, so the checks are unit-tested without a GPU). */
#include <array>
#include <cstring>
#include <string>

#include "cuda_plugin.h"

namespace udc {
namespace {

#define INV(...) ud_kit_error(UD_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* The launcher family and kernel code of each op, and the dtypes beyond the op set's that its
 * kernels take (half precision for the cuBLAS/cuDNN ops). */
struct Row {
  int id;
  Family family;
  int code;
  unsigned extra_dtypes = 0;
};
const Row kRows[] = {
    {UD_OP_COPY, F_COPY, 0, DT_HALF},
    {UD_OP_FILL, F_FILL, 0},
    {UD_OP_ZERO, F_FILL, 1},
    {UD_OP_CAST, F_CAST, 0},
    {UD_OP_ARANGE, F_ARANGE, 0},
    {UD_OP_NEG, F_EW, E_NEG},
    {UD_OP_ABS, F_EW, E_ABS},
    {UD_OP_EXP, F_EW, E_EXP},
    {UD_OP_LOG, F_EW, E_LOG},
    {UD_OP_SQRT, F_EW, E_SQRT},
    {UD_OP_RSQRT, F_EW, E_RSQRT},
    {UD_OP_RECIPROCAL, F_EW, E_RECIP},
    {UD_OP_SIN, F_EW, E_SIN},
    {UD_OP_COS, F_EW, E_COS},
    {UD_OP_TANH, F_EW, E_TANH},
    {UD_OP_SIGMOID, F_EW, E_SIGMOID},
    {UD_OP_RELU, F_EW, E_RELU},
    {UD_OP_GELU, F_EW, E_GELU},
    {UD_OP_ERF, F_EW, E_ERF},
    {UD_OP_FLOOR, F_EW, E_FLOOR},
    {UD_OP_CEIL, F_EW, E_CEIL},
    {UD_OP_ROUND, F_EW, E_ROUND},
    {UD_OP_SIGN, F_EW, E_SIGN},
    {UD_OP_SQUARE, F_EW, E_SQUARE},
    {UD_OP_LOGICAL_NOT, F_EW, E_NOT},
    {UD_OP_ADD, F_EW, E_ADD},
    {UD_OP_SUB, F_EW, E_SUB},
    {UD_OP_MUL, F_EW, E_MUL},
    {UD_OP_DIV, F_EW, E_DIV},
    {UD_OP_POW, F_EW, E_POW},
    {UD_OP_MAXIMUM, F_EW, E_MAX},
    {UD_OP_MINIMUM, F_EW, E_MIN},
    {UD_OP_EQ, F_EW, E_EQ},
    {UD_OP_NE, F_EW, E_NE},
    {UD_OP_LT, F_EW, E_LT},
    {UD_OP_LE, F_EW, E_LE},
    {UD_OP_GT, F_EW, E_GT},
    {UD_OP_GE, F_EW, E_GE},
    {UD_OP_LOGICAL_AND, F_EW, E_AND},
    {UD_OP_LOGICAL_OR, F_EW, E_OR},
    {UD_OP_WHERE, F_EW, E_WHERE},
    {UD_OP_ADDCMUL, F_EW, E_ADDCMUL},
    {UD_OP_ADDCDIV, F_EW, E_ADDCDIV},
    {UD_OP_LERP, F_EW, E_LERP},
    {UD_OP_THRESHOLD_BACKWARD, F_EW, E_THRESH_B},
    {UD_OP_SIGMOID_BACKWARD, F_EW, E_SIGMOID_B},
    {UD_OP_TANH_BACKWARD, F_EW, E_TANH_B},
    {UD_OP_GELU_BACKWARD, F_EW, E_GELU_B},
    {UD_OP_LOG1P, F_EW, E_LOG1P},
    {UD_OP_EXPM1, F_EW, E_EXPM1},
    {UD_OP_SILU, F_EW, E_SILU},
    {UD_OP_SOFTPLUS, F_EW, E_SOFTPLUS},
    {UD_OP_ELU, F_EW, E_ELU},
    {UD_OP_LEAKY_RELU, F_EW, E_LEAKY_RELU},
    {UD_OP_HARDSWISH, F_EW, E_HARDSWISH},
    {UD_OP_HARDSIGMOID, F_EW, E_HARDSIGMOID},
    {UD_OP_MISH, F_EW, E_MISH},
    {UD_OP_LOG_SIGMOID, F_EW, E_LOG_SIGMOID},
    {UD_OP_CLAMP, F_EW, E_CLAMP},
    {UD_OP_ISNAN, F_EW, E_ISNAN},
    {UD_OP_ISINF, F_EW, E_ISINF},
    {UD_OP_FLOOR_DIVIDE, F_EW, E_FLOOR_DIVIDE},
    {UD_OP_REMAINDER, F_EW, E_REMAINDER},
    {UD_OP_XLOGY, F_EW, E_XLOGY},
    {UD_OP_SILU_BACKWARD, F_EW, E_SILU_B},
    {UD_OP_HARDSWISH_BACKWARD, F_EW, E_HARDSWISH_B},
    {UD_OP_HARDSIGMOID_BACKWARD, F_EW, E_HARDSIGMOID_B},
    {UD_OP_MISH_BACKWARD, F_EW, E_MISH_B},
    {UD_OP_LOG_SIGMOID_BACKWARD, F_EW, E_LOG_SIGMOID_B},
    {UD_OP_LEAKY_RELU_BACKWARD, F_EW, E_LEAKY_RELU_B},
    {UD_OP_SOFTPLUS_BACKWARD, F_EW, E_SOFTPLUS_B},
    {UD_OP_ELU_BACKWARD, F_EW, E_ELU_B},
    {UD_OP_SUM, F_REDUCE, R_SUM},
    {UD_OP_MEAN, F_REDUCE, R_MEAN},
    {UD_OP_MAX, F_REDUCE, R_MAX},
    {UD_OP_MIN, F_REDUCE, R_MIN},
    {UD_OP_PROD, F_REDUCE, R_PROD},
    {UD_OP_ARGMAX, F_ARG, R_ARGMAX},
    {UD_OP_ARGMIN, F_ARG, R_ARGMIN},
    {UD_OP_MATMUL, F_MATMUL, 0, DT_HALF},
    {UD_OP_GEMM, F_GEMM, 0, DT_HALF},
    {UD_OP_CONV2D, F_CONV, 0, DT_HALF},
    {UD_OP_CONV2D_BACKWARD_INPUT, F_CONV_BI, 0, DT_HALF},
    {UD_OP_CONV2D_BACKWARD_WEIGHT, F_CONV_BW, 0, DT_HALF},
    {UD_OP_MAX_POOL2D, F_MAXPOOL, 0},
    {UD_OP_MAX_POOL2D_BACKWARD, F_MAXPOOL_B, 0},
    {UD_OP_AVG_POOL2D, F_AVGPOOL, 0},
    {UD_OP_AVG_POOL2D_BACKWARD, F_AVGPOOL_B, 0},
    {UD_OP_ADAPTIVE_AVG_POOL2D, F_ADAPT, 0},
    {UD_OP_ADAPTIVE_AVG_POOL2D_BACKWARD, F_ADAPT_B, 0},
    {UD_OP_BATCH_NORM, F_BN, 0},
    {UD_OP_BATCH_NORM_BACKWARD, F_BN_B, 0},
    {UD_OP_SOFTMAX, F_SOFTMAX, S_SOFTMAX},
    {UD_OP_LOG_SOFTMAX, F_SOFTMAX, S_LOG_SOFTMAX},
    {UD_OP_SOFTMAX_BACKWARD, F_SOFTMAX_B, S_SOFTMAX},
    {UD_OP_LOG_SOFTMAX_BACKWARD, F_SOFTMAX_B, S_LOG_SOFTMAX},
    {UD_OP_NLL_LOSS, F_NLL, 0},
    {UD_OP_NLL_LOSS_BACKWARD, F_NLL_B, 0},
    {UD_OP_MSE_LOSS, F_MSE, 0},
    {UD_OP_MSE_LOSS_BACKWARD, F_MSE_B, 0},
    {UD_OP_CONCAT, F_CONCAT, 0},
    {UD_OP_PAD_CONSTANT, F_PAD, 0},
    {UD_OP_SGD_UPDATE, F_OPTIM, 0},
    {UD_OP_ADAM_UPDATE, F_OPTIM, 1},
    {UD_OP_CONV2D_BIAS_ACT, F_CONV_ACT, 0},
    {UD_OP_GEMM_BIAS_ACT, F_GEMM_ACT, 0},
    {UD_OP_ELEMENTWISE_PROGRAM, F_PROGRAM, 0},
};

/* The op set's name for input i (concat's variadic input names each of its tensors "tensors"). */
const char* in_name(const OpInfo& op, int i) {
  const UD_OpInfo* o = ud_op_info(op.id);
  return o->input_names[o->variadic_input >= 0 && i >= o->variadic_input ? o->variadic_input : i];
}

std::string shape_str(const UD_Tensor& t);

UD_Error* want_shape(const char* op, const char* what, const char* name, const UD_Tensor& t,
                     int ndim, const int64_t* shape) {
  bool ok = t.ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = t.shape[i] == shape[i];
  if (ok) return nullptr;
  std::string want = "(";
  for (int i = 0; i < ndim; i++) want += std::to_string(shape[i]) + (i + 1 < ndim ? ", " : "");
  want += ndim == 1 ? ",)" : ")";
  return INV("%s: %s '%s' has shape %s, expected %s", op, what, name, shape_str(t).c_str(),
             want.c_str());
}

std::string shape_str(const UD_Tensor& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; i++) s += std::to_string(t.shape[i]) + (i + 1 < t.ndim ? ", " : "");
  return s + (t.ndim == 1 ? ",)" : ")");
}

UD_Error* want_dtype(const char* op, const char* what, const char* name, const UD_Tensor& t,
                     UD_DType d) {
  if (ud_kit_dtype_eq(t.dtype, d)) return nullptr;
  return INV("%s: %s '%s' has dtype %s, expected %s", op, what, name, ud_kit_dtype_name(t.dtype),
             ud_kit_dtype_name(d));
}

UD_Error* want_ndim(const char* op, const char* name, const UD_Tensor& t, int ndim,
                    const char* layout) {
  if (t.ndim == ndim) return nullptr;
  return INV("%s: input '%s' has shape %s, expected %d-D %s", op, name, shape_str(t).c_str(), ndim,
             layout);
}

const UD_DType kBool = ud_dtype_of(UD_DT_BOOL), kI64 = ud_dtype_of(UD_DT_INT64);

bool bool_output(int code) {
  return code == E_NOT || (code >= E_EQ && code <= E_OR) || code == E_ISNAN || code == E_ISINF;
}

UD_Error* check_ew(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& out = a->outputs[0];
  const UD_DType dt = a->inputs[0].dtype;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    UD_KIT_TRY(want_shape(op.name, "input", in_name(op, i), t, out.ndim, out.shape));
    bool cond = op.family == F_EW && op.code == E_WHERE && i == 2;
    UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), t, cond ? kBool : dt));
  }
  UD_DType want = dt;
  if (op.family == F_EW && bool_output(op.code)) want = kBool;
  const char* cast_to = op.family == F_CAST ? ud_kit_attr_str(a, UD_ATTR_CAST_DTYPE) : "";
  if (op.family == F_CAST && ud_dtype_from_name(cast_to) < 0)
    return INV("%s: attribute 'dtype' is '%s', expected a unidev dtype name", op.name, cast_to);
  if (op.family == F_CAST) want = ud_dtype_of(ud_dtype_from_name(cast_to));
  UD_KIT_TRY(want_dtype(op.name, "output", "y", out, want));
  if (op.family == F_CAST && !(dtype_bit(want) & UD_DTM_ALL))
    return INV("%s: output dtype %s is not supported, expected float32, float64, int32, int64 or "
               "bool", op.name, ud_kit_dtype_name(want));
  if (op.id == UD_OP_GELU || op.id == UD_OP_GELU_BACKWARD)
    return ud_kit_check_choice(op.id, a, op.id == UD_OP_GELU ? UD_ATTR_GELU_APPROXIMATE : UD_ATTR_GELU_BACKWARD_APPROXIMATE,
                               nullptr);
  return ud_kit_check_scalars(op.id, a, dt); /* add's and sub's alpha */
}

UD_Error* check_reduce(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor &x = a->inputs[UD_IN_SUM_X], &y = a->outputs[UD_OUT_SUM_Y];
  uint32_t mask = 0;
  const UD_Attr& axes = a->attrs[kReduceAxes];
  UD_KIT_TRY(reduce_mask(op.name, axes, x.ndim, &mask));
  bool arg = op.family == F_ARG;
  if (arg && axes.value.ints.len > 1)
    return INV("%s: attribute 'axes' has %lld axes, expected at most one", op.name,
               (long long)axes.value.ints.len);
  bool keep = ud_kit_attr_bool(a, kReduceKeepdims);
  int64_t shape[UD_KIT_MAX_DIMS];
  int n = 0;
  int64_t reduced = 1;
  for (int d = 0; d < x.ndim; d++) {
    if (mask >> d & 1) {
      reduced *= x.shape[d];
      if (keep) shape[n++] = 1;
    } else {
      shape[n++] = x.shape[d];
    }
  }
  if ((op.code == R_MAX || op.code == R_MIN || arg) && reduced == 0)
    return INV("%s: input 'x' has shape %s, cannot reduce over an empty axis", op.name,
               shape_str(x).c_str());
  UD_KIT_TRY(want_shape(op.name, "output", arg ? "index" : "y", y, n, shape));
  return want_dtype(op.name, "output", arg ? "index" : "y", y, arg ? kI64 : x.dtype);
}

UD_Error* check_matmul(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor &A = a->inputs[0], &B = a->inputs[1], &O = a->outputs[0];
  for (int i = 1; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]))
      UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], A.dtype));
  UD_KIT_TRY(want_dtype(op.name, "output", "out", O, A.dtype));
  int n = A.ndim;
  const bool gemm = op.family == F_GEMM || op.family == F_GEMM_ACT;
  if (n < 2 || (gemm && n != 2))
    return INV("%s: input 'a' has shape %s, expected %s", op.name, shape_str(A).c_str(),
               gemm ? "2-D [M, K]" : "ndim >= 2");
  int64_t want[UD_KIT_MAX_DIMS];
  for (int d = 0; d < n - 2; d++) want[d] = O.ndim == n ? O.shape[d] : 0;
  want[n - 2] = A.shape[n - 1];
  want[n - 1] = O.ndim == n ? O.shape[n - 1] : 0;
  UD_KIT_TRY(want_shape(op.name, "input", "b", B, n, want));
  want[n - 2] = A.shape[n - 2];
  want[n - 1] = B.shape[n - 1];
  for (int d = 0; d < n - 2; d++) want[d] = A.shape[d];
  UD_KIT_TRY(want_shape(op.name, "output", "out", O, n, want));
  if (op.family == F_GEMM && ud_kit_present(&a->inputs[2]))
    UD_KIT_TRY(want_shape(op.name, "input", "c", a->inputs[2], 2, want));
  int act;
  if (op.family == F_GEMM_ACT) return ud_kit_check_epilogue(op.id, a, &act); /* bias, residual */
  return nullptr;
}

UD_Error* check_conv(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& o = a->outputs[0];
  for (int i = 1; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]))
      UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], a->inputs[0].dtype));
  UD_KIT_TRY(want_dtype(op.name, "output", "y", o, a->inputs[0].dtype));
  const int first = conv_first(op.family);
  const char* alg = a->attrs[first + kConvAlgorithm].value.s;
  if (strcmp(alg, "auto") && strcmp(alg, "cudnn") && strcmp(alg, "direct") && strcmp(alg, "im2col"))
    return INV("%s: attribute 'algorithm' is '%s', expected 'auto', 'cudnn', 'direct' or 'im2col'",
               op.name, alg);
  const int64_t *xs, *ws;
  const UD_Attr& sa = a->attrs[kConvShape];  /* input_shape or weight_shape (backward ops) */
  if (first && (sa.value.ints.len != 4))
    return INV("%s: attribute '%s' has %lld values, expected 4", op.name, sa.name ? sa.name : "",
               (long long)sa.value.ints.len);
  for (int i = 0; first && i < 4; i++)
    if (sa.value.ints.data[i] < 0)
      return INV("%s: attribute '%s' has a negative extent", op.name, sa.name ? sa.name : "");
  if (op.family == F_CONV_BW) {
    UD_KIT_TRY(want_ndim(op.name, "x", a->inputs[1], 4, "NCHW"));
    xs = a->inputs[1].shape;
    ws = sa.value.ints.data;
  } else {
    const UD_Tensor& w = a->inputs[1];
    UD_KIT_TRY(want_ndim(op.name, "weight", w, 4, "[K, C/groups, R, S]"));
    ws = w.shape;
    if (conv_forward(op.family)) UD_KIT_TRY(want_ndim(op.name, "x", a->inputs[0], 4, "NCHW"));
    xs = conv_forward(op.family) ? a->inputs[0].shape : sa.value.ints.data;
  }
  ConvGeom g;
  UD_KIT_TRY(conv_geometry(op.name, xs, ws, a->attrs + first, &g));
  const int64_t yshape[4] = {g.N, g.K, g.OH, g.OW};
  if (conv_forward(op.family)) {
    if (ud_kit_present(&a->inputs[2])) UD_KIT_TRY(want_shape(op.name, "input", "bias", a->inputs[2], 1, &g.K));
    UD_KIT_TRY(want_shape(op.name, "output", "y", o, 4, yshape));
    int act;
    return op.family == F_CONV_ACT ? ud_kit_check_epilogue(op.id, a, &act) : nullptr;
  }
  UD_KIT_TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], 4, yshape));
  return want_shape(op.name, "output", op.family == F_CONV_BI ? "grad_x" : "grad_w", o, 4,
                    op.family == F_CONV_BI ? xs : ws);
}

UD_Error* check_pool(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_MAXPOOL_B || op.family == F_AVGPOOL_B || op.family == F_ADAPT_B;
  const UD_Tensor& x = a->inputs[bwd ? 1 : 0];
  UD_KIT_TRY(want_ndim(op.name, "x", x, 4, "NCHW"));
  for (int i = 0; i < a->num_inputs; i++)
    if (!(op.family == F_MAXPOOL_B && i == 2))
      UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], x.dtype));
  int64_t ys[4] = {x.shape[0], x.shape[1], 0, 0};
  if (op.family == F_ADAPT || op.family == F_ADAPT_B) {
    Pair p;
    if (!attr_pair(a->attrs[kAdaptiveSize], &p) || p.h < 1 || p.w < 1)
      return INV("%s: attribute 'output_size' expects two ints >= 1", op.name);
    ys[2] = p.h, ys[3] = p.w;
  } else {
    PoolGeom g;
    UD_KIT_TRY(pool_geometry(op.name, x.shape, a->attrs,
                      op.family == F_MAXPOOL || op.family == F_MAXPOOL_B, &g));
    ys[2] = g.OH, ys[3] = g.OW;
  }
  if (!bwd) {
    UD_KIT_TRY(want_shape(op.name, "output", "y", a->outputs[0], 4, ys));
    UD_KIT_TRY(want_dtype(op.name, "output", "y", a->outputs[0], x.dtype));
    if (op.family == F_MAXPOOL) {
      UD_KIT_TRY(want_shape(op.name, "output", "indices", a->outputs[1], 4, ys));
      UD_KIT_TRY(want_dtype(op.name, "output", "indices", a->outputs[1], kI64));
    }
    return nullptr;
  }
  UD_KIT_TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], 4, ys));
  if (op.family == F_MAXPOOL_B) {
    UD_KIT_TRY(want_shape(op.name, "input", "indices", a->inputs[2], 4, ys));
    UD_KIT_TRY(want_dtype(op.name, "input", "indices", a->inputs[2], kI64));
  }
  UD_KIT_TRY(want_shape(op.name, "output", "grad_x", a->outputs[0], 4, x.shape));
  return want_dtype(op.name, "output", "grad_x", a->outputs[0], x.dtype);
}

UD_Error* check_bn(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_BN_B;
  const UD_Tensor& x = a->inputs[bwd ? 1 : 0];
  if (x.ndim < 2)
    return INV("%s: input 'x' has shape %s, expected [N, C, ...]", op.name, shape_str(x).c_str());
  const int64_t C = x.shape[1];
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    if (!ud_kit_present(&t)) continue;
    UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), t, x.dtype));
    if (&t != &x && !(bwd && i == 0)) UD_KIT_TRY(want_shape(op.name, "input", in_name(op, i), t, 1, &C));
  }
  if (bwd) UD_KIT_TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], x.ndim, x.shape));
  bool training = ud_kit_attr_bool(a, bwd ? UD_ATTR_BATCH_NORM_BACKWARD_TRAINING : UD_ATTR_BATCH_NORM_TRAINING) != 0;
  if (!bwd && !training && (!ud_kit_present(&a->inputs[3]) || !ud_kit_present(&a->inputs[4])))
    return INV("%s: inputs 'running_mean' and 'running_var' are required when training=False",
               op.name);
  if (bwd && (!ud_kit_present(&a->inputs[3]) || !ud_kit_present(&a->inputs[4])))
    return INV("%s: inputs 'save_mean' and 'save_invstd' are required", op.name);
  /* one value per channel is valid (variance 0; running_var gets 0 / 0 = nan, as torch) */
  if (!bwd && training && ud_kit_numel(&x) == 0)
    return INV("%s: input 'x' has shape %s, training needs at least one value per channel",
               op.name, shape_str(x).c_str());
  static const char* const fwd_names[] = {"y", "save_mean", "save_invstd"};
  static const char* const bwd_names[] = {"grad_x", "grad_weight", "grad_bias"};
  for (int i = 0; i < 3; i++) {
    const char* n = (bwd ? bwd_names : fwd_names)[i];
    UD_KIT_TRY(want_dtype(op.name, "output", n, a->outputs[i], x.dtype));
    UD_KIT_TRY(i ? want_shape(op.name, "output", n, a->outputs[i], 1, &C)
          : want_shape(op.name, "output", n, a->outputs[i], x.ndim, x.shape));
  }
  return nullptr;
}

UD_Error* check_softmax(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& x = a->inputs[a->num_inputs - 1];
  if (norm_axis(ud_kit_attr_int(a, kSoftmaxAxis), x.ndim) < 0)
    return INV("%s: attribute 'axis' is %lld, expected in [%d, %d)", op.name,
               (long long)ud_kit_attr_int(a, kSoftmaxAxis), -(x.ndim ? x.ndim : 1), x.ndim ? x.ndim : 1);
  for (int i = 0; i < a->num_inputs; i++) {
    UD_KIT_TRY(want_shape(op.name, "input", in_name(op, i), a->inputs[i], x.ndim, x.shape));
    UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], x.dtype));
  }
  UD_KIT_TRY(want_shape(op.name, "output", "y", a->outputs[0], x.ndim, x.shape));
  return want_dtype(op.name, "output", "y", a->outputs[0], x.dtype);
}


UD_Error* check_nll(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_NLL_B;
  const UD_Tensor &lp = a->inputs[bwd ? UD_IN_NLL_LOSS_BACKWARD_LOGP : UD_IN_NLL_LOSS_LOGP],
                  &tg = a->inputs[bwd ? UD_IN_NLL_LOSS_BACKWARD_TARGET : UD_IN_NLL_LOSS_TARGET],
                  &w = a->inputs[bwd ? UD_IN_NLL_LOSS_BACKWARD_WEIGHT : UD_IN_NLL_LOSS_WEIGHT];
  UD_KIT_TRY(ud_kit_check_choice(op.id, a, kLossReduction, nullptr));
  if (lp.ndim != 1 && lp.ndim != 2)
    return INV("%s: input 'logp' has shape %s, expected [N, C] or [C]", op.name,
               shape_str(lp).c_str());
  if (!(dtype_bit(tg.dtype) & UD_DTM_INT_GROUP))
    return INV("%s: input 'target' has dtype %s, expected int32 or int64", op.name,
               ud_kit_dtype_name(tg.dtype));
  UD_KIT_TRY(want_shape(op.name, "input", "target", tg, lp.ndim - 1, lp.shape));
  if (ud_kit_present(&w)) {
    UD_KIT_TRY(want_shape(op.name, "input", "weight", w, 1, lp.shape + lp.ndim - 1));
    UD_KIT_TRY(want_dtype(op.name, "input", "weight", w, lp.dtype));
  }
  bool none = !strcmp(a->attrs[kLossReduction].value.s, "none");
  int loss_nd = none ? lp.ndim - 1 : 0;
  if (bwd) {
    UD_KIT_TRY(want_shape(op.name, "input", "grad_loss", a->inputs[0], loss_nd, lp.shape));
    UD_KIT_TRY(want_dtype(op.name, "input", "grad_loss", a->inputs[0], lp.dtype));
    UD_KIT_TRY(want_shape(op.name, "input", "total_weight", a->inputs[4], 0, nullptr));
    UD_KIT_TRY(want_dtype(op.name, "input", "total_weight", a->inputs[4], lp.dtype));
    UD_KIT_TRY(want_shape(op.name, "output", "grad_logp", a->outputs[0], lp.ndim, lp.shape));
    return want_dtype(op.name, "output", "grad_logp", a->outputs[0], lp.dtype);
  }
  UD_KIT_TRY(want_shape(op.name, "output", "loss", a->outputs[0], loss_nd, lp.shape));
  UD_KIT_TRY(want_shape(op.name, "output", "total_weight", a->outputs[1], 0, nullptr));
  UD_KIT_TRY(want_dtype(op.name, "output", "loss", a->outputs[0], lp.dtype));
  return want_dtype(op.name, "output", "total_weight", a->outputs[1], lp.dtype);
}

UD_Error* check_mse(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_MSE_B;
  const UD_Tensor &x = a->inputs[bwd ? UD_IN_MSE_LOSS_BACKWARD_X : UD_IN_MSE_LOSS_X],
                  &tg = a->inputs[bwd ? UD_IN_MSE_LOSS_BACKWARD_TARGET : UD_IN_MSE_LOSS_TARGET], &o = a->outputs[0];
  UD_KIT_TRY(ud_kit_check_choice(op.id, a, kLossReduction, nullptr));
  UD_KIT_TRY(want_shape(op.name, "input", "target", tg, x.ndim, x.shape));
  UD_KIT_TRY(want_dtype(op.name, "input", "target", tg, x.dtype));
  bool none = !strcmp(a->attrs[kLossReduction].value.s, "none");
  if (bwd) {
    UD_KIT_TRY(want_shape(op.name, "input", "grad_loss", a->inputs[0], none ? x.ndim : 0, x.shape));
    UD_KIT_TRY(want_dtype(op.name, "input", "grad_loss", a->inputs[0], x.dtype));
    UD_KIT_TRY(want_shape(op.name, "output", "grad_x", o, x.ndim, x.shape));
    return want_dtype(op.name, "output", "grad_x", o, x.dtype);
  }
  UD_KIT_TRY(want_shape(op.name, "output", "loss", o, none ? x.ndim : 0, x.shape));
  return want_dtype(op.name, "output", "loss", o, x.dtype);
}

UD_Error* check_concat(const OpInfo& op, const UD_KernelArgs* a) {
  if (a->num_inputs < 1) return INV("%s: input 'tensors' is empty, expected at least one", op.name);
  const UD_Tensor& f = a->inputs[0];
  if (f.ndim < 1) return INV("%s: input 'tensors' holds 0-d tensors, expected ndim >= 1", op.name);
  const int64_t given = ud_kit_attr_int(a, UD_ATTR_CONCAT_AXIS);
  int axis = norm_axis(given, f.ndim);
  if (axis < 0)
    return INV("%s: attribute 'axis' is %lld, expected in [%d, %d)", op.name, (long long)given, -f.ndim, f.ndim);
  int64_t shape[UD_KIT_MAX_DIMS];
  memcpy(shape, f.shape, sizeof(int64_t) * f.ndim);
  shape[axis] = 0;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    UD_KIT_TRY(want_dtype(op.name, "input", "tensors", t, f.dtype));
    bool ok = t.ndim == f.ndim;
    for (int d = 0; ok && d < f.ndim; d++) ok = d == axis || t.shape[d] == f.shape[d];
    if (!ok)
      return INV("%s: input 'tensors[%d]' has shape %s, expected %s outside axis %d", op.name, i,
                 shape_str(t).c_str(), shape_str(f).c_str(), axis);
    shape[axis] += t.shape[axis];
  }
  UD_KIT_TRY(want_shape(op.name, "output", "out", a->outputs[0], f.ndim, shape));
  return want_dtype(op.name, "output", "out", a->outputs[0], f.dtype);
}

UD_Error* check_pad(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& x = a->inputs[0];
  const UD_Attr& p = a->attrs[UD_ATTR_PAD_CONSTANT_PADS];
  if (p.value.ints.len != 2 * x.ndim)
    return INV("%s: attribute 'pads' has %lld values, expected %d (before, after per dimension)",
               op.name, (long long)p.value.ints.len, 2 * x.ndim);
  int64_t shape[UD_KIT_MAX_DIMS];
  for (int d = 0; d < x.ndim; d++) {
    int64_t b = p.value.ints.data[2 * d], e = p.value.ints.data[2 * d + 1];
    if (b < 0 || e < 0) return INV("%s: attribute 'pads' has a negative value at dim %d", op.name, d);
    shape[d] = x.shape[d] + b + e;
  }
  UD_KIT_TRY(want_shape(op.name, "output", "y", a->outputs[0], x.ndim, shape));
  UD_KIT_TRY(want_dtype(op.name, "output", "y", a->outputs[0], x.dtype));
  return ud_kit_check_scalars(op.id, a, x.dtype);
}

UD_Error* check_nullary(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& y = a->outputs[0];
  if (op.family == F_ARANGE) {
    const char* name = ud_kit_attr_str(a, UD_ATTR_ARANGE_DTYPE);
    const UD_DType want = ud_dtype_of(ud_dtype_from_name(name));
    if (!(dtype_bit(want) & UD_DTM_NUMERIC))
      return INV("%s: attribute 'dtype' is '%s', expected float32, float64, int32 or int64", op.name, name);
    UD_KIT_TRY(want_dtype(op.name, "output", "y", y, want));
    if (y.ndim != 1)
      return INV("%s: output 'y' has shape %s, expected 1-D", op.name, shape_str(y).c_str());
    UD_KIT_TRY(ud_kit_check_arange(op.name, ud_kit_attr_float(a, UD_ATTR_ARANGE_START),
                                   ud_kit_attr_float(a, UD_ATTR_ARANGE_STOP),
                                   ud_kit_attr_float(a, UD_ATTR_ARANGE_STEP), y.shape[0], y.dtype));
  }
  if (op.id == UD_OP_FILL)
    return ud_kit_check_scalars(op.id, a, y.dtype);
  return nullptr;
}

/* elementwise_program: the kit's checks (shapes, dtypes, reduction) and its parser */
UD_Error* check_program(const UD_KernelArgs* a) {
  int reduce = 0, reduced = 0;
  UD_KitProgram* p = (UD_KitProgram*)malloc(sizeof *p);
  if (!p) return ud_kit_host_oom_error();
  UD_Error* e = ud_kit_program_check_call(a, p, &reduce, &reduced);
  free(p);
  return e;
}

}  // namespace

const OpInfo& op_at(int id) {
  static const std::array<OpInfo, UD_OP_COUNT> ops = [] {
    std::array<OpInfo, UD_OP_COUNT> t{};
    for (const Row& r : kRows)
      t[r.id] = {ud_op_info(r.id)->name, r.id, r.family, r.code, ud_op_info(r.id)->dtypes | r.extra_dtypes};
    return t;
  }();
  return ops[id];
}

const OpInfo* op_find(const char* name) {
  const int id = name ? ud_op_id(name) : -1;
  return id < 0 || !op_at(id).name ? nullptr : &op_at(id);
}

int norm_axis(int64_t axis, int ndim) {
  int n = ndim > 0 ? ndim : 1;
  if (axis < -n || axis >= n) return -1;
  return (int)((axis + n) % n);
}

UD_Error* reduce_mask(const char* op, const UD_Attr& axes, int ndim, uint32_t* mask) {
  *mask = 0;
  if (axes.value.ints.len == 0) {
    *mask = ndim ? (uint32_t)((1ull << ndim) - 1) : 0;
    return nullptr;
  }
  for (int64_t i = 0; i < axes.value.ints.len; i++) {
    int ax = norm_axis(axes.value.ints.data[i], ndim);
    if (ax < 0)
      return INV("%s: attribute 'axes' has axis %lld, expected in [%d, %d)", op,
                 (long long)axes.value.ints.data[i], -(ndim ? ndim : 1), ndim ? ndim : 1);
    if (*mask >> ax & 1) return INV("%s: attribute 'axes' repeats axis %d", op, ax);
    if (ndim) *mask |= 1u << ax;
  }
  return nullptr;
}

bool attr_pair(const UD_Attr& a, Pair* p) {
  if (a.type != UD_ATTR_INTS) return false;
  if (a.value.ints.len == 1) return *p = {a.value.ints.data[0], a.value.ints.data[0]}, true;
  if (a.value.ints.len == 2) return *p = {a.value.ints.data[0], a.value.ints.data[1]}, true;
  return false;
}

static UD_Error* pair_at_least(const char* op, const UD_Attr& a, const char* name, int64_t min,
                               Pair* p) {
  if (!attr_pair(a, p) || p->h < min || p->w < min)
    return INV("%s: attribute '%s' expects two ints >= %lld", op, name, (long long)min);
  return nullptr;
}

UD_Error* conv_geometry(const char* op, const int64_t* x, const int64_t* w, const UD_Attr* at,
                        ConvGeom* g) {
  UD_KIT_TRY(pair_at_least(op, at[kConvStride], "stride", 1, &g->stride));
  UD_KIT_TRY(pair_at_least(op, at[kConvPadding], "padding", 0, &g->pad));
  UD_KIT_TRY(pair_at_least(op, at[kConvDilation], "dilation", 1, &g->dil));
  g->N = x[0], g->C = x[1], g->H = x[2], g->W = x[3];
  g->K = w[0], g->R = w[2], g->S = w[3], g->groups = at[kConvGroups].value.i;
  if (g->groups < 1 || g->C % g->groups || g->K % g->groups)
    return INV("%s: attribute 'groups' is %lld, expected >= 1 dividing C=%lld and K=%lld", op,
               (long long)g->groups, (long long)g->C, (long long)g->K);
  if (w[1] * g->groups != g->C)
    return INV("%s: input 'weight' expects %lld input channels (groups=%lld), x has %lld", op,
               (long long)(w[1] * g->groups), (long long)g->groups, (long long)g->C);
  g->OH = (g->H + 2 * g->pad.h - g->dil.h * (g->R - 1) - 1) / g->stride.h + 1;
  g->OW = (g->W + 2 * g->pad.w - g->dil.w * (g->S - 1) - 1) / g->stride.w + 1;
  if (g->R < 1 || g->S < 1 || g->H + 2 * g->pad.h - g->dil.h * (g->R - 1) - 1 < 0 ||
      g->W + 2 * g->pad.w - g->dil.w * (g->S - 1) - 1 < 0)
    return INV("%s: input 'x' spatial size (%lld, %lld) is too small for kernel (%lld, %lld)", op,
               (long long)g->H, (long long)g->W, (long long)g->R, (long long)g->S);
  return nullptr;
}

int64_t pool_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = n + 2 * p - d * (k - 1) - 1;
  int64_t num = span + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1; /* floor division */
  if (ceil_mode && (out - 1) * s >= n + p) out--;
  return out;
}

UD_Error* pool_geometry(const char* op, const int64_t* x, const UD_Attr* at, bool has_dil,
                        PoolGeom* g) {
  UD_KIT_TRY(pair_at_least(op, at[kPoolKernelSize], "kernel_size", 1, &g->k));
  g->stride = g->k;
  if (at[kPoolStride].value.ints.len) UD_KIT_TRY(pair_at_least(op, at[kPoolStride], "stride", 1, &g->stride));
  UD_KIT_TRY(pair_at_least(op, at[kPoolPadding], "padding", 0, &g->pad));
  g->dil = {1, 1};
  if (has_dil) UD_KIT_TRY(pair_at_least(op, at[UD_ATTR_MAX_POOL2D_DILATION], "dilation", 1, &g->dil));
  g->ceil_mode = at[has_dil ? UD_ATTR_MAX_POOL2D_CEIL_MODE : UD_ATTR_AVG_POOL2D_CEIL_MODE].value.b != 0;
  g->count_include_pad = has_dil ? false : at[UD_ATTR_AVG_POOL2D_COUNT_INCLUDE_PAD].value.b != 0;
  if (2 * g->pad.h > g->k.h || 2 * g->pad.w > g->k.w)
    return INV("%s: attribute 'padding' is (%lld, %lld), expected at most half the kernel size",
               op, (long long)g->pad.h, (long long)g->pad.w);
  g->N = x[0], g->C = x[1], g->H = x[2], g->W = x[3];
  g->OH = pool_out(g->H, g->k.h, g->stride.h, g->pad.h, g->dil.h, g->ceil_mode);
  g->OW = pool_out(g->W, g->k.w, g->stride.w, g->pad.w, g->dil.w, g->ceil_mode);
  if (g->OH < 1 || g->OW < 1)
    return INV("%s: input 'x' spatial size (%lld, %lld) is too small for kernel (%lld, %lld)", op,
               (long long)g->H, (long long)g->W, (long long)g->k.h, (long long)g->k.w);
  return nullptr;
}

/* optimizer steps: every state tensor has param's dtype and shape (any strides); the scalars
 * (state_step, grad_scale, found_inf) are one float32/float64 element each */
static UD_Error* check_optim(const OpInfo& op, const UD_KernelArgs* a) {
  const bool adam = op.id == UD_OP_ADAM_UPDATE;
  const int n_state = adam ? UD_IN_ADAM_UPDATE_STATE_STEP : UD_IN_SGD_UPDATE_GRAD_SCALE;
  const UD_Tensor& p = a->inputs[0];
  for (int i = 1; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    if (!ud_kit_present(&t)) continue;
    if (i < n_state) {
      UD_KIT_TRY(want_dtype(op.name, "input", in_name(op, i), t, p.dtype));
      UD_KIT_TRY(want_shape(op.name, "input", in_name(op, i), t, p.ndim, p.shape));
    } else if (!(dtype_bit(t.dtype) & UD_DTM_FLOAT_GROUP) || ud_kit_numel(&t) != 1) {
      return INV("%s: input '%s' is %s of shape %s, expected one float32 or float64 element",
                 op.name, in_name(op, i), ud_kit_dtype_name(t.dtype), shape_str(t).c_str());
    }
  }
  if (!adam && ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM) != 0 &&
      !ud_kit_present(&a->inputs[UD_IN_SGD_UPDATE_MOMENTUM_BUFFER]))
    return INV("sgd_update: input 'momentum_buffer' is absent, required when momentum = %g (not 0)",
               ud_kit_attr_float(a, UD_ATTR_SGD_UPDATE_MOMENTUM));
  return nullptr;
}

UD_Error* check_args(const OpInfo& op, const UD_KernelArgs* a) {
  UD_KIT_TRY(ud_kit_check_signature(op.id, a));
  for (int i = 0; i < a->num_attrs; i++)
    if (a->attrs[i].type == UD_ATTR_INTS && a->attrs[i].value.ints.len > 64)
      return INV("%s: attribute '%s' has %lld values, expected at most 64", op.name,
                 ud_op_info(op.id)->attrs[i].name, (long long)a->attrs[i].value.ints.len);
  for (int i = 0; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]) && !(dtype_bit(a->inputs[i].dtype) & kKnownDtypes))
      return INV("%s: input '%s' has dtype %s, which this plugin does not support", op.name,
                 in_name(op, i), ud_kit_dtype_name(a->inputs[i].dtype));
  for (int i = 0; i < a->num_outputs; i++)
    if (!(dtype_bit(a->outputs[i].dtype) & kKnownDtypes))
      return INV("%s: output %d has dtype %s, which this plugin does not support", op.name, i,
                 ud_kit_dtype_name(a->outputs[i].dtype));
  UD_DType lead = a->num_inputs ? a->inputs[0].dtype : a->outputs[0].dtype;
  if (!(dtype_bit(lead) & op.dtypes))
    return INV("%s: %s has dtype %s, which this op does not take", op.name,
               a->num_inputs ? "the first input" : "the output", ud_kit_dtype_name(lead));
  switch (op.family) {
    case F_COPY: case F_CAST: case F_EW: return check_ew(op, a);
    case F_FILL: case F_ARANGE: return check_nullary(op, a);
    case F_REDUCE: case F_ARG: return check_reduce(op, a);
    case F_MATMUL: case F_GEMM: return check_matmul(op, a);
    case F_CONV: case F_CONV_BI: case F_CONV_BW: return check_conv(op, a);
    case F_MAXPOOL: case F_MAXPOOL_B: case F_AVGPOOL: case F_AVGPOOL_B: case F_ADAPT:
    case F_ADAPT_B: return check_pool(op, a);
    case F_BN: case F_BN_B: return check_bn(op, a);
    case F_SOFTMAX: case F_SOFTMAX_B: return check_softmax(op, a);
    case F_NLL: case F_NLL_B: return check_nll(op, a);
    case F_MSE: case F_MSE_B: return check_mse(op, a);
    case F_CONCAT: return check_concat(op, a);
    case F_PAD: return check_pad(op, a);
    case F_OPTIM: return check_optim(op, a);
    case F_CONV_ACT: return check_conv(op, a);
    case F_GEMM_ACT: return check_matmul(op, a);
    case F_PROGRAM: return check_program(a);
    default: return ud_kit_error(UD_ERR_INTERNAL, "%s: no checker for this op family", op.name);
  }
}

}  // namespace udc
