/* check.cpp — the op table and every argument check made before a launch (plain C++: no CUDA,
 * so the checks are unit-tested on machines without a GPU). */
#include <cstring>
#include <string>

#include "cuda_plugin.h"

namespace udc {
namespace {

#define INV(...) ud_kit_error(UD_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define TRY(x)                  \
  do {                          \
    if (UD_Error* e_ = (x)) return e_; \
  } while (0)

const char* const kConv = "IIIis";
const char* const kPool = "III";
const char* const kAvg = "IIIbb";
const char* const kMax = "IIIIb";
const char* const kRed = "Ib";

const OpInfo kOps[] = {
    {"copy", F_COPY, 0, 1, 1, "", DT_ALL | DT_F16 | DT_BF16},
    {"fill", F_FILL, 0, 0, 1, "f", DT_ALL},
    {"zero", F_FILL, 1, 0, 1, "", DT_ALL},
    {"cast", F_CAST, 0, 1, 1, "s", DT_ALL},
    {"arange", F_ARANGE, 0, 0, 1, "fffs", DT_NUMERIC},
    {"neg", F_EW, E_NEG, 1, 1, "", DT_NUMERIC},
    {"abs", F_EW, E_ABS, 1, 1, "", DT_NUMERIC},
    {"exp", F_EW, E_EXP, 1, 1, "", DT_FLOAT},
    {"log", F_EW, E_LOG, 1, 1, "", DT_FLOAT},
    {"sqrt", F_EW, E_SQRT, 1, 1, "", DT_FLOAT},
    {"rsqrt", F_EW, E_RSQRT, 1, 1, "", DT_FLOAT},
    {"reciprocal", F_EW, E_RECIP, 1, 1, "", DT_FLOAT},
    {"sin", F_EW, E_SIN, 1, 1, "", DT_FLOAT},
    {"cos", F_EW, E_COS, 1, 1, "", DT_FLOAT},
    {"tanh", F_EW, E_TANH, 1, 1, "", DT_FLOAT},
    {"sigmoid", F_EW, E_SIGMOID, 1, 1, "", DT_FLOAT},
    {"relu", F_EW, E_RELU, 1, 1, "", DT_NUMERIC},
    {"gelu", F_EW, E_GELU, 1, 1, "s", DT_FLOAT},
    {"erf", F_EW, E_ERF, 1, 1, "", DT_FLOAT},
    {"floor", F_EW, E_FLOOR, 1, 1, "", DT_FLOAT},
    {"ceil", F_EW, E_CEIL, 1, 1, "", DT_FLOAT},
    {"round", F_EW, E_ROUND, 1, 1, "", DT_FLOAT},
    {"sign", F_EW, E_SIGN, 1, 1, "", DT_NUMERIC},
    {"square", F_EW, E_SQUARE, 1, 1, "", DT_NUMERIC},
    {"logical_not", F_EW, E_NOT, 1, 1, "", DT_ALL},
    {"add", F_EW, E_ADD, 2, 1, "f", DT_NUMERIC},
    {"sub", F_EW, E_SUB, 2, 1, "f", DT_NUMERIC},
    {"mul", F_EW, E_MUL, 2, 1, "", DT_ALL},
    {"div", F_EW, E_DIV, 2, 1, "", DT_FLOAT},
    {"pow", F_EW, E_POW, 2, 1, "", DT_FLOAT},
    {"maximum", F_EW, E_MAX, 2, 1, "", DT_NUMERIC},
    {"minimum", F_EW, E_MIN, 2, 1, "", DT_NUMERIC},
    {"eq", F_EW, E_EQ, 2, 1, "", DT_ALL},
    {"ne", F_EW, E_NE, 2, 1, "", DT_ALL},
    {"lt", F_EW, E_LT, 2, 1, "", DT_NUMERIC},
    {"le", F_EW, E_LE, 2, 1, "", DT_NUMERIC},
    {"gt", F_EW, E_GT, 2, 1, "", DT_NUMERIC},
    {"ge", F_EW, E_GE, 2, 1, "", DT_NUMERIC},
    {"logical_and", F_EW, E_AND, 2, 1, "", DT_ALL},
    {"logical_or", F_EW, E_OR, 2, 1, "", DT_ALL},
    {"where", F_EW, E_WHERE, 3, 1, "", DT_ALL},
    {"addcmul", F_EW, E_ADDCMUL, 3, 1, "f", DT_FLOAT},
    {"addcdiv", F_EW, E_ADDCDIV, 3, 1, "f", DT_FLOAT},
    {"lerp", F_EW, E_LERP, 2, 1, "f", DT_FLOAT},
    {"threshold_backward", F_EW, E_THRESH_B, 2, 1, "f", DT_NUMERIC},
    {"sigmoid_backward", F_EW, E_SIGMOID_B, 2, 1, "", DT_FLOAT},
    {"tanh_backward", F_EW, E_TANH_B, 2, 1, "", DT_FLOAT},
    {"gelu_backward", F_EW, E_GELU_B, 2, 1, "s", DT_FLOAT},
    {"sum", F_REDUCE, R_SUM, 1, 1, kRed, DT_NUMERIC},
    {"mean", F_REDUCE, R_MEAN, 1, 1, kRed, DT_FLOAT},
    {"max", F_REDUCE, R_MAX, 1, 1, kRed, DT_NUMERIC},
    {"min", F_REDUCE, R_MIN, 1, 1, kRed, DT_NUMERIC},
    {"prod", F_REDUCE, R_PROD, 1, 1, kRed, DT_NUMERIC},
    {"argmax", F_ARG, R_ARGMAX, 1, 1, kRed, DT_NUMERIC},
    {"argmin", F_ARG, R_ARGMIN, 1, 1, kRed, DT_NUMERIC},
    {"matmul", F_MATMUL, 0, 2, 1, "", DT_DENSE},
    {"gemm", F_GEMM, 0, 3, 1, "ff", DT_DENSE},
    {"conv2d", F_CONV, 0, 3, 1, kConv, DT_DENSE},
    {"conv2d_backward_input", F_CONV_BI, 0, 2, 1, "IIIIis", DT_DENSE},
    {"conv2d_backward_weight", F_CONV_BW, 0, 2, 1, "IIIIis", DT_DENSE},
    {"max_pool2d", F_MAXPOOL, 0, 1, 2, kMax, DT_FLOAT},
    {"max_pool2d_backward", F_MAXPOOL_B, 0, 3, 1, kMax, DT_FLOAT},
    {"avg_pool2d", F_AVGPOOL, 0, 1, 1, kAvg, DT_FLOAT},
    {"avg_pool2d_backward", F_AVGPOOL_B, 0, 2, 1, kAvg, DT_FLOAT},
    {"adaptive_avg_pool2d", F_ADAPT, 0, 1, 1, "I", DT_FLOAT},
    {"adaptive_avg_pool2d_backward", F_ADAPT_B, 0, 2, 1, "I", DT_FLOAT},
    {"batch_norm", F_BN, 0, 5, 3, "bff", DT_FLOAT},
    {"batch_norm_backward", F_BN_B, 0, 5, 3, "b", DT_FLOAT},
    {"softmax", F_SOFTMAX, S_SOFTMAX, 1, 1, "i", DT_FLOAT},
    {"log_softmax", F_SOFTMAX, S_LOG_SOFTMAX, 1, 1, "i", DT_FLOAT},
    {"softmax_backward", F_SOFTMAX_B, S_SOFTMAX, 2, 1, "i", DT_FLOAT},
    {"log_softmax_backward", F_SOFTMAX_B, S_LOG_SOFTMAX, 2, 1, "i", DT_FLOAT},
    {"nll_loss", F_NLL, 0, 3, 2, "si", DT_FLOAT},
    {"nll_loss_backward", F_NLL_B, 0, 5, 1, "si", DT_FLOAT},
    {"mse_loss", F_MSE, 0, 2, 1, "s", DT_FLOAT},
    {"mse_loss_backward", F_MSE_B, 0, 3, 1, "s", DT_FLOAT},
    {"concat", F_CONCAT, 0, -1, 1, "i", DT_ALL},
    {"pad_constant", F_PAD, 0, 1, 1, "If", DT_ALL},
};
const int kNumOps = sizeof kOps / sizeof kOps[0];

/* Input names per family, for messages ("input 'weight'"). */
const char* in_name(const OpInfo& op, int i) {
  static const char* const xyz[] = {"x", "y", "cond"}, *const xab[] = {"x", "a", "b"},
      *const abc[] = {"a", "b", "c"}, *const xwb[] = {"x", "weight", "bias"},
      *const gxi[] = {"grad_y", "x", "indices"},
      *const bn[] = {"x", "weight", "bias", "running_mean", "running_var"},
      *const bnb[] = {"grad_y", "x", "weight", "save_mean", "save_invstd"},
      *const nll[] = {"logp", "target", "weight"},
      *const nllb[] = {"grad_loss", "logp", "target", "weight", "total_weight"},
      *const mseb[] = {"grad_loss", "x", "target"};
  switch (op.family) {
    case F_EW:
      if (op.code == E_ADDCMUL || op.code == E_ADDCDIV) return xab[i];
      if (op.code == E_LERP) return i ? "end" : "x";
      if (op.code >= E_THRESH_B)
        return i ? (op.code == E_THRESH_B || op.code == E_GELU_B ? "x" : "y") : "grad";
      return xyz[i];
    case F_MATMUL: case F_GEMM: return abc[i];
    case F_CONV: return xwb[i];
    case F_CONV_BI: return i ? "weight" : "grad_y";
    case F_CONV_BW: return i ? "x" : "grad_y";
    case F_MAXPOOL_B: return gxi[i];
    case F_AVGPOOL_B: case F_ADAPT_B: return i ? "x" : "grad_y";
    case F_BN: return bn[i];
    case F_BN_B: return bnb[i];
    case F_SOFTMAX_B: return i ? "y" : "grad_y";
    case F_NLL: return nll[i];
    case F_NLL_B: return nllb[i];
    case F_MSE: return i ? "target" : "x";
    case F_MSE_B: return mseb[i];
    case F_CONCAT: return "tensors";
    default: return "x";
  }
}

bool optional_input(const OpInfo& op, int i) {
  switch (op.family) {
    case F_GEMM: case F_CONV: case F_NLL: return i == 2;
    case F_BN: return i >= 1;
    case F_BN_B: return i == 2;
    case F_NLL_B: return i == 3;
    default: return false;
  }
}

char attr_char(UD_AttrType t) {
  switch (t) {
    case UD_ATTR_INT: return 'i';
    case UD_ATTR_FLOAT: return 'f';
    case UD_ATTR_BOOL: return 'b';
    case UD_ATTR_STRING: return 's';
    case UD_ATTR_INTS: return 'I';
  }
  return '?';
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

const UD_DType kBool = {UD_DTYPE_BOOL, 8, 1};
const UD_DType kI64 = {UD_DTYPE_INT, 64, 1};

bool bool_output(int code) { return code == E_NOT || (code >= E_EQ && code <= E_OR); }

UD_Error* check_ew(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& out = a->outputs[0];
  const UD_DType dt = a->inputs[0].dtype;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    TRY(want_shape(op.name, "input", in_name(op, i), t, out.ndim, out.shape));
    bool cond = op.family == F_EW && op.code == E_WHERE && i == 2;
    TRY(want_dtype(op.name, "input", in_name(op, i), t, cond ? kBool : dt));
  }
  UD_DType want = dt;
  if (op.family == F_EW && bool_output(op.code)) want = kBool;
  if (op.family == F_CAST && !dtype_from_name(a->attrs[0].value.s, &want))
    return INV("%s: attribute 'dtype' is '%s', expected a unidev dtype name", op.name,
               a->attrs[0].value.s);
  TRY(want_dtype(op.name, "output", "y", out, want));
  if (op.family == F_CAST && !(dtype_bit(want) & DT_ALL))
    return INV("%s: output dtype %s is not supported, expected float32, float64, int32, int64 or "
               "bool", op.name, ud_kit_dtype_name(want));
  if ((op.code == E_GELU || op.code == E_GELU_B) && op.family == F_EW) {
    const char* s = a->attrs[0].value.s;
    if (strcmp(s, "none") && strcmp(s, "tanh"))
      return INV("%s: attribute 'approximate' is '%s', expected 'none' or 'tanh'", op.name, s);
  }
  if (op.family == F_EW && (op.code == E_ADD || op.code == E_SUB))
    return ud_kit_check_scalar(op.name, "alpha", a->attrs[0].value.f, dt, 1);
  return nullptr;
}

UD_Error* check_reduce(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor &x = a->inputs[0], &y = a->outputs[0];
  uint32_t mask = 0;
  TRY(reduce_mask(op.name, a->attrs[0], x.ndim, &mask));
  bool arg = op.family == F_ARG;
  if (arg && a->attrs[0].value.ints.len > 1)
    return INV("%s: attribute 'axes' has %lld axes, expected at most one", op.name,
               (long long)a->attrs[0].value.ints.len);
  bool keep = a->attrs[1].value.b != 0;
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
  TRY(want_shape(op.name, "output", arg ? "index" : "y", y, n, shape));
  return want_dtype(op.name, "output", arg ? "index" : "y", y, arg ? kI64 : x.dtype);
}

UD_Error* check_matmul(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor &A = a->inputs[0], &B = a->inputs[1], &O = a->outputs[0];
  for (int i = 1; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]))
      TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], A.dtype));
  TRY(want_dtype(op.name, "output", "out", O, A.dtype));
  int n = A.ndim;
  if (n < 2 || (op.family == F_GEMM && n != 2))
    return INV("%s: input 'a' has shape %s, expected %s", op.name, shape_str(A).c_str(),
               op.family == F_GEMM ? "2-D [M, K]" : "ndim >= 2");
  int64_t want[UD_KIT_MAX_DIMS];
  for (int d = 0; d < n - 2; d++) want[d] = O.ndim == n ? O.shape[d] : 0;
  want[n - 2] = A.shape[n - 1];
  want[n - 1] = O.ndim == n ? O.shape[n - 1] : 0;
  TRY(want_shape(op.name, "input", "b", B, n, want));
  want[n - 2] = A.shape[n - 2];
  want[n - 1] = B.shape[n - 1];
  for (int d = 0; d < n - 2; d++) want[d] = A.shape[d];
  TRY(want_shape(op.name, "output", "out", O, n, want));
  if (op.family == F_GEMM && ud_kit_present(&a->inputs[2]))
    TRY(want_shape(op.name, "input", "c", a->inputs[2], 2, want));
  return nullptr;
}

UD_Error* check_conv(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& o = a->outputs[0];
  for (int i = 1; i < a->num_inputs; i++)
    if (ud_kit_present(&a->inputs[i]))
      TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], a->inputs[0].dtype));
  TRY(want_dtype(op.name, "output", "y", o, a->inputs[0].dtype));
  int first = op.family == F_CONV ? 0 : 1;
  const char* alg = a->attrs[first + 4].value.s;
  if (strcmp(alg, "auto") && strcmp(alg, "cudnn") && strcmp(alg, "direct") && strcmp(alg, "im2col"))
    return INV("%s: attribute 'algorithm' is '%s', expected 'auto', 'cudnn', 'direct' or 'im2col'",
               op.name, alg);
  const int64_t *xs, *ws;
  const UD_Attr& sa = a->attrs[0];
  if (first && (sa.value.ints.len != 4))
    return INV("%s: attribute '%s' has %lld values, expected 4", op.name, sa.name ? sa.name : "",
               (long long)sa.value.ints.len);
  for (int i = 0; first && i < 4; i++)
    if (sa.value.ints.data[i] < 0)
      return INV("%s: attribute '%s' has a negative extent", op.name, sa.name ? sa.name : "");
  if (op.family == F_CONV_BW) {
    TRY(want_ndim(op.name, "x", a->inputs[1], 4, "NCHW"));
    xs = a->inputs[1].shape;
    ws = sa.value.ints.data;
  } else {
    const UD_Tensor& w = a->inputs[1];
    TRY(want_ndim(op.name, "weight", w, 4, "[K, C/groups, R, S]"));
    ws = w.shape;
    if (op.family == F_CONV) TRY(want_ndim(op.name, "x", a->inputs[0], 4, "NCHW"));
    xs = op.family == F_CONV ? a->inputs[0].shape : sa.value.ints.data;
  }
  ConvGeom g;
  TRY(conv_geometry(op.name, xs, ws, a->attrs + first, &g));
  const int64_t yshape[4] = {g.N, g.K, g.OH, g.OW};
  if (op.family == F_CONV) {
    if (ud_kit_present(&a->inputs[2])) TRY(want_shape(op.name, "input", "bias", a->inputs[2], 1, &g.K));
    return want_shape(op.name, "output", "y", o, 4, yshape);
  }
  TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], 4, yshape));
  return want_shape(op.name, "output", op.family == F_CONV_BI ? "grad_x" : "grad_w", o, 4,
                    op.family == F_CONV_BI ? xs : ws);
}

UD_Error* check_pool(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_MAXPOOL_B || op.family == F_AVGPOOL_B || op.family == F_ADAPT_B;
  const UD_Tensor& x = a->inputs[bwd ? 1 : 0];
  TRY(want_ndim(op.name, "x", x, 4, "NCHW"));
  for (int i = 0; i < a->num_inputs; i++)
    if (!(op.family == F_MAXPOOL_B && i == 2))
      TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], x.dtype));
  int64_t ys[4] = {x.shape[0], x.shape[1], 0, 0};
  if (op.family == F_ADAPT || op.family == F_ADAPT_B) {
    Pair p;
    if (!attr_pair(a->attrs[0], &p) || p.h < 1 || p.w < 1)
      return INV("%s: attribute 'output_size' expects two ints >= 1", op.name);
    ys[2] = p.h, ys[3] = p.w;
  } else {
    PoolGeom g;
    TRY(pool_geometry(op.name, x.shape, a->attrs,
                      op.family == F_MAXPOOL || op.family == F_MAXPOOL_B, &g));
    ys[2] = g.OH, ys[3] = g.OW;
  }
  if (!bwd) {
    TRY(want_shape(op.name, "output", "y", a->outputs[0], 4, ys));
    TRY(want_dtype(op.name, "output", "y", a->outputs[0], x.dtype));
    if (op.family == F_MAXPOOL) {
      TRY(want_shape(op.name, "output", "indices", a->outputs[1], 4, ys));
      TRY(want_dtype(op.name, "output", "indices", a->outputs[1], kI64));
    }
    return nullptr;
  }
  TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], 4, ys));
  if (op.family == F_MAXPOOL_B) {
    TRY(want_shape(op.name, "input", "indices", a->inputs[2], 4, ys));
    TRY(want_dtype(op.name, "input", "indices", a->inputs[2], kI64));
  }
  TRY(want_shape(op.name, "output", "grad_x", a->outputs[0], 4, x.shape));
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
    TRY(want_dtype(op.name, "input", in_name(op, i), t, x.dtype));
    if (&t != &x && !(bwd && i == 0)) TRY(want_shape(op.name, "input", in_name(op, i), t, 1, &C));
  }
  if (bwd) TRY(want_shape(op.name, "input", "grad_y", a->inputs[0], x.ndim, x.shape));
  bool training = a->attrs[0].value.b != 0;
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
    TRY(want_dtype(op.name, "output", n, a->outputs[i], x.dtype));
    TRY(i ? want_shape(op.name, "output", n, a->outputs[i], 1, &C)
          : want_shape(op.name, "output", n, a->outputs[i], x.ndim, x.shape));
  }
  return nullptr;
}

UD_Error* check_softmax(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& x = a->inputs[a->num_inputs - 1];
  if (norm_axis(a->attrs[0].value.i, x.ndim) < 0)
    return INV("%s: attribute 'axis' is %lld, expected in [%d, %d)", op.name,
               (long long)a->attrs[0].value.i, -(x.ndim ? x.ndim : 1), x.ndim ? x.ndim : 1);
  for (int i = 0; i < a->num_inputs; i++) {
    TRY(want_shape(op.name, "input", in_name(op, i), a->inputs[i], x.ndim, x.shape));
    TRY(want_dtype(op.name, "input", in_name(op, i), a->inputs[i], x.dtype));
  }
  TRY(want_shape(op.name, "output", "y", a->outputs[0], x.ndim, x.shape));
  return want_dtype(op.name, "output", "y", a->outputs[0], x.dtype);
}

UD_Error* check_reduction_attr(const OpInfo& op, const UD_Attr& r) {
  if (strcmp(r.value.s, "none") && strcmp(r.value.s, "mean") && strcmp(r.value.s, "sum"))
    return INV("%s: attribute 'reduction' is '%s', expected 'none', 'mean' or 'sum'", op.name,
               r.value.s);
  return nullptr;
}

UD_Error* check_nll(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_NLL_B;
  const UD_Tensor &lp = a->inputs[bwd], &tg = a->inputs[bwd + 1], &w = a->inputs[bwd + 2];
  TRY(check_reduction_attr(op, a->attrs[0]));
  if (lp.ndim != 1 && lp.ndim != 2)
    return INV("%s: input 'logp' has shape %s, expected [N, C] or [C]", op.name,
               shape_str(lp).c_str());
  if (!(dtype_bit(tg.dtype) & DT_INT))
    return INV("%s: input 'target' has dtype %s, expected int32 or int64", op.name,
               ud_kit_dtype_name(tg.dtype));
  TRY(want_shape(op.name, "input", "target", tg, lp.ndim - 1, lp.shape));
  if (ud_kit_present(&w)) {
    TRY(want_shape(op.name, "input", "weight", w, 1, lp.shape + lp.ndim - 1));
    TRY(want_dtype(op.name, "input", "weight", w, lp.dtype));
  }
  bool none = !strcmp(a->attrs[0].value.s, "none");
  int loss_nd = none ? lp.ndim - 1 : 0;
  if (bwd) {
    TRY(want_shape(op.name, "input", "grad_loss", a->inputs[0], loss_nd, lp.shape));
    TRY(want_dtype(op.name, "input", "grad_loss", a->inputs[0], lp.dtype));
    TRY(want_shape(op.name, "input", "total_weight", a->inputs[4], 0, nullptr));
    TRY(want_dtype(op.name, "input", "total_weight", a->inputs[4], lp.dtype));
    TRY(want_shape(op.name, "output", "grad_logp", a->outputs[0], lp.ndim, lp.shape));
    return want_dtype(op.name, "output", "grad_logp", a->outputs[0], lp.dtype);
  }
  TRY(want_shape(op.name, "output", "loss", a->outputs[0], loss_nd, lp.shape));
  TRY(want_shape(op.name, "output", "total_weight", a->outputs[1], 0, nullptr));
  TRY(want_dtype(op.name, "output", "loss", a->outputs[0], lp.dtype));
  return want_dtype(op.name, "output", "total_weight", a->outputs[1], lp.dtype);
}

UD_Error* check_mse(const OpInfo& op, const UD_KernelArgs* a) {
  bool bwd = op.family == F_MSE_B;
  const UD_Tensor &x = a->inputs[bwd], &tg = a->inputs[bwd + 1], &o = a->outputs[0];
  TRY(check_reduction_attr(op, a->attrs[0]));
  TRY(want_shape(op.name, "input", "target", tg, x.ndim, x.shape));
  TRY(want_dtype(op.name, "input", "target", tg, x.dtype));
  bool none = !strcmp(a->attrs[0].value.s, "none");
  if (bwd) {
    TRY(want_shape(op.name, "input", "grad_loss", a->inputs[0], none ? x.ndim : 0, x.shape));
    TRY(want_dtype(op.name, "input", "grad_loss", a->inputs[0], x.dtype));
    TRY(want_shape(op.name, "output", "grad_x", o, x.ndim, x.shape));
    return want_dtype(op.name, "output", "grad_x", o, x.dtype);
  }
  TRY(want_shape(op.name, "output", "loss", o, none ? x.ndim : 0, x.shape));
  return want_dtype(op.name, "output", "loss", o, x.dtype);
}

UD_Error* check_concat(const OpInfo& op, const UD_KernelArgs* a) {
  if (a->num_inputs < 1) return INV("%s: input 'tensors' is empty, expected at least one", op.name);
  const UD_Tensor& f = a->inputs[0];
  if (f.ndim < 1) return INV("%s: input 'tensors' holds 0-d tensors, expected ndim >= 1", op.name);
  int axis = norm_axis(a->attrs[0].value.i, f.ndim);
  if (axis < 0)
    return INV("%s: attribute 'axis' is %lld, expected in [%d, %d)", op.name,
               (long long)a->attrs[0].value.i, -f.ndim, f.ndim);
  int64_t shape[UD_KIT_MAX_DIMS];
  memcpy(shape, f.shape, sizeof(int64_t) * f.ndim);
  shape[axis] = 0;
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    TRY(want_dtype(op.name, "input", "tensors", t, f.dtype));
    bool ok = t.ndim == f.ndim;
    for (int d = 0; ok && d < f.ndim; d++) ok = d == axis || t.shape[d] == f.shape[d];
    if (!ok)
      return INV("%s: input 'tensors[%d]' has shape %s, expected %s outside axis %d", op.name, i,
                 shape_str(t).c_str(), shape_str(f).c_str(), axis);
    shape[axis] += t.shape[axis];
  }
  TRY(want_shape(op.name, "output", "out", a->outputs[0], f.ndim, shape));
  return want_dtype(op.name, "output", "out", a->outputs[0], f.dtype);
}

UD_Error* check_pad(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& x = a->inputs[0];
  const UD_Attr& p = a->attrs[0];
  if (p.value.ints.len != 2 * x.ndim)
    return INV("%s: attribute 'pads' has %lld values, expected %d (before, after per dimension)",
               op.name, (long long)p.value.ints.len, 2 * x.ndim);
  int64_t shape[UD_KIT_MAX_DIMS];
  for (int d = 0; d < x.ndim; d++) {
    int64_t b = p.value.ints.data[2 * d], e = p.value.ints.data[2 * d + 1];
    if (b < 0 || e < 0) return INV("%s: attribute 'pads' has a negative value at dim %d", op.name, d);
    shape[d] = x.shape[d] + b + e;
  }
  TRY(want_shape(op.name, "output", "y", a->outputs[0], x.ndim, shape));
  TRY(want_dtype(op.name, "output", "y", a->outputs[0], x.dtype));
  return ud_kit_check_scalar(op.name, "value", a->attrs[1].value.f, x.dtype, 0);
}

UD_Error* check_nullary(const OpInfo& op, const UD_KernelArgs* a) {
  const UD_Tensor& y = a->outputs[0];
  if (op.family == F_ARANGE) {
    UD_DType want;
    if (!dtype_from_name(a->attrs[3].value.s, &want) || !(dtype_bit(want) & DT_NUMERIC))
      return INV("%s: attribute 'dtype' is '%s', expected float32, float64, int32 or int64",
                 op.name, a->attrs[3].value.s);
    TRY(want_dtype(op.name, "output", "y", y, want));
    if (y.ndim != 1)
      return INV("%s: output 'y' has shape %s, expected 1-D", op.name, shape_str(y).c_str());
    TRY(ud_kit_check_arange(op.name, a->attrs[0].value.f, a->attrs[1].value.f,
                            a->attrs[2].value.f, y.shape[0], y.dtype));
  }
  if (op.family == F_FILL && op.code == 0)
    return ud_kit_check_scalar(op.name, "value", a->attrs[0].value.f, y.dtype, 0);
  return nullptr;
}

}  // namespace

int op_count() { return kNumOps; }
const OpInfo& op_at(int i) { return kOps[i]; }

const OpInfo* op_find(const char* name) {
  for (const OpInfo& op : kOps)
    if (!strcmp(op.name, name)) return &op;
  return nullptr;
}

unsigned dtype_bit(UD_DType d) {
  if (d.lanes != 1) return 0;
  switch (d.code) {
    case UD_DTYPE_FLOAT: return d.bits == 32 ? DT_F32 : d.bits == 64 ? DT_F64 : d.bits == 16 ? DT_F16 : 0;
    case UD_DTYPE_BFLOAT: return d.bits == 16 ? DT_BF16 : 0;
    case UD_DTYPE_INT: return d.bits == 32 ? DT_I32 : d.bits == 64 ? DT_I64 : 0;
    case UD_DTYPE_BOOL: return d.bits == 8 ? DT_BOOL : 0;
    default: return 0;
  }
}

bool dtype_from_name(const char* name, UD_DType* out) {
  static const struct { const char* n; UD_DType d; } names[] = {
      {"float32", {UD_DTYPE_FLOAT, 32, 1}}, {"float64", {UD_DTYPE_FLOAT, 64, 1}},
      {"float16", {UD_DTYPE_FLOAT, 16, 1}}, {"bfloat16", {UD_DTYPE_BFLOAT, 16, 1}},
      {"int32", {UD_DTYPE_INT, 32, 1}},     {"int64", {UD_DTYPE_INT, 64, 1}},
      {"bool", {UD_DTYPE_BOOL, 8, 1}},      {"uint8", {UD_DTYPE_UINT, 8, 1}}};
  for (const auto& e : names)
    if (name && !strcmp(e.n, name)) return *out = e.d, true;
  return false;
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
  TRY(pair_at_least(op, at[0], "stride", 1, &g->stride));
  TRY(pair_at_least(op, at[1], "padding", 0, &g->pad));
  TRY(pair_at_least(op, at[2], "dilation", 1, &g->dil));
  g->N = x[0], g->C = x[1], g->H = x[2], g->W = x[3];
  g->K = w[0], g->R = w[2], g->S = w[3], g->groups = at[3].value.i;
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
  TRY(pair_at_least(op, at[0], "kernel_size", 1, &g->k));
  g->stride = g->k;
  if (at[1].value.ints.len) TRY(pair_at_least(op, at[1], "stride", 1, &g->stride));
  TRY(pair_at_least(op, at[2], "padding", 0, &g->pad));
  g->dil = {1, 1};
  if (has_dil) TRY(pair_at_least(op, at[3], "dilation", 1, &g->dil));
  g->ceil_mode = at[has_dil ? 4 : 3].value.b != 0;
  g->count_include_pad = has_dil ? false : at[4].value.b != 0;
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

UD_Error* check_args(const OpInfo& op, const UD_KernelArgs* a) {
  if (!a || a->struct_size < sizeof(UD_KernelArgs))
    return INV("%s: UD_KernelArgs is NULL or older than this plugin's (struct_size)", op.name);
  bool variadic = op.num_inputs < 0;
  if ((variadic ? a->num_inputs < 1 : a->num_inputs != op.num_inputs) ||
      a->num_outputs != op.num_outputs)
    return INV("%s: got %d inputs and %d outputs, expected %s%d and %d", op.name, a->num_inputs,
               a->num_outputs, variadic ? "at least " : "", variadic ? 1 : op.num_inputs,
               op.num_outputs);
  int nattrs = (int)strlen(op.attrs);
  if (a->num_attrs != nattrs || (nattrs && !a->attrs))
    return INV("%s: got %d attributes, expected %d", op.name, a->num_attrs, nattrs);
  for (int i = 0; i < nattrs; i++) {
    const UD_Attr& at = a->attrs[i];
    if (attr_char(at.type) != op.attrs[i])
      return INV("%s: attribute %d ('%s') has the wrong type, expected '%c' (i int, f float, b "
                 "bool, s str, I ints)", op.name, i, at.name ? at.name : "?", op.attrs[i]);
    if ((at.type == UD_ATTR_STRING && !at.value.s) ||
        (at.type == UD_ATTR_INTS && at.value.ints.len && !at.value.ints.data) ||
        (at.type == UD_ATTR_INTS && (at.value.ints.len < 0 || at.value.ints.len > 64)))
      return INV("%s: attribute '%s' has a NULL or malformed value", op.name,
                 at.name ? at.name : "?");
  }
  if ((a->num_inputs && !a->inputs) || !a->outputs)
    return INV("%s: NULL inputs or outputs array", op.name);
  for (int i = 0; i < a->num_inputs; i++) {
    const UD_Tensor& t = a->inputs[i];
    if (t.ndim == -1) {
      if (optional_input(op, i)) continue;
      return INV("%s: input '%s' is required", op.name, in_name(op, i));
    }
    TRY(ud_kit_check_tensor(op.name, in_name(op, i), &t));
    if (!dtype_bit(t.dtype))
      return INV("%s: input '%s' has dtype %s, which this plugin does not support", op.name,
                 in_name(op, i), ud_kit_dtype_name(t.dtype));
  }
  for (int i = 0; i < a->num_outputs; i++) {
    TRY(ud_kit_check_tensor(op.name, "output", &a->outputs[i]));
    if (!dtype_bit(a->outputs[i].dtype))
      return INV("%s: output %d has dtype %s, which this plugin does not support", op.name, i,
                 ud_kit_dtype_name(a->outputs[i].dtype));
  }
  UD_DType lead = op.num_inputs ? a->inputs[0].dtype : a->outputs[0].dtype;
  if (!(dtype_bit(lead) & op.dtypes))
    return INV("%s: %s has dtype %s, which this op does not take", op.name,
               op.num_inputs ? "the first input" : "the output", ud_kit_dtype_name(lead));
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
    default: return ud_kit_error(UD_ERR_INTERNAL, "%s: no checker for this op family", op.name);
  }
}

}  // namespace udc
