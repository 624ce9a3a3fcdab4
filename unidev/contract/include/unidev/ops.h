/* ops.h — the op set, dtypes and error kinds as C tables (generated; do not edit).
 *
 * Generated from unidev/contract/{opset,dtypes,errors}.py by `python -m unidev.contract.gen`;
 * tests/test_contract_gen.py checks it is current. Header-only, C17 and C++17: every table
 * is a static const inside a static inline function, nothing allocates. */
#ifndef UNIDEV_OPS_H_
#define UNIDEV_OPS_H_

#include <stdint.h>
#include <string.h>

#include "unidev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes: the one canonical table ------------------------------------------------------
 * X(ID, "name", UD_DTypeCode, bits) in unidev.contract.dtypes.DTYPES order. */
#define UD_DTYPES(X) \
  X(FLOAT32, "float32", UD_DTYPE_FLOAT, 32) \
  X(FLOAT64, "float64", UD_DTYPE_FLOAT, 64) \
  X(FLOAT16, "float16", UD_DTYPE_FLOAT, 16) \
  X(BFLOAT16, "bfloat16", UD_DTYPE_BFLOAT, 16) \
  X(INT32, "int32", UD_DTYPE_INT, 32) \
  X(INT64, "int64", UD_DTYPE_INT, 64) \
  X(UINT8, "uint8", UD_DTYPE_UINT, 8) \
  X(BOOL, "bool", UD_DTYPE_BOOL, 8)

typedef enum UD_DTypeId {
  UD_DT_FLOAT32,
  UD_DT_FLOAT64,
  UD_DT_FLOAT16,
  UD_DT_BFLOAT16,
  UD_DT_INT32,
  UD_DT_INT64,
  UD_DT_UINT8,
  UD_DT_BOOL,
  UD_DT_COUNT
} UD_DTypeId;

#define UD_DTM_FLOAT32 (1u << UD_DT_FLOAT32)
#define UD_DTM_FLOAT64 (1u << UD_DT_FLOAT64)
#define UD_DTM_FLOAT16 (1u << UD_DT_FLOAT16)
#define UD_DTM_BFLOAT16 (1u << UD_DT_BFLOAT16)
#define UD_DTM_INT32 (1u << UD_DT_INT32)
#define UD_DTM_INT64 (1u << UD_DT_INT64)
#define UD_DTM_UINT8 (1u << UD_DT_UINT8)
#define UD_DTM_BOOL (1u << UD_DT_BOOL)
/* the op set's dtype groups (unidev.contract.dtypes; ALL is the op set's ALL, not every row) */
#define UD_DTM_FLOAT_GROUP (UD_DTM_FLOAT32 | UD_DTM_FLOAT64)
#define UD_DTM_INT_GROUP (UD_DTM_INT32 | UD_DTM_INT64)
#define UD_DTM_NUMERIC (UD_DTM_FLOAT32 | UD_DTM_FLOAT64 | UD_DTM_INT32 | UD_DTM_INT64)
#define UD_DTM_ALL (UD_DTM_FLOAT32 | UD_DTM_FLOAT64 | UD_DTM_INT32 | UD_DTM_INT64 | UD_DTM_BOOL)

/* index into UD_DTYPES, or -1 when `d` is not a unidev dtype (lanes must be 1) */
static inline int ud_dtype_id(UD_DType d) {
  if (d.lanes != 1) return -1;
#define UD_X_(ID, NAME, CODE, BITS) \
  if (d.code == (CODE) && d.bits == (BITS)) return UD_DT_##ID;
  UD_DTYPES(UD_X_)
#undef UD_X_
  return -1;
}

/* the dtype of id `id` ({0, 0, 0} when out of range) */
static inline UD_DType ud_dtype_of(int id) {
  static const UD_DType table[] = {
#define UD_X_(ID, NAME, CODE, BITS) {(uint8_t)(CODE), (uint8_t)(BITS), 1},
      UD_DTYPES(UD_X_)
#undef UD_X_
  };
  if (id < 0 || id >= UD_DT_COUNT) {
    UD_DType none = {0, 0, 0};
    return none;
  }
  return table[id];
}

static inline const char* ud_dtype_id_name(int id) {
  static const char* const names[] = {
#define UD_X_(ID, NAME, CODE, BITS) NAME,
      UD_DTYPES(UD_X_)
#undef UD_X_
  };
  return id >= 0 && id < UD_DT_COUNT ? names[id] : "unknown";
}

/* "float32", ...; "unknown" for anything else */
static inline const char* ud_dtype_name(UD_DType d) { return ud_dtype_id_name(ud_dtype_id(d)); }

/* id of dtype `name`, -1 if unknown (or NULL) */
static inline int ud_dtype_from_name(const char* name) {
  if (!name) return -1;
  for (int i = 0; i < UD_DT_COUNT; i++)
    if (strcmp(name, ud_dtype_id_name(i)) == 0) return i;
  return -1;
}

/* ---- ops ---------------------------------------------------------------------------------
 * X(ID, "name", tier) in op-set order. */
#define UD_OPS(X) \
  X(COPY, "copy", 0) \
  X(FILL, "fill", 0) \
  X(ZERO, "zero", 0) \
  X(CAST, "cast", 0) \
  X(ARANGE, "arange", 0) \
  X(NEG, "neg", 1) \
  X(ABS, "abs", 1) \
  X(EXP, "exp", 1) \
  X(LOG, "log", 1) \
  X(SQRT, "sqrt", 1) \
  X(RSQRT, "rsqrt", 1) \
  X(RECIPROCAL, "reciprocal", 1) \
  X(SIN, "sin", 1) \
  X(COS, "cos", 1) \
  X(TANH, "tanh", 1) \
  X(SIGMOID, "sigmoid", 1) \
  X(RELU, "relu", 1) \
  X(GELU, "gelu", 1) \
  X(ERF, "erf", 1) \
  X(FLOOR, "floor", 1) \
  X(CEIL, "ceil", 1) \
  X(ROUND, "round", 1) \
  X(SIGN, "sign", 1) \
  X(SQUARE, "square", 1) \
  X(LOGICAL_NOT, "logical_not", 1) \
  X(ADD, "add", 1) \
  X(SUB, "sub", 1) \
  X(MUL, "mul", 1) \
  X(DIV, "div", 1) \
  X(POW, "pow", 1) \
  X(MAXIMUM, "maximum", 1) \
  X(MINIMUM, "minimum", 1) \
  X(EQ, "eq", 1) \
  X(NE, "ne", 1) \
  X(LT, "lt", 1) \
  X(LE, "le", 1) \
  X(GT, "gt", 1) \
  X(GE, "ge", 1) \
  X(LOGICAL_AND, "logical_and", 1) \
  X(LOGICAL_OR, "logical_or", 1) \
  X(WHERE, "where", 1) \
  X(ADDCMUL, "addcmul", 1) \
  X(ADDCDIV, "addcdiv", 1) \
  X(LERP, "lerp", 1) \
  X(THRESHOLD_BACKWARD, "threshold_backward", 1) \
  X(SIGMOID_BACKWARD, "sigmoid_backward", 1) \
  X(TANH_BACKWARD, "tanh_backward", 1) \
  X(GELU_BACKWARD, "gelu_backward", 1) \
  X(SUM, "sum", 1) \
  X(MEAN, "mean", 1) \
  X(MAX, "max", 1) \
  X(MIN, "min", 1) \
  X(PROD, "prod", 1) \
  X(ARGMAX, "argmax", 1) \
  X(ARGMIN, "argmin", 1) \
  X(MATMUL, "matmul", 1) \
  X(GEMM, "gemm", 1) \
  X(CONV2D, "conv2d", 2) \
  X(CONV2D_BACKWARD_INPUT, "conv2d_backward_input", 2) \
  X(CONV2D_BACKWARD_WEIGHT, "conv2d_backward_weight", 2) \
  X(MAX_POOL2D, "max_pool2d", 2) \
  X(MAX_POOL2D_BACKWARD, "max_pool2d_backward", 2) \
  X(AVG_POOL2D, "avg_pool2d", 2) \
  X(AVG_POOL2D_BACKWARD, "avg_pool2d_backward", 2) \
  X(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", 2) \
  X(ADAPTIVE_AVG_POOL2D_BACKWARD, "adaptive_avg_pool2d_backward", 2) \
  X(BATCH_NORM, "batch_norm", 2) \
  X(BATCH_NORM_BACKWARD, "batch_norm_backward", 2) \
  X(SOFTMAX, "softmax", 2) \
  X(LOG_SOFTMAX, "log_softmax", 2) \
  X(SOFTMAX_BACKWARD, "softmax_backward", 2) \
  X(LOG_SOFTMAX_BACKWARD, "log_softmax_backward", 2) \
  X(NLL_LOSS, "nll_loss", 2) \
  X(NLL_LOSS_BACKWARD, "nll_loss_backward", 2) \
  X(MSE_LOSS, "mse_loss", 2) \
  X(MSE_LOSS_BACKWARD, "mse_loss_backward", 2) \
  X(CONCAT, "concat", 2) \
  X(PAD_CONSTANT, "pad_constant", 2) \
  X(SGD_UPDATE, "sgd_update", 2) \
  X(ADAM_UPDATE, "adam_update", 2) \
  X(CONV2D_BIAS_ACT, "conv2d_bias_act", 4) \
  X(GEMM_BIAS_ACT, "gemm_bias_act", 4) \
  X(ELEMENTWISE_PROGRAM, "elementwise_program", 4) \
  X(LOG1P, "log1p", 3) \
  X(EXPM1, "expm1", 3) \
  X(SILU, "silu", 3) \
  X(SOFTPLUS, "softplus", 3) \
  X(ELU, "elu", 3) \
  X(LEAKY_RELU, "leaky_relu", 3) \
  X(HARDSWISH, "hardswish", 3) \
  X(HARDSIGMOID, "hardsigmoid", 3) \
  X(MISH, "mish", 3) \
  X(LOG_SIGMOID, "log_sigmoid", 3) \
  X(CLAMP, "clamp", 3) \
  X(ISNAN, "isnan", 3) \
  X(ISINF, "isinf", 3) \
  X(FLOOR_DIVIDE, "floor_divide", 3) \
  X(REMAINDER, "remainder", 3) \
  X(XLOGY, "xlogy", 3) \
  X(SILU_BACKWARD, "silu_backward", 3) \
  X(HARDSWISH_BACKWARD, "hardswish_backward", 3) \
  X(HARDSIGMOID_BACKWARD, "hardsigmoid_backward", 3) \
  X(MISH_BACKWARD, "mish_backward", 3) \
  X(LOG_SIGMOID_BACKWARD, "log_sigmoid_backward", 3) \
  X(LEAKY_RELU_BACKWARD, "leaky_relu_backward", 3) \
  X(SOFTPLUS_BACKWARD, "softplus_backward", 3) \
  X(ELU_BACKWARD, "elu_backward", 3)

typedef enum UD_OpId {
  UD_OP_COPY,
  UD_OP_FILL,
  UD_OP_ZERO,
  UD_OP_CAST,
  UD_OP_ARANGE,
  UD_OP_NEG,
  UD_OP_ABS,
  UD_OP_EXP,
  UD_OP_LOG,
  UD_OP_SQRT,
  UD_OP_RSQRT,
  UD_OP_RECIPROCAL,
  UD_OP_SIN,
  UD_OP_COS,
  UD_OP_TANH,
  UD_OP_SIGMOID,
  UD_OP_RELU,
  UD_OP_GELU,
  UD_OP_ERF,
  UD_OP_FLOOR,
  UD_OP_CEIL,
  UD_OP_ROUND,
  UD_OP_SIGN,
  UD_OP_SQUARE,
  UD_OP_LOGICAL_NOT,
  UD_OP_ADD,
  UD_OP_SUB,
  UD_OP_MUL,
  UD_OP_DIV,
  UD_OP_POW,
  UD_OP_MAXIMUM,
  UD_OP_MINIMUM,
  UD_OP_EQ,
  UD_OP_NE,
  UD_OP_LT,
  UD_OP_LE,
  UD_OP_GT,
  UD_OP_GE,
  UD_OP_LOGICAL_AND,
  UD_OP_LOGICAL_OR,
  UD_OP_WHERE,
  UD_OP_ADDCMUL,
  UD_OP_ADDCDIV,
  UD_OP_LERP,
  UD_OP_THRESHOLD_BACKWARD,
  UD_OP_SIGMOID_BACKWARD,
  UD_OP_TANH_BACKWARD,
  UD_OP_GELU_BACKWARD,
  UD_OP_SUM,
  UD_OP_MEAN,
  UD_OP_MAX,
  UD_OP_MIN,
  UD_OP_PROD,
  UD_OP_ARGMAX,
  UD_OP_ARGMIN,
  UD_OP_MATMUL,
  UD_OP_GEMM,
  UD_OP_CONV2D,
  UD_OP_CONV2D_BACKWARD_INPUT,
  UD_OP_CONV2D_BACKWARD_WEIGHT,
  UD_OP_MAX_POOL2D,
  UD_OP_MAX_POOL2D_BACKWARD,
  UD_OP_AVG_POOL2D,
  UD_OP_AVG_POOL2D_BACKWARD,
  UD_OP_ADAPTIVE_AVG_POOL2D,
  UD_OP_ADAPTIVE_AVG_POOL2D_BACKWARD,
  UD_OP_BATCH_NORM,
  UD_OP_BATCH_NORM_BACKWARD,
  UD_OP_SOFTMAX,
  UD_OP_LOG_SOFTMAX,
  UD_OP_SOFTMAX_BACKWARD,
  UD_OP_LOG_SOFTMAX_BACKWARD,
  UD_OP_NLL_LOSS,
  UD_OP_NLL_LOSS_BACKWARD,
  UD_OP_MSE_LOSS,
  UD_OP_MSE_LOSS_BACKWARD,
  UD_OP_CONCAT,
  UD_OP_PAD_CONSTANT,
  UD_OP_SGD_UPDATE,
  UD_OP_ADAM_UPDATE,
  UD_OP_CONV2D_BIAS_ACT,
  UD_OP_GEMM_BIAS_ACT,
  UD_OP_ELEMENTWISE_PROGRAM,
  UD_OP_LOG1P,
  UD_OP_EXPM1,
  UD_OP_SILU,
  UD_OP_SOFTPLUS,
  UD_OP_ELU,
  UD_OP_LEAKY_RELU,
  UD_OP_HARDSWISH,
  UD_OP_HARDSIGMOID,
  UD_OP_MISH,
  UD_OP_LOG_SIGMOID,
  UD_OP_CLAMP,
  UD_OP_ISNAN,
  UD_OP_ISINF,
  UD_OP_FLOOR_DIVIDE,
  UD_OP_REMAINDER,
  UD_OP_XLOGY,
  UD_OP_SILU_BACKWARD,
  UD_OP_HARDSWISH_BACKWARD,
  UD_OP_HARDSIGMOID_BACKWARD,
  UD_OP_MISH_BACKWARD,
  UD_OP_LOG_SIGMOID_BACKWARD,
  UD_OP_LEAKY_RELU_BACKWARD,
  UD_OP_SOFTPLUS_BACKWARD,
  UD_OP_ELU_BACKWARD,
  UD_OP_COUNT
} UD_OpId;

/* positions: UD_IN_<OP>_<INPUT>, UD_OUT_<OP>_<OUTPUT>, UD_ATTR_<OP>_<ATTR> (an input after a
 * variadic one would shift by its extra tensors; none does today). Plain ints, so
 * positions of different ops compare and mix in C++ without warnings. */
#define UD_IN_COPY_X  0
#define UD_OUT_COPY_Y 0

#define UD_OUT_FILL_Y      0
#define UD_ATTR_FILL_VALUE 0

#define UD_OUT_ZERO_Y 0

#define UD_IN_CAST_X       0
#define UD_OUT_CAST_Y      0
#define UD_ATTR_CAST_DTYPE 0

#define UD_OUT_ARANGE_Y      0
#define UD_ATTR_ARANGE_START 0
#define UD_ATTR_ARANGE_STOP  1
#define UD_ATTR_ARANGE_STEP  2
#define UD_ATTR_ARANGE_DTYPE 3

#define UD_IN_NEG_X  0
#define UD_OUT_NEG_Y 0

#define UD_IN_ABS_X  0
#define UD_OUT_ABS_Y 0

#define UD_IN_EXP_X  0
#define UD_OUT_EXP_Y 0

#define UD_IN_LOG_X  0
#define UD_OUT_LOG_Y 0

#define UD_IN_SQRT_X  0
#define UD_OUT_SQRT_Y 0

#define UD_IN_RSQRT_X  0
#define UD_OUT_RSQRT_Y 0

#define UD_IN_RECIPROCAL_X  0
#define UD_OUT_RECIPROCAL_Y 0

#define UD_IN_SIN_X  0
#define UD_OUT_SIN_Y 0

#define UD_IN_COS_X  0
#define UD_OUT_COS_Y 0

#define UD_IN_TANH_X  0
#define UD_OUT_TANH_Y 0

#define UD_IN_SIGMOID_X  0
#define UD_OUT_SIGMOID_Y 0

#define UD_IN_RELU_X  0
#define UD_OUT_RELU_Y 0

#define UD_IN_GELU_X             0
#define UD_OUT_GELU_Y            0
#define UD_ATTR_GELU_APPROXIMATE 0

#define UD_IN_ERF_X  0
#define UD_OUT_ERF_Y 0

#define UD_IN_FLOOR_X  0
#define UD_OUT_FLOOR_Y 0

#define UD_IN_CEIL_X  0
#define UD_OUT_CEIL_Y 0

#define UD_IN_ROUND_X  0
#define UD_OUT_ROUND_Y 0

#define UD_IN_SIGN_X  0
#define UD_OUT_SIGN_Y 0

#define UD_IN_SQUARE_X  0
#define UD_OUT_SQUARE_Y 0

#define UD_IN_LOGICAL_NOT_X    0
#define UD_OUT_LOGICAL_NOT_OUT 0

#define UD_IN_ADD_X       0
#define UD_IN_ADD_Y       1
#define UD_OUT_ADD_OUT    0
#define UD_ATTR_ADD_ALPHA 0

#define UD_IN_SUB_X       0
#define UD_IN_SUB_Y       1
#define UD_OUT_SUB_OUT    0
#define UD_ATTR_SUB_ALPHA 0

#define UD_IN_MUL_X    0
#define UD_IN_MUL_Y    1
#define UD_OUT_MUL_OUT 0

#define UD_IN_DIV_X    0
#define UD_IN_DIV_Y    1
#define UD_OUT_DIV_OUT 0

#define UD_IN_POW_X    0
#define UD_IN_POW_Y    1
#define UD_OUT_POW_OUT 0

#define UD_IN_MAXIMUM_X    0
#define UD_IN_MAXIMUM_Y    1
#define UD_OUT_MAXIMUM_OUT 0

#define UD_IN_MINIMUM_X    0
#define UD_IN_MINIMUM_Y    1
#define UD_OUT_MINIMUM_OUT 0

#define UD_IN_EQ_X    0
#define UD_IN_EQ_Y    1
#define UD_OUT_EQ_OUT 0

#define UD_IN_NE_X    0
#define UD_IN_NE_Y    1
#define UD_OUT_NE_OUT 0

#define UD_IN_LT_X    0
#define UD_IN_LT_Y    1
#define UD_OUT_LT_OUT 0

#define UD_IN_LE_X    0
#define UD_IN_LE_Y    1
#define UD_OUT_LE_OUT 0

#define UD_IN_GT_X    0
#define UD_IN_GT_Y    1
#define UD_OUT_GT_OUT 0

#define UD_IN_GE_X    0
#define UD_IN_GE_Y    1
#define UD_OUT_GE_OUT 0

#define UD_IN_LOGICAL_AND_X    0
#define UD_IN_LOGICAL_AND_Y    1
#define UD_OUT_LOGICAL_AND_OUT 0

#define UD_IN_LOGICAL_OR_X    0
#define UD_IN_LOGICAL_OR_Y    1
#define UD_OUT_LOGICAL_OR_OUT 0

#define UD_IN_WHERE_X    0
#define UD_IN_WHERE_Y    1
#define UD_IN_WHERE_COND 2
#define UD_OUT_WHERE_OUT 0

#define UD_IN_ADDCMUL_X       0
#define UD_IN_ADDCMUL_A       1
#define UD_IN_ADDCMUL_B       2
#define UD_OUT_ADDCMUL_OUT    0
#define UD_ATTR_ADDCMUL_VALUE 0

#define UD_IN_ADDCDIV_X       0
#define UD_IN_ADDCDIV_A       1
#define UD_IN_ADDCDIV_B       2
#define UD_OUT_ADDCDIV_OUT    0
#define UD_ATTR_ADDCDIV_VALUE 0

#define UD_IN_LERP_X        0
#define UD_IN_LERP_END      1
#define UD_OUT_LERP_OUT     0
#define UD_ATTR_LERP_WEIGHT 0

#define UD_IN_THRESHOLD_BACKWARD_GRAD        0
#define UD_IN_THRESHOLD_BACKWARD_X           1
#define UD_OUT_THRESHOLD_BACKWARD_GRAD_X     0
#define UD_ATTR_THRESHOLD_BACKWARD_THRESHOLD 0

#define UD_IN_SIGMOID_BACKWARD_GRAD    0
#define UD_IN_SIGMOID_BACKWARD_Y       1
#define UD_OUT_SIGMOID_BACKWARD_GRAD_X 0

#define UD_IN_TANH_BACKWARD_GRAD    0
#define UD_IN_TANH_BACKWARD_Y       1
#define UD_OUT_TANH_BACKWARD_GRAD_X 0

#define UD_IN_GELU_BACKWARD_GRAD          0
#define UD_IN_GELU_BACKWARD_X             1
#define UD_OUT_GELU_BACKWARD_GRAD_X       0
#define UD_ATTR_GELU_BACKWARD_APPROXIMATE 0

#define UD_IN_SUM_X          0
#define UD_OUT_SUM_Y         0
#define UD_ATTR_SUM_AXES     0
#define UD_ATTR_SUM_KEEPDIMS 1

#define UD_IN_MEAN_X          0
#define UD_OUT_MEAN_Y         0
#define UD_ATTR_MEAN_AXES     0
#define UD_ATTR_MEAN_KEEPDIMS 1

#define UD_IN_MAX_X          0
#define UD_OUT_MAX_Y         0
#define UD_ATTR_MAX_AXES     0
#define UD_ATTR_MAX_KEEPDIMS 1

#define UD_IN_MIN_X          0
#define UD_OUT_MIN_Y         0
#define UD_ATTR_MIN_AXES     0
#define UD_ATTR_MIN_KEEPDIMS 1

#define UD_IN_PROD_X          0
#define UD_OUT_PROD_Y         0
#define UD_ATTR_PROD_AXES     0
#define UD_ATTR_PROD_KEEPDIMS 1

#define UD_IN_ARGMAX_X          0
#define UD_OUT_ARGMAX_INDEX     0
#define UD_ATTR_ARGMAX_AXES     0
#define UD_ATTR_ARGMAX_KEEPDIMS 1

#define UD_IN_ARGMIN_X          0
#define UD_OUT_ARGMIN_INDEX     0
#define UD_ATTR_ARGMIN_AXES     0
#define UD_ATTR_ARGMIN_KEEPDIMS 1

#define UD_IN_MATMUL_A    0
#define UD_IN_MATMUL_B    1
#define UD_OUT_MATMUL_OUT 0

#define UD_IN_GEMM_A       0
#define UD_IN_GEMM_B       1
#define UD_IN_GEMM_C       2
#define UD_OUT_GEMM_OUT    0
#define UD_ATTR_GEMM_ALPHA 0
#define UD_ATTR_GEMM_BETA  1

#define UD_IN_CONV2D_X           0
#define UD_IN_CONV2D_WEIGHT      1
#define UD_IN_CONV2D_BIAS        2
#define UD_OUT_CONV2D_Y          0
#define UD_ATTR_CONV2D_STRIDE    0
#define UD_ATTR_CONV2D_PADDING   1
#define UD_ATTR_CONV2D_DILATION  2
#define UD_ATTR_CONV2D_GROUPS    3
#define UD_ATTR_CONV2D_ALGORITHM 4

#define UD_IN_CONV2D_BACKWARD_INPUT_GRAD_Y        0
#define UD_IN_CONV2D_BACKWARD_INPUT_WEIGHT        1
#define UD_OUT_CONV2D_BACKWARD_INPUT_GRAD_X       0
#define UD_ATTR_CONV2D_BACKWARD_INPUT_INPUT_SHAPE 0
#define UD_ATTR_CONV2D_BACKWARD_INPUT_STRIDE      1
#define UD_ATTR_CONV2D_BACKWARD_INPUT_PADDING     2
#define UD_ATTR_CONV2D_BACKWARD_INPUT_DILATION    3
#define UD_ATTR_CONV2D_BACKWARD_INPUT_GROUPS      4
#define UD_ATTR_CONV2D_BACKWARD_INPUT_ALGORITHM   5

#define UD_IN_CONV2D_BACKWARD_WEIGHT_GRAD_Y         0
#define UD_IN_CONV2D_BACKWARD_WEIGHT_X              1
#define UD_OUT_CONV2D_BACKWARD_WEIGHT_GRAD_W        0
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_WEIGHT_SHAPE 0
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_STRIDE       1
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_PADDING      2
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_DILATION     3
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_GROUPS       4
#define UD_ATTR_CONV2D_BACKWARD_WEIGHT_ALGORITHM    5

#define UD_IN_MAX_POOL2D_X             0
#define UD_OUT_MAX_POOL2D_Y            0
#define UD_OUT_MAX_POOL2D_INDICES      1
#define UD_ATTR_MAX_POOL2D_KERNEL_SIZE 0
#define UD_ATTR_MAX_POOL2D_STRIDE      1
#define UD_ATTR_MAX_POOL2D_PADDING     2
#define UD_ATTR_MAX_POOL2D_DILATION    3
#define UD_ATTR_MAX_POOL2D_CEIL_MODE   4

#define UD_IN_MAX_POOL2D_BACKWARD_GRAD_Y        0
#define UD_IN_MAX_POOL2D_BACKWARD_X             1
#define UD_IN_MAX_POOL2D_BACKWARD_INDICES       2
#define UD_OUT_MAX_POOL2D_BACKWARD_GRAD_X       0
#define UD_ATTR_MAX_POOL2D_BACKWARD_KERNEL_SIZE 0
#define UD_ATTR_MAX_POOL2D_BACKWARD_STRIDE      1
#define UD_ATTR_MAX_POOL2D_BACKWARD_PADDING     2
#define UD_ATTR_MAX_POOL2D_BACKWARD_DILATION    3
#define UD_ATTR_MAX_POOL2D_BACKWARD_CEIL_MODE   4

#define UD_IN_AVG_POOL2D_X                   0
#define UD_OUT_AVG_POOL2D_Y                  0
#define UD_ATTR_AVG_POOL2D_KERNEL_SIZE       0
#define UD_ATTR_AVG_POOL2D_STRIDE            1
#define UD_ATTR_AVG_POOL2D_PADDING           2
#define UD_ATTR_AVG_POOL2D_CEIL_MODE         3
#define UD_ATTR_AVG_POOL2D_COUNT_INCLUDE_PAD 4

#define UD_IN_AVG_POOL2D_BACKWARD_GRAD_Y              0
#define UD_IN_AVG_POOL2D_BACKWARD_X                   1
#define UD_OUT_AVG_POOL2D_BACKWARD_GRAD_X             0
#define UD_ATTR_AVG_POOL2D_BACKWARD_KERNEL_SIZE       0
#define UD_ATTR_AVG_POOL2D_BACKWARD_STRIDE            1
#define UD_ATTR_AVG_POOL2D_BACKWARD_PADDING           2
#define UD_ATTR_AVG_POOL2D_BACKWARD_CEIL_MODE         3
#define UD_ATTR_AVG_POOL2D_BACKWARD_COUNT_INCLUDE_PAD 4

#define UD_IN_ADAPTIVE_AVG_POOL2D_X             0
#define UD_OUT_ADAPTIVE_AVG_POOL2D_Y            0
#define UD_ATTR_ADAPTIVE_AVG_POOL2D_OUTPUT_SIZE 0

#define UD_IN_ADAPTIVE_AVG_POOL2D_BACKWARD_GRAD_Y        0
#define UD_IN_ADAPTIVE_AVG_POOL2D_BACKWARD_X             1
#define UD_OUT_ADAPTIVE_AVG_POOL2D_BACKWARD_GRAD_X       0
#define UD_ATTR_ADAPTIVE_AVG_POOL2D_BACKWARD_OUTPUT_SIZE 0

#define UD_IN_BATCH_NORM_X            0
#define UD_IN_BATCH_NORM_WEIGHT       1
#define UD_IN_BATCH_NORM_BIAS         2
#define UD_IN_BATCH_NORM_RUNNING_MEAN 3
#define UD_IN_BATCH_NORM_RUNNING_VAR  4
#define UD_OUT_BATCH_NORM_Y           0
#define UD_OUT_BATCH_NORM_SAVE_MEAN   1
#define UD_OUT_BATCH_NORM_SAVE_INVSTD 2
#define UD_ATTR_BATCH_NORM_TRAINING   0
#define UD_ATTR_BATCH_NORM_MOMENTUM   1
#define UD_ATTR_BATCH_NORM_EPS        2

#define UD_IN_BATCH_NORM_BACKWARD_GRAD_Y       0
#define UD_IN_BATCH_NORM_BACKWARD_X            1
#define UD_IN_BATCH_NORM_BACKWARD_WEIGHT       2
#define UD_IN_BATCH_NORM_BACKWARD_SAVE_MEAN    3
#define UD_IN_BATCH_NORM_BACKWARD_SAVE_INVSTD  4
#define UD_OUT_BATCH_NORM_BACKWARD_GRAD_X      0
#define UD_OUT_BATCH_NORM_BACKWARD_GRAD_WEIGHT 1
#define UD_OUT_BATCH_NORM_BACKWARD_GRAD_BIAS   2
#define UD_ATTR_BATCH_NORM_BACKWARD_TRAINING   0

#define UD_IN_SOFTMAX_X      0
#define UD_OUT_SOFTMAX_Y     0
#define UD_ATTR_SOFTMAX_AXIS 0

#define UD_IN_LOG_SOFTMAX_X      0
#define UD_OUT_LOG_SOFTMAX_Y     0
#define UD_ATTR_LOG_SOFTMAX_AXIS 0

#define UD_IN_SOFTMAX_BACKWARD_GRAD_Y  0
#define UD_IN_SOFTMAX_BACKWARD_Y       1
#define UD_OUT_SOFTMAX_BACKWARD_GRAD_X 0
#define UD_ATTR_SOFTMAX_BACKWARD_AXIS  0

#define UD_IN_LOG_SOFTMAX_BACKWARD_GRAD_Y  0
#define UD_IN_LOG_SOFTMAX_BACKWARD_Y       1
#define UD_OUT_LOG_SOFTMAX_BACKWARD_GRAD_X 0
#define UD_ATTR_LOG_SOFTMAX_BACKWARD_AXIS  0

#define UD_IN_NLL_LOSS_LOGP           0
#define UD_IN_NLL_LOSS_TARGET         1
#define UD_IN_NLL_LOSS_WEIGHT         2
#define UD_OUT_NLL_LOSS_LOSS          0
#define UD_OUT_NLL_LOSS_TOTAL_WEIGHT  1
#define UD_ATTR_NLL_LOSS_REDUCTION    0
#define UD_ATTR_NLL_LOSS_IGNORE_INDEX 1

#define UD_IN_NLL_LOSS_BACKWARD_GRAD_LOSS      0
#define UD_IN_NLL_LOSS_BACKWARD_LOGP           1
#define UD_IN_NLL_LOSS_BACKWARD_TARGET         2
#define UD_IN_NLL_LOSS_BACKWARD_WEIGHT         3
#define UD_IN_NLL_LOSS_BACKWARD_TOTAL_WEIGHT   4
#define UD_OUT_NLL_LOSS_BACKWARD_GRAD_LOGP     0
#define UD_ATTR_NLL_LOSS_BACKWARD_REDUCTION    0
#define UD_ATTR_NLL_LOSS_BACKWARD_IGNORE_INDEX 1

#define UD_IN_MSE_LOSS_X           0
#define UD_IN_MSE_LOSS_TARGET      1
#define UD_OUT_MSE_LOSS_LOSS       0
#define UD_ATTR_MSE_LOSS_REDUCTION 0

#define UD_IN_MSE_LOSS_BACKWARD_GRAD_LOSS   0
#define UD_IN_MSE_LOSS_BACKWARD_X           1
#define UD_IN_MSE_LOSS_BACKWARD_TARGET      2
#define UD_OUT_MSE_LOSS_BACKWARD_GRAD_X     0
#define UD_ATTR_MSE_LOSS_BACKWARD_REDUCTION 0

#define UD_IN_CONCAT_TENSORS 0
#define UD_OUT_CONCAT_OUT    0
#define UD_ATTR_CONCAT_AXIS  0

#define UD_IN_PAD_CONSTANT_X       0
#define UD_OUT_PAD_CONSTANT_Y      0
#define UD_ATTR_PAD_CONSTANT_PADS  0
#define UD_ATTR_PAD_CONSTANT_VALUE 1

#define UD_IN_SGD_UPDATE_PARAM            0
#define UD_IN_SGD_UPDATE_GRAD             1
#define UD_IN_SGD_UPDATE_MOMENTUM_BUFFER  2
#define UD_IN_SGD_UPDATE_GRAD_SCALE       3
#define UD_IN_SGD_UPDATE_FOUND_INF        4
#define UD_ATTR_SGD_UPDATE_LR             0
#define UD_ATTR_SGD_UPDATE_MOMENTUM       1
#define UD_ATTR_SGD_UPDATE_DAMPENING      2
#define UD_ATTR_SGD_UPDATE_WEIGHT_DECAY   3
#define UD_ATTR_SGD_UPDATE_NESTEROV       4
#define UD_ATTR_SGD_UPDATE_MAXIMIZE       5
#define UD_ATTR_SGD_UPDATE_FIRST_STEP     6
#define UD_ATTR_SGD_UPDATE_LR_IN_MOMENTUM 7

#define UD_IN_ADAM_UPDATE_PARAM             0
#define UD_IN_ADAM_UPDATE_GRAD              1
#define UD_IN_ADAM_UPDATE_EXP_AVG           2
#define UD_IN_ADAM_UPDATE_EXP_AVG_SQ        3
#define UD_IN_ADAM_UPDATE_MAX_EXP_AVG_SQ    4
#define UD_IN_ADAM_UPDATE_STATE_STEP        5
#define UD_IN_ADAM_UPDATE_GRAD_SCALE        6
#define UD_IN_ADAM_UPDATE_FOUND_INF         7
#define UD_ATTR_ADAM_UPDATE_LR              0
#define UD_ATTR_ADAM_UPDATE_BETA1           1
#define UD_ATTR_ADAM_UPDATE_BETA2           2
#define UD_ATTR_ADAM_UPDATE_EPS             3
#define UD_ATTR_ADAM_UPDATE_WEIGHT_DECAY    4
#define UD_ATTR_ADAM_UPDATE_DECOUPLED       5
#define UD_ATTR_ADAM_UPDATE_MAXIMIZE        6
#define UD_ATTR_ADAM_UPDATE_STEP            7
#define UD_ATTR_ADAM_UPDATE_BIAS_CORRECTION 8
#define UD_ATTR_ADAM_UPDATE_NESTEROV        9

#define UD_IN_CONV2D_BIAS_ACT_X            0
#define UD_IN_CONV2D_BIAS_ACT_WEIGHT       1
#define UD_IN_CONV2D_BIAS_ACT_BIAS         2
#define UD_IN_CONV2D_BIAS_ACT_RESIDUAL     3
#define UD_OUT_CONV2D_BIAS_ACT_Y           0
#define UD_ATTR_CONV2D_BIAS_ACT_STRIDE     0
#define UD_ATTR_CONV2D_BIAS_ACT_PADDING    1
#define UD_ATTR_CONV2D_BIAS_ACT_DILATION   2
#define UD_ATTR_CONV2D_BIAS_ACT_GROUPS     3
#define UD_ATTR_CONV2D_BIAS_ACT_ALGORITHM  4
#define UD_ATTR_CONV2D_BIAS_ACT_ACTIVATION 5

#define UD_IN_GEMM_BIAS_ACT_A            0
#define UD_IN_GEMM_BIAS_ACT_B            1
#define UD_IN_GEMM_BIAS_ACT_BIAS         2
#define UD_IN_GEMM_BIAS_ACT_RESIDUAL     3
#define UD_OUT_GEMM_BIAS_ACT_OUT         0
#define UD_ATTR_GEMM_BIAS_ACT_ALPHA      0
#define UD_ATTR_GEMM_BIAS_ACT_ACTIVATION 1

#define UD_IN_ELEMENTWISE_PROGRAM_XS            0
#define UD_OUT_ELEMENTWISE_PROGRAM_YS           0
#define UD_ATTR_ELEMENTWISE_PROGRAM_PROGRAM     0
#define UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE      1
#define UD_ATTR_ELEMENTWISE_PROGRAM_REDUCE_AXES 2

#define UD_IN_LOG1P_X  0
#define UD_OUT_LOG1P_Y 0

#define UD_IN_EXPM1_X  0
#define UD_OUT_EXPM1_Y 0

#define UD_IN_SILU_X  0
#define UD_OUT_SILU_Y 0

#define UD_IN_SOFTPLUS_X           0
#define UD_OUT_SOFTPLUS_Y          0
#define UD_ATTR_SOFTPLUS_BETA      0
#define UD_ATTR_SOFTPLUS_THRESHOLD 1

#define UD_IN_ELU_X             0
#define UD_OUT_ELU_Y            0
#define UD_ATTR_ELU_ALPHA       0
#define UD_ATTR_ELU_SCALE       1
#define UD_ATTR_ELU_INPUT_SCALE 2

#define UD_IN_LEAKY_RELU_X                0
#define UD_OUT_LEAKY_RELU_Y               0
#define UD_ATTR_LEAKY_RELU_NEGATIVE_SLOPE 0

#define UD_IN_HARDSWISH_X  0
#define UD_OUT_HARDSWISH_Y 0

#define UD_IN_HARDSIGMOID_X  0
#define UD_OUT_HARDSIGMOID_Y 0

#define UD_IN_MISH_X  0
#define UD_OUT_MISH_Y 0

#define UD_IN_LOG_SIGMOID_X  0
#define UD_OUT_LOG_SIGMOID_Y 0

#define UD_IN_CLAMP_X     0
#define UD_OUT_CLAMP_Y    0
#define UD_ATTR_CLAMP_MIN 0
#define UD_ATTR_CLAMP_MAX 1

#define UD_IN_ISNAN_X    0
#define UD_OUT_ISNAN_OUT 0

#define UD_IN_ISINF_X    0
#define UD_OUT_ISINF_OUT 0

#define UD_IN_FLOOR_DIVIDE_X    0
#define UD_IN_FLOOR_DIVIDE_Y    1
#define UD_OUT_FLOOR_DIVIDE_OUT 0

#define UD_IN_REMAINDER_X    0
#define UD_IN_REMAINDER_Y    1
#define UD_OUT_REMAINDER_OUT 0

#define UD_IN_XLOGY_X    0
#define UD_IN_XLOGY_Y    1
#define UD_OUT_XLOGY_OUT 0

#define UD_IN_SILU_BACKWARD_GRAD    0
#define UD_IN_SILU_BACKWARD_X       1
#define UD_OUT_SILU_BACKWARD_GRAD_X 0

#define UD_IN_HARDSWISH_BACKWARD_GRAD    0
#define UD_IN_HARDSWISH_BACKWARD_X       1
#define UD_OUT_HARDSWISH_BACKWARD_GRAD_X 0

#define UD_IN_HARDSIGMOID_BACKWARD_GRAD    0
#define UD_IN_HARDSIGMOID_BACKWARD_X       1
#define UD_OUT_HARDSIGMOID_BACKWARD_GRAD_X 0

#define UD_IN_MISH_BACKWARD_GRAD    0
#define UD_IN_MISH_BACKWARD_X       1
#define UD_OUT_MISH_BACKWARD_GRAD_X 0

#define UD_IN_LOG_SIGMOID_BACKWARD_GRAD    0
#define UD_IN_LOG_SIGMOID_BACKWARD_X       1
#define UD_OUT_LOG_SIGMOID_BACKWARD_GRAD_X 0

#define UD_IN_LEAKY_RELU_BACKWARD_GRAD             0
#define UD_IN_LEAKY_RELU_BACKWARD_X                1
#define UD_OUT_LEAKY_RELU_BACKWARD_GRAD_X          0
#define UD_ATTR_LEAKY_RELU_BACKWARD_NEGATIVE_SLOPE 0

#define UD_IN_SOFTPLUS_BACKWARD_GRAD        0
#define UD_IN_SOFTPLUS_BACKWARD_X           1
#define UD_OUT_SOFTPLUS_BACKWARD_GRAD_X     0
#define UD_ATTR_SOFTPLUS_BACKWARD_BETA      0
#define UD_ATTR_SOFTPLUS_BACKWARD_THRESHOLD 1

#define UD_IN_ELU_BACKWARD_GRAD          0
#define UD_IN_ELU_BACKWARD_X             1
#define UD_OUT_ELU_BACKWARD_GRAD_X       0
#define UD_ATTR_ELU_BACKWARD_ALPHA       0
#define UD_ATTR_ELU_BACKWARD_SCALE       1
#define UD_ATTR_ELU_BACKWARD_INPUT_SCALE 2
#define UD_ATTR_ELU_BACKWARD_IS_RESULT   3

typedef enum UD_ScalarRule {
  UD_SCALAR_NONE = 0,     /* a plain float attribute */
  UD_SCALAR_VALUE = 1,    /* a value of the op's dtype (ud_kit_check_scalar, integral 0) */
  UD_SCALAR_INTEGRAL = 2, /* the same, integral for integer dtypes */
} UD_ScalarRule;

/* One attribute of an op: its name, type and default (the field its type names). */
typedef struct UD_AttrInfo {
  const char* name;
  UD_AttrType type;
  UD_ScalarRule scalar;
  int64_t i;             /* UD_ATTR_INT */
  double f;              /* UD_ATTR_FLOAT */
  int32_t b;             /* UD_ATTR_BOOL */
  const char* s;         /* UD_ATTR_STRING */
  const int64_t* ints;   /* UD_ATTR_INTS: ints_len values (NULL when 0) */
  int32_t ints_len;
  const char* const* choices; /* allowed strings, NULL when any */
  int32_t num_choices;
} UD_AttrInfo;

/* One op's signature. A variadic input counts once in num_inputs. */
typedef struct UD_OpInfo {
  const char* name;
  int32_t tier;
  int32_t num_inputs;
  int32_t variadic_input;    /* index of the variadic input, -1 if none */
  uint32_t optional_inputs;  /* bit i: input i may be absent (ndim -1) */
  const char* const* input_names;
  int32_t num_outputs;
  const char* const* output_names;
  int32_t num_attrs;
  const UD_AttrInfo* attrs;  /* in op-set order, as kernels receive them */
  uint32_t dtypes;           /* UD_DTM_* of the op's dtypes (first input's) */
  int32_t broadcast;         /* inputs arrive pre-broadcast to the output shape */
  uint32_t mutated_inputs;   /* bit i: the kernel updates input i in place */
  int32_t variadic_output;   /* index of the variadic (last) output, -1 if none: calls
                              * pass num_outputs >= num_outputs (ABI 1.2's tier 4) */
} UD_OpInfo;

/* the signature of op `op` (a UD_OpId), NULL when out of range */
static inline const UD_OpInfo* ud_op_info(int op) {
  static const char* const ud_op_copy_in[] = {"x"};
  static const char* const ud_op_copy_out[] = {"y"};
  static const char* const ud_op_fill_out[] = {"y"};
  static const UD_AttrInfo ud_op_fill_attrs[] = {
      {"value", UD_ATTR_FLOAT, UD_SCALAR_VALUE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_zero_out[] = {"y"};
  static const char* const ud_op_cast_in[] = {"x"};
  static const char* const ud_op_cast_out[] = {"y"};
  static const UD_AttrInfo ud_op_cast_attrs[] = {
      {"dtype", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "float32", NULL, 0, NULL, 0},
  };
  static const char* const ud_op_arange_out[] = {"y"};
  static const UD_AttrInfo ud_op_arange_attrs[] = {
      {"start", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"stop", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"step", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"dtype", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "float32", NULL, 0, NULL, 0},
  };
  static const char* const ud_op_neg_in[] = {"x"};
  static const char* const ud_op_neg_out[] = {"y"};
  static const char* const ud_op_abs_in[] = {"x"};
  static const char* const ud_op_abs_out[] = {"y"};
  static const char* const ud_op_exp_in[] = {"x"};
  static const char* const ud_op_exp_out[] = {"y"};
  static const char* const ud_op_log_in[] = {"x"};
  static const char* const ud_op_log_out[] = {"y"};
  static const char* const ud_op_sqrt_in[] = {"x"};
  static const char* const ud_op_sqrt_out[] = {"y"};
  static const char* const ud_op_rsqrt_in[] = {"x"};
  static const char* const ud_op_rsqrt_out[] = {"y"};
  static const char* const ud_op_reciprocal_in[] = {"x"};
  static const char* const ud_op_reciprocal_out[] = {"y"};
  static const char* const ud_op_sin_in[] = {"x"};
  static const char* const ud_op_sin_out[] = {"y"};
  static const char* const ud_op_cos_in[] = {"x"};
  static const char* const ud_op_cos_out[] = {"y"};
  static const char* const ud_op_tanh_in[] = {"x"};
  static const char* const ud_op_tanh_out[] = {"y"};
  static const char* const ud_op_sigmoid_in[] = {"x"};
  static const char* const ud_op_sigmoid_out[] = {"y"};
  static const char* const ud_op_relu_in[] = {"x"};
  static const char* const ud_op_relu_out[] = {"y"};
  static const char* const ud_op_gelu_in[] = {"x"};
  static const char* const ud_op_gelu_out[] = {"y"};
  static const char* const ud_op_gelu_approximate_choices[] = {"none", "tanh"};
  static const UD_AttrInfo ud_op_gelu_attrs[] = {
      {"approximate", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "none", NULL, 0,
       ud_op_gelu_approximate_choices, 2},
  };
  static const char* const ud_op_erf_in[] = {"x"};
  static const char* const ud_op_erf_out[] = {"y"};
  static const char* const ud_op_floor_in[] = {"x"};
  static const char* const ud_op_floor_out[] = {"y"};
  static const char* const ud_op_ceil_in[] = {"x"};
  static const char* const ud_op_ceil_out[] = {"y"};
  static const char* const ud_op_round_in[] = {"x"};
  static const char* const ud_op_round_out[] = {"y"};
  static const char* const ud_op_sign_in[] = {"x"};
  static const char* const ud_op_sign_out[] = {"y"};
  static const char* const ud_op_square_in[] = {"x"};
  static const char* const ud_op_square_out[] = {"y"};
  static const char* const ud_op_logical_not_in[] = {"x"};
  static const char* const ud_op_logical_not_out[] = {"out"};
  static const char* const ud_op_add_in[] = {"x", "y"};
  static const char* const ud_op_add_out[] = {"out"};
  static const UD_AttrInfo ud_op_add_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_INTEGRAL, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_sub_in[] = {"x", "y"};
  static const char* const ud_op_sub_out[] = {"out"};
  static const UD_AttrInfo ud_op_sub_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_INTEGRAL, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_mul_in[] = {"x", "y"};
  static const char* const ud_op_mul_out[] = {"out"};
  static const char* const ud_op_div_in[] = {"x", "y"};
  static const char* const ud_op_div_out[] = {"out"};
  static const char* const ud_op_pow_in[] = {"x", "y"};
  static const char* const ud_op_pow_out[] = {"out"};
  static const char* const ud_op_maximum_in[] = {"x", "y"};
  static const char* const ud_op_maximum_out[] = {"out"};
  static const char* const ud_op_minimum_in[] = {"x", "y"};
  static const char* const ud_op_minimum_out[] = {"out"};
  static const char* const ud_op_eq_in[] = {"x", "y"};
  static const char* const ud_op_eq_out[] = {"out"};
  static const char* const ud_op_ne_in[] = {"x", "y"};
  static const char* const ud_op_ne_out[] = {"out"};
  static const char* const ud_op_lt_in[] = {"x", "y"};
  static const char* const ud_op_lt_out[] = {"out"};
  static const char* const ud_op_le_in[] = {"x", "y"};
  static const char* const ud_op_le_out[] = {"out"};
  static const char* const ud_op_gt_in[] = {"x", "y"};
  static const char* const ud_op_gt_out[] = {"out"};
  static const char* const ud_op_ge_in[] = {"x", "y"};
  static const char* const ud_op_ge_out[] = {"out"};
  static const char* const ud_op_logical_and_in[] = {"x", "y"};
  static const char* const ud_op_logical_and_out[] = {"out"};
  static const char* const ud_op_logical_or_in[] = {"x", "y"};
  static const char* const ud_op_logical_or_out[] = {"out"};
  static const char* const ud_op_where_in[] = {"x", "y", "cond"};
  static const char* const ud_op_where_out[] = {"out"};
  static const char* const ud_op_addcmul_in[] = {"x", "a", "b"};
  static const char* const ud_op_addcmul_out[] = {"out"};
  static const UD_AttrInfo ud_op_addcmul_attrs[] = {
      {"value", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_addcdiv_in[] = {"x", "a", "b"};
  static const char* const ud_op_addcdiv_out[] = {"out"};
  static const UD_AttrInfo ud_op_addcdiv_attrs[] = {
      {"value", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_lerp_in[] = {"x", "end"};
  static const char* const ud_op_lerp_out[] = {"out"};
  static const UD_AttrInfo ud_op_lerp_attrs[] = {
      {"weight", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.5, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_threshold_backward_in[] = {"grad", "x"};
  static const char* const ud_op_threshold_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_threshold_backward_attrs[] = {
      {"threshold", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_sigmoid_backward_in[] = {"grad", "y"};
  static const char* const ud_op_sigmoid_backward_out[] = {"grad_x"};
  static const char* const ud_op_tanh_backward_in[] = {"grad", "y"};
  static const char* const ud_op_tanh_backward_out[] = {"grad_x"};
  static const char* const ud_op_gelu_backward_in[] = {"grad", "x"};
  static const char* const ud_op_gelu_backward_out[] = {"grad_x"};
  static const char* const ud_op_gelu_backward_approximate_choices[] = {"none", "tanh"};
  static const UD_AttrInfo ud_op_gelu_backward_attrs[] = {
      {"approximate", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "none", NULL, 0,
       ud_op_gelu_backward_approximate_choices, 2},
  };
  static const char* const ud_op_sum_in[] = {"x"};
  static const char* const ud_op_sum_out[] = {"y"};
  static const UD_AttrInfo ud_op_sum_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_mean_in[] = {"x"};
  static const char* const ud_op_mean_out[] = {"y"};
  static const UD_AttrInfo ud_op_mean_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_max_in[] = {"x"};
  static const char* const ud_op_max_out[] = {"y"};
  static const UD_AttrInfo ud_op_max_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_min_in[] = {"x"};
  static const char* const ud_op_min_out[] = {"y"};
  static const UD_AttrInfo ud_op_min_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_prod_in[] = {"x"};
  static const char* const ud_op_prod_out[] = {"y"};
  static const UD_AttrInfo ud_op_prod_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_argmax_in[] = {"x"};
  static const char* const ud_op_argmax_out[] = {"index"};
  static const UD_AttrInfo ud_op_argmax_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_argmin_in[] = {"x"};
  static const char* const ud_op_argmin_out[] = {"index"};
  static const UD_AttrInfo ud_op_argmin_attrs[] = {
      {"axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"keepdims", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_matmul_in[] = {"a", "b"};
  static const char* const ud_op_matmul_out[] = {"out"};
  static const char* const ud_op_gemm_in[] = {"a", "b", "c"};
  static const char* const ud_op_gemm_out[] = {"out"};
  static const UD_AttrInfo ud_op_gemm_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"beta", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_conv2d_in[] = {"x", "weight", "bias"};
  static const char* const ud_op_conv2d_out[] = {"y"};
  static const int64_t ud_op_conv2d_stride_default[] = {1, 1};
  static const int64_t ud_op_conv2d_padding_default[] = {0, 0};
  static const int64_t ud_op_conv2d_dilation_default[] = {1, 1};
  static const UD_AttrInfo ud_op_conv2d_attrs[] = {
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_conv2d_stride_default, 2,
       NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_conv2d_padding_default, 2,
       NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_conv2d_dilation_default, 2,
       NULL, 0},
      {"groups", UD_ATTR_INT, UD_SCALAR_NONE, 1, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"algorithm", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "auto", NULL, 0, NULL, 0},
  };
  static const char* const ud_op_conv2d_backward_input_in[] = {"grad_y", "weight"};
  static const char* const ud_op_conv2d_backward_input_out[] = {"grad_x"};
  static const int64_t ud_op_conv2d_backward_input_stride_default[] = {1, 1};
  static const int64_t ud_op_conv2d_backward_input_padding_default[] = {0, 0};
  static const int64_t ud_op_conv2d_backward_input_dilation_default[] = {1, 1};
  static const UD_AttrInfo ud_op_conv2d_backward_input_attrs[] = {
      {"input_shape", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_input_stride_default, 2, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_input_padding_default, 2, NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_input_dilation_default, 2, NULL, 0},
      {"groups", UD_ATTR_INT, UD_SCALAR_NONE, 1, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"algorithm", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "auto", NULL, 0, NULL, 0},
  };
  static const char* const ud_op_conv2d_backward_weight_in[] = {"grad_y", "x"};
  static const char* const ud_op_conv2d_backward_weight_out[] = {"grad_w"};
  static const int64_t ud_op_conv2d_backward_weight_stride_default[] = {1, 1};
  static const int64_t ud_op_conv2d_backward_weight_padding_default[] = {0, 0};
  static const int64_t ud_op_conv2d_backward_weight_dilation_default[] = {1, 1};
  static const UD_AttrInfo ud_op_conv2d_backward_weight_attrs[] = {
      {"weight_shape", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_weight_stride_default, 2, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_weight_padding_default, 2, NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_backward_weight_dilation_default, 2, NULL, 0},
      {"groups", UD_ATTR_INT, UD_SCALAR_NONE, 1, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"algorithm", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "auto", NULL, 0, NULL, 0},
  };
  static const char* const ud_op_max_pool2d_in[] = {"x"};
  static const char* const ud_op_max_pool2d_out[] = {"y", "indices"};
  static const int64_t ud_op_max_pool2d_kernel_size_default[] = {2, 2};
  static const int64_t ud_op_max_pool2d_padding_default[] = {0, 0};
  static const int64_t ud_op_max_pool2d_dilation_default[] = {1, 1};
  static const UD_AttrInfo ud_op_max_pool2d_attrs[] = {
      {"kernel_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_max_pool2d_kernel_size_default, 2, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_max_pool2d_padding_default,
       2, NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_max_pool2d_dilation_default,
       2, NULL, 0},
      {"ceil_mode", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_max_pool2d_backward_in[] = {"grad_y", "x", "indices"};
  static const char* const ud_op_max_pool2d_backward_out[] = {"grad_x"};
  static const int64_t ud_op_max_pool2d_backward_kernel_size_default[] = {2, 2};
  static const int64_t ud_op_max_pool2d_backward_padding_default[] = {0, 0};
  static const int64_t ud_op_max_pool2d_backward_dilation_default[] = {1, 1};
  static const UD_AttrInfo ud_op_max_pool2d_backward_attrs[] = {
      {"kernel_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_max_pool2d_backward_kernel_size_default, 2, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_max_pool2d_backward_padding_default, 2, NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_max_pool2d_backward_dilation_default, 2, NULL, 0},
      {"ceil_mode", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_avg_pool2d_in[] = {"x"};
  static const char* const ud_op_avg_pool2d_out[] = {"y"};
  static const int64_t ud_op_avg_pool2d_kernel_size_default[] = {2, 2};
  static const int64_t ud_op_avg_pool2d_padding_default[] = {0, 0};
  static const UD_AttrInfo ud_op_avg_pool2d_attrs[] = {
      {"kernel_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_avg_pool2d_kernel_size_default, 2, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, ud_op_avg_pool2d_padding_default,
       2, NULL, 0},
      {"ceil_mode", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"count_include_pad", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 1, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_avg_pool2d_backward_in[] = {"grad_y", "x"};
  static const char* const ud_op_avg_pool2d_backward_out[] = {"grad_x"};
  static const int64_t ud_op_avg_pool2d_backward_kernel_size_default[] = {2, 2};
  static const int64_t ud_op_avg_pool2d_backward_padding_default[] = {0, 0};
  static const UD_AttrInfo ud_op_avg_pool2d_backward_attrs[] = {
      {"kernel_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_avg_pool2d_backward_kernel_size_default, 2, NULL, 0},
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_avg_pool2d_backward_padding_default, 2, NULL, 0},
      {"ceil_mode", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"count_include_pad", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 1, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_adaptive_avg_pool2d_in[] = {"x"};
  static const char* const ud_op_adaptive_avg_pool2d_out[] = {"y"};
  static const int64_t ud_op_adaptive_avg_pool2d_output_size_default[] = {1, 1};
  static const UD_AttrInfo ud_op_adaptive_avg_pool2d_attrs[] = {
      {"output_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_adaptive_avg_pool2d_output_size_default, 2, NULL, 0},
  };
  static const char* const ud_op_adaptive_avg_pool2d_backward_in[] = {"grad_y", "x"};
  static const char* const ud_op_adaptive_avg_pool2d_backward_out[] = {"grad_x"};
  static const int64_t ud_op_adaptive_avg_pool2d_backward_output_size_default[] = {1, 1};
  static const UD_AttrInfo ud_op_adaptive_avg_pool2d_backward_attrs[] = {
      {"output_size", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_adaptive_avg_pool2d_backward_output_size_default, 2, NULL, 0},
  };
  static const char* const ud_op_batch_norm_in[] = {"x", "weight", "bias", "running_mean",
      "running_var"};
  static const char* const ud_op_batch_norm_out[] = {"y", "save_mean", "save_invstd"};
  static const UD_AttrInfo ud_op_batch_norm_attrs[] = {
      {"training", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 1, NULL, NULL, 0, NULL, 0},
      {"momentum", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.1, 0, NULL, NULL, 0, NULL, 0},
      {"eps", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1e-05, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_batch_norm_backward_in[] = {"grad_y", "x", "weight", "save_mean",
      "save_invstd"};
  static const char* const ud_op_batch_norm_backward_out[] = {"grad_x", "grad_weight", "grad_bias"};
  static const UD_AttrInfo ud_op_batch_norm_backward_attrs[] = {
      {"training", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 1, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_softmax_in[] = {"x"};
  static const char* const ud_op_softmax_out[] = {"y"};
  static const UD_AttrInfo ud_op_softmax_attrs[] = {
      {"axis", UD_ATTR_INT, UD_SCALAR_NONE, -1, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_log_softmax_in[] = {"x"};
  static const char* const ud_op_log_softmax_out[] = {"y"};
  static const UD_AttrInfo ud_op_log_softmax_attrs[] = {
      {"axis", UD_ATTR_INT, UD_SCALAR_NONE, -1, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_softmax_backward_in[] = {"grad_y", "y"};
  static const char* const ud_op_softmax_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_softmax_backward_attrs[] = {
      {"axis", UD_ATTR_INT, UD_SCALAR_NONE, -1, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_log_softmax_backward_in[] = {"grad_y", "y"};
  static const char* const ud_op_log_softmax_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_log_softmax_backward_attrs[] = {
      {"axis", UD_ATTR_INT, UD_SCALAR_NONE, -1, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_nll_loss_in[] = {"logp", "target", "weight"};
  static const char* const ud_op_nll_loss_out[] = {"loss", "total_weight"};
  static const char* const ud_op_nll_loss_reduction_choices[] = {"none", "mean", "sum"};
  static const UD_AttrInfo ud_op_nll_loss_attrs[] = {
      {"reduction", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "mean", NULL, 0,
       ud_op_nll_loss_reduction_choices, 3},
      {"ignore_index", UD_ATTR_INT, UD_SCALAR_NONE, -100, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_nll_loss_backward_in[] = {"grad_loss", "logp", "target", "weight",
      "total_weight"};
  static const char* const ud_op_nll_loss_backward_out[] = {"grad_logp"};
  static const char* const ud_op_nll_loss_backward_reduction_choices[] = {"none", "mean", "sum"};
  static const UD_AttrInfo ud_op_nll_loss_backward_attrs[] = {
      {"reduction", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "mean", NULL, 0,
       ud_op_nll_loss_backward_reduction_choices, 3},
      {"ignore_index", UD_ATTR_INT, UD_SCALAR_NONE, -100, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_mse_loss_in[] = {"x", "target"};
  static const char* const ud_op_mse_loss_out[] = {"loss"};
  static const char* const ud_op_mse_loss_reduction_choices[] = {"none", "mean", "sum"};
  static const UD_AttrInfo ud_op_mse_loss_attrs[] = {
      {"reduction", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "mean", NULL, 0,
       ud_op_mse_loss_reduction_choices, 3},
  };
  static const char* const ud_op_mse_loss_backward_in[] = {"grad_loss", "x", "target"};
  static const char* const ud_op_mse_loss_backward_out[] = {"grad_x"};
  static const char* const ud_op_mse_loss_backward_reduction_choices[] = {"none", "mean", "sum"};
  static const UD_AttrInfo ud_op_mse_loss_backward_attrs[] = {
      {"reduction", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "mean", NULL, 0,
       ud_op_mse_loss_backward_reduction_choices, 3},
  };
  static const char* const ud_op_concat_in[] = {"tensors"};
  static const char* const ud_op_concat_out[] = {"out"};
  static const UD_AttrInfo ud_op_concat_attrs[] = {
      {"axis", UD_ATTR_INT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_pad_constant_in[] = {"x"};
  static const char* const ud_op_pad_constant_out[] = {"y"};
  static const UD_AttrInfo ud_op_pad_constant_attrs[] = {
      {"pads", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"value", UD_ATTR_FLOAT, UD_SCALAR_VALUE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_sgd_update_in[] = {"param", "grad", "momentum_buffer",
      "grad_scale", "found_inf"};
  static const UD_AttrInfo ud_op_sgd_update_attrs[] = {
      {"lr", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.001, 0, NULL, NULL, 0, NULL, 0},
      {"momentum", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"dampening", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"weight_decay", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"nesterov", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"maximize", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"first_step", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"lr_in_momentum", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_adam_update_in[] = {"param", "grad", "exp_avg", "exp_avg_sq",
      "max_exp_avg_sq", "state_step", "grad_scale", "found_inf"};
  static const UD_AttrInfo ud_op_adam_update_attrs[] = {
      {"lr", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.001, 0, NULL, NULL, 0, NULL, 0},
      {"beta1", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.9, 0, NULL, NULL, 0, NULL, 0},
      {"beta2", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.999, 0, NULL, NULL, 0, NULL, 0},
      {"eps", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1e-08, 0, NULL, NULL, 0, NULL, 0},
      {"weight_decay", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"decoupled", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"maximize", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"step", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"bias_correction", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 1, NULL, NULL, 0, NULL, 0},
      {"nesterov", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_conv2d_bias_act_in[] = {"x", "weight", "bias", "residual"};
  static const char* const ud_op_conv2d_bias_act_out[] = {"y"};
  static const int64_t ud_op_conv2d_bias_act_stride_default[] = {1, 1};
  static const int64_t ud_op_conv2d_bias_act_padding_default[] = {0, 0};
  static const int64_t ud_op_conv2d_bias_act_dilation_default[] = {1, 1};
  static const char* const ud_op_conv2d_bias_act_activation_choices[] = {"none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"};
  static const UD_AttrInfo ud_op_conv2d_bias_act_attrs[] = {
      {"stride", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_bias_act_stride_default, 2, NULL, 0},
      {"padding", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_bias_act_padding_default, 2, NULL, 0},
      {"dilation", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL,
       ud_op_conv2d_bias_act_dilation_default, 2, NULL, 0},
      {"groups", UD_ATTR_INT, UD_SCALAR_NONE, 1, 0.0, 0, NULL, NULL, 0, NULL, 0},
      {"algorithm", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "auto", NULL, 0, NULL, 0},
      {"activation", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "none", NULL, 0,
       ud_op_conv2d_bias_act_activation_choices, 7},
  };
  static const char* const ud_op_gemm_bias_act_in[] = {"a", "b", "bias", "residual"};
  static const char* const ud_op_gemm_bias_act_out[] = {"out"};
  static const char* const ud_op_gemm_bias_act_activation_choices[] = {"none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"};
  static const UD_AttrInfo ud_op_gemm_bias_act_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"activation", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "none", NULL, 0,
       ud_op_gemm_bias_act_activation_choices, 7},
  };
  static const char* const ud_op_elementwise_program_in[] = {"xs"};
  static const char* const ud_op_elementwise_program_out[] = {"ys"};
  static const char* const ud_op_elementwise_program_reduce_choices[] = {"none", "sum", "mean", "max", "min"};
  static const UD_AttrInfo ud_op_elementwise_program_attrs[] = {
      {"program", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "", NULL, 0, NULL, 0},
      {"reduce", UD_ATTR_STRING, UD_SCALAR_NONE, 0, 0.0, 0, "none", NULL, 0,
       ud_op_elementwise_program_reduce_choices, 5},
      {"reduce_axes", UD_ATTR_INTS, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_log1p_in[] = {"x"};
  static const char* const ud_op_log1p_out[] = {"y"};
  static const char* const ud_op_expm1_in[] = {"x"};
  static const char* const ud_op_expm1_out[] = {"y"};
  static const char* const ud_op_silu_in[] = {"x"};
  static const char* const ud_op_silu_out[] = {"y"};
  static const char* const ud_op_softplus_in[] = {"x"};
  static const char* const ud_op_softplus_out[] = {"y"};
  static const UD_AttrInfo ud_op_softplus_attrs[] = {
      {"beta", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"threshold", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 20.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_elu_in[] = {"x"};
  static const char* const ud_op_elu_out[] = {"y"};
  static const UD_AttrInfo ud_op_elu_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"scale", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"input_scale", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_leaky_relu_in[] = {"x"};
  static const char* const ud_op_leaky_relu_out[] = {"y"};
  static const UD_AttrInfo ud_op_leaky_relu_attrs[] = {
      {"negative_slope", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.01, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_hardswish_in[] = {"x"};
  static const char* const ud_op_hardswish_out[] = {"y"};
  static const char* const ud_op_hardsigmoid_in[] = {"x"};
  static const char* const ud_op_hardsigmoid_out[] = {"y"};
  static const char* const ud_op_mish_in[] = {"x"};
  static const char* const ud_op_mish_out[] = {"y"};
  static const char* const ud_op_log_sigmoid_in[] = {"x"};
  static const char* const ud_op_log_sigmoid_out[] = {"y"};
  static const char* const ud_op_clamp_in[] = {"x"};
  static const char* const ud_op_clamp_out[] = {"y"};
  static const UD_AttrInfo ud_op_clamp_attrs[] = {
      {"min", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, -__builtin_inf(), 0, NULL, NULL, 0, NULL, 0},
      {"max", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, __builtin_inf(), 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_isnan_in[] = {"x"};
  static const char* const ud_op_isnan_out[] = {"out"};
  static const char* const ud_op_isinf_in[] = {"x"};
  static const char* const ud_op_isinf_out[] = {"out"};
  static const char* const ud_op_floor_divide_in[] = {"x", "y"};
  static const char* const ud_op_floor_divide_out[] = {"out"};
  static const char* const ud_op_remainder_in[] = {"x", "y"};
  static const char* const ud_op_remainder_out[] = {"out"};
  static const char* const ud_op_xlogy_in[] = {"x", "y"};
  static const char* const ud_op_xlogy_out[] = {"out"};
  static const char* const ud_op_silu_backward_in[] = {"grad", "x"};
  static const char* const ud_op_silu_backward_out[] = {"grad_x"};
  static const char* const ud_op_hardswish_backward_in[] = {"grad", "x"};
  static const char* const ud_op_hardswish_backward_out[] = {"grad_x"};
  static const char* const ud_op_hardsigmoid_backward_in[] = {"grad", "x"};
  static const char* const ud_op_hardsigmoid_backward_out[] = {"grad_x"};
  static const char* const ud_op_mish_backward_in[] = {"grad", "x"};
  static const char* const ud_op_mish_backward_out[] = {"grad_x"};
  static const char* const ud_op_log_sigmoid_backward_in[] = {"grad", "x"};
  static const char* const ud_op_log_sigmoid_backward_out[] = {"grad_x"};
  static const char* const ud_op_leaky_relu_backward_in[] = {"grad", "x"};
  static const char* const ud_op_leaky_relu_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_leaky_relu_backward_attrs[] = {
      {"negative_slope", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 0.01, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_softplus_backward_in[] = {"grad", "x"};
  static const char* const ud_op_softplus_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_softplus_backward_attrs[] = {
      {"beta", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"threshold", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 20.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const char* const ud_op_elu_backward_in[] = {"grad", "x"};
  static const char* const ud_op_elu_backward_out[] = {"grad_x"};
  static const UD_AttrInfo ud_op_elu_backward_attrs[] = {
      {"alpha", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"scale", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"input_scale", UD_ATTR_FLOAT, UD_SCALAR_NONE, 0, 1.0, 0, NULL, NULL, 0, NULL, 0},
      {"is_result", UD_ATTR_BOOL, UD_SCALAR_NONE, 0, 0.0, 0, NULL, NULL, 0, NULL, 0},
  };
  static const UD_OpInfo table[UD_OP_COUNT] = {
      {"copy", 0, 1, -1, 0x0u, ud_op_copy_in, 1, ud_op_copy_out, 0, NULL, UD_DTM_ALL, 1, 0x0u, -1},
      {"fill", 0, 0, -1, 0x0u, NULL, 1, ud_op_fill_out, 1, ud_op_fill_attrs, UD_DTM_ALL, 0, 0x0u,
       -1},
      {"zero", 0, 0, -1, 0x0u, NULL, 1, ud_op_zero_out, 0, NULL, UD_DTM_ALL, 0, 0x0u, -1},
      {"cast", 0, 1, -1, 0x0u, ud_op_cast_in, 1, ud_op_cast_out, 1, ud_op_cast_attrs, UD_DTM_ALL, 1,
       0x0u, -1},
      {"arange", 0, 0, -1, 0x0u, NULL, 1, ud_op_arange_out, 4, ud_op_arange_attrs, UD_DTM_NUMERIC,
       0, 0x0u, -1},
      {"neg", 1, 1, -1, 0x0u, ud_op_neg_in, 1, ud_op_neg_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"abs", 1, 1, -1, 0x0u, ud_op_abs_in, 1, ud_op_abs_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"exp", 1, 1, -1, 0x0u, ud_op_exp_in, 1, ud_op_exp_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"log", 1, 1, -1, 0x0u, ud_op_log_in, 1, ud_op_log_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"sqrt", 1, 1, -1, 0x0u, ud_op_sqrt_in, 1, ud_op_sqrt_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"rsqrt", 1, 1, -1, 0x0u, ud_op_rsqrt_in, 1, ud_op_rsqrt_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"reciprocal", 1, 1, -1, 0x0u, ud_op_reciprocal_in, 1, ud_op_reciprocal_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"sin", 1, 1, -1, 0x0u, ud_op_sin_in, 1, ud_op_sin_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"cos", 1, 1, -1, 0x0u, ud_op_cos_in, 1, ud_op_cos_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"tanh", 1, 1, -1, 0x0u, ud_op_tanh_in, 1, ud_op_tanh_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"sigmoid", 1, 1, -1, 0x0u, ud_op_sigmoid_in, 1, ud_op_sigmoid_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"relu", 1, 1, -1, 0x0u, ud_op_relu_in, 1, ud_op_relu_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u,
       -1},
      {"gelu", 1, 1, -1, 0x0u, ud_op_gelu_in, 1, ud_op_gelu_out, 1, ud_op_gelu_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"erf", 1, 1, -1, 0x0u, ud_op_erf_in, 1, ud_op_erf_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"floor", 1, 1, -1, 0x0u, ud_op_floor_in, 1, ud_op_floor_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"ceil", 1, 1, -1, 0x0u, ud_op_ceil_in, 1, ud_op_ceil_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"round", 1, 1, -1, 0x0u, ud_op_round_in, 1, ud_op_round_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"sign", 1, 1, -1, 0x0u, ud_op_sign_in, 1, ud_op_sign_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u,
       -1},
      {"square", 1, 1, -1, 0x0u, ud_op_square_in, 1, ud_op_square_out, 0, NULL, UD_DTM_NUMERIC, 1,
       0x0u, -1},
      {"logical_not", 1, 1, -1, 0x0u, ud_op_logical_not_in, 1, ud_op_logical_not_out, 0, NULL,
       UD_DTM_ALL, 1, 0x0u, -1},
      {"add", 1, 2, -1, 0x0u, ud_op_add_in, 1, ud_op_add_out, 1, ud_op_add_attrs, UD_DTM_NUMERIC, 1,
       0x0u, -1},
      {"sub", 1, 2, -1, 0x0u, ud_op_sub_in, 1, ud_op_sub_out, 1, ud_op_sub_attrs, UD_DTM_NUMERIC, 1,
       0x0u, -1},
      {"mul", 1, 2, -1, 0x0u, ud_op_mul_in, 1, ud_op_mul_out, 0, NULL, UD_DTM_ALL, 1, 0x0u, -1},
      {"div", 1, 2, -1, 0x0u, ud_op_div_in, 1, ud_op_div_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"pow", 1, 2, -1, 0x0u, ud_op_pow_in, 1, ud_op_pow_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"maximum", 1, 2, -1, 0x0u, ud_op_maximum_in, 1, ud_op_maximum_out, 0, NULL, UD_DTM_NUMERIC,
       1, 0x0u, -1},
      {"minimum", 1, 2, -1, 0x0u, ud_op_minimum_in, 1, ud_op_minimum_out, 0, NULL, UD_DTM_NUMERIC,
       1, 0x0u, -1},
      {"eq", 1, 2, -1, 0x0u, ud_op_eq_in, 1, ud_op_eq_out, 0, NULL, UD_DTM_ALL, 1, 0x0u, -1},
      {"ne", 1, 2, -1, 0x0u, ud_op_ne_in, 1, ud_op_ne_out, 0, NULL, UD_DTM_ALL, 1, 0x0u, -1},
      {"lt", 1, 2, -1, 0x0u, ud_op_lt_in, 1, ud_op_lt_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"le", 1, 2, -1, 0x0u, ud_op_le_in, 1, ud_op_le_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"gt", 1, 2, -1, 0x0u, ud_op_gt_in, 1, ud_op_gt_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"ge", 1, 2, -1, 0x0u, ud_op_ge_in, 1, ud_op_ge_out, 0, NULL, UD_DTM_NUMERIC, 1, 0x0u, -1},
      {"logical_and", 1, 2, -1, 0x0u, ud_op_logical_and_in, 1, ud_op_logical_and_out, 0, NULL,
       UD_DTM_ALL, 1, 0x0u, -1},
      {"logical_or", 1, 2, -1, 0x0u, ud_op_logical_or_in, 1, ud_op_logical_or_out, 0, NULL,
       UD_DTM_ALL, 1, 0x0u, -1},
      {"where", 1, 3, -1, 0x0u, ud_op_where_in, 1, ud_op_where_out, 0, NULL, UD_DTM_ALL, 1, 0x0u,
       -1},
      {"addcmul", 1, 3, -1, 0x0u, ud_op_addcmul_in, 1, ud_op_addcmul_out, 1, ud_op_addcmul_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"addcdiv", 1, 3, -1, 0x0u, ud_op_addcdiv_in, 1, ud_op_addcdiv_out, 1, ud_op_addcdiv_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"lerp", 1, 2, -1, 0x0u, ud_op_lerp_in, 1, ud_op_lerp_out, 1, ud_op_lerp_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"threshold_backward", 1, 2, -1, 0x0u, ud_op_threshold_backward_in, 1,
       ud_op_threshold_backward_out, 1, ud_op_threshold_backward_attrs, UD_DTM_NUMERIC, 1, 0x0u,
       -1},
      {"sigmoid_backward", 1, 2, -1, 0x0u, ud_op_sigmoid_backward_in, 1, ud_op_sigmoid_backward_out,
       0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"tanh_backward", 1, 2, -1, 0x0u, ud_op_tanh_backward_in, 1, ud_op_tanh_backward_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"gelu_backward", 1, 2, -1, 0x0u, ud_op_gelu_backward_in, 1, ud_op_gelu_backward_out, 1,
       ud_op_gelu_backward_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"sum", 1, 1, -1, 0x0u, ud_op_sum_in, 1, ud_op_sum_out, 2, ud_op_sum_attrs, UD_DTM_NUMERIC, 0,
       0x0u, -1},
      {"mean", 1, 1, -1, 0x0u, ud_op_mean_in, 1, ud_op_mean_out, 2, ud_op_mean_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"max", 1, 1, -1, 0x0u, ud_op_max_in, 1, ud_op_max_out, 2, ud_op_max_attrs, UD_DTM_NUMERIC, 0,
       0x0u, -1},
      {"min", 1, 1, -1, 0x0u, ud_op_min_in, 1, ud_op_min_out, 2, ud_op_min_attrs, UD_DTM_NUMERIC, 0,
       0x0u, -1},
      {"prod", 1, 1, -1, 0x0u, ud_op_prod_in, 1, ud_op_prod_out, 2, ud_op_prod_attrs,
       UD_DTM_NUMERIC, 0, 0x0u, -1},
      {"argmax", 1, 1, -1, 0x0u, ud_op_argmax_in, 1, ud_op_argmax_out, 2, ud_op_argmax_attrs,
       UD_DTM_NUMERIC, 0, 0x0u, -1},
      {"argmin", 1, 1, -1, 0x0u, ud_op_argmin_in, 1, ud_op_argmin_out, 2, ud_op_argmin_attrs,
       UD_DTM_NUMERIC, 0, 0x0u, -1},
      {"matmul", 1, 2, -1, 0x0u, ud_op_matmul_in, 1, ud_op_matmul_out, 0, NULL, UD_DTM_FLOAT_GROUP,
       0, 0x0u, -1},
      {"gemm", 1, 3, -1, 0x4u, ud_op_gemm_in, 1, ud_op_gemm_out, 2, ud_op_gemm_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"conv2d", 2, 3, -1, 0x4u, ud_op_conv2d_in, 1, ud_op_conv2d_out, 5, ud_op_conv2d_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"conv2d_backward_input", 2, 2, -1, 0x0u, ud_op_conv2d_backward_input_in, 1,
       ud_op_conv2d_backward_input_out, 6, ud_op_conv2d_backward_input_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"conv2d_backward_weight", 2, 2, -1, 0x0u, ud_op_conv2d_backward_weight_in, 1,
       ud_op_conv2d_backward_weight_out, 6, ud_op_conv2d_backward_weight_attrs, UD_DTM_FLOAT_GROUP,
       0, 0x0u, -1},
      {"max_pool2d", 2, 1, -1, 0x0u, ud_op_max_pool2d_in, 2, ud_op_max_pool2d_out, 5,
       ud_op_max_pool2d_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"max_pool2d_backward", 2, 3, -1, 0x0u, ud_op_max_pool2d_backward_in, 1,
       ud_op_max_pool2d_backward_out, 5, ud_op_max_pool2d_backward_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"avg_pool2d", 2, 1, -1, 0x0u, ud_op_avg_pool2d_in, 1, ud_op_avg_pool2d_out, 5,
       ud_op_avg_pool2d_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"avg_pool2d_backward", 2, 2, -1, 0x0u, ud_op_avg_pool2d_backward_in, 1,
       ud_op_avg_pool2d_backward_out, 5, ud_op_avg_pool2d_backward_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"adaptive_avg_pool2d", 2, 1, -1, 0x0u, ud_op_adaptive_avg_pool2d_in, 1,
       ud_op_adaptive_avg_pool2d_out, 1, ud_op_adaptive_avg_pool2d_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"adaptive_avg_pool2d_backward", 2, 2, -1, 0x0u, ud_op_adaptive_avg_pool2d_backward_in, 1,
       ud_op_adaptive_avg_pool2d_backward_out, 1, ud_op_adaptive_avg_pool2d_backward_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"batch_norm", 2, 5, -1, 0x1eu, ud_op_batch_norm_in, 3, ud_op_batch_norm_out, 3,
       ud_op_batch_norm_attrs, UD_DTM_FLOAT_GROUP, 0, 0x18u, -1},
      {"batch_norm_backward", 2, 5, -1, 0x4u, ud_op_batch_norm_backward_in, 3,
       ud_op_batch_norm_backward_out, 1, ud_op_batch_norm_backward_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"softmax", 2, 1, -1, 0x0u, ud_op_softmax_in, 1, ud_op_softmax_out, 1, ud_op_softmax_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"log_softmax", 2, 1, -1, 0x0u, ud_op_log_softmax_in, 1, ud_op_log_softmax_out, 1,
       ud_op_log_softmax_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"softmax_backward", 2, 2, -1, 0x0u, ud_op_softmax_backward_in, 1, ud_op_softmax_backward_out,
       1, ud_op_softmax_backward_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"log_softmax_backward", 2, 2, -1, 0x0u, ud_op_log_softmax_backward_in, 1,
       ud_op_log_softmax_backward_out, 1, ud_op_log_softmax_backward_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, -1},
      {"nll_loss", 2, 3, -1, 0x4u, ud_op_nll_loss_in, 2, ud_op_nll_loss_out, 2,
       ud_op_nll_loss_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"nll_loss_backward", 2, 5, -1, 0x8u, ud_op_nll_loss_backward_in, 1,
       ud_op_nll_loss_backward_out, 2, ud_op_nll_loss_backward_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u,
       -1},
      {"mse_loss", 2, 2, -1, 0x0u, ud_op_mse_loss_in, 1, ud_op_mse_loss_out, 1,
       ud_op_mse_loss_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"mse_loss_backward", 2, 3, -1, 0x0u, ud_op_mse_loss_backward_in, 1,
       ud_op_mse_loss_backward_out, 1, ud_op_mse_loss_backward_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u,
       -1},
      {"concat", 2, 1, 0, 0x0u, ud_op_concat_in, 1, ud_op_concat_out, 1, ud_op_concat_attrs,
       UD_DTM_ALL, 0, 0x0u, -1},
      {"pad_constant", 2, 1, -1, 0x0u, ud_op_pad_constant_in, 1, ud_op_pad_constant_out, 2,
       ud_op_pad_constant_attrs, UD_DTM_ALL, 0, 0x0u, -1},
      {"sgd_update", 2, 5, -1, 0x1cu, ud_op_sgd_update_in, 0, NULL, 8, ud_op_sgd_update_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x7u, -1},
      {"adam_update", 2, 8, -1, 0xf0u, ud_op_adam_update_in, 0, NULL, 10, ud_op_adam_update_attrs,
       UD_DTM_FLOAT_GROUP, 0, 0x1fu, -1},
      {"conv2d_bias_act", 4, 4, -1, 0xcu, ud_op_conv2d_bias_act_in, 1, ud_op_conv2d_bias_act_out, 6,
       ud_op_conv2d_bias_act_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"gemm_bias_act", 4, 4, -1, 0xcu, ud_op_gemm_bias_act_in, 1, ud_op_gemm_bias_act_out, 2,
       ud_op_gemm_bias_act_attrs, UD_DTM_FLOAT_GROUP, 0, 0x0u, -1},
      {"elementwise_program", 4, 1, 0, 0x0u, ud_op_elementwise_program_in, 1,
       ud_op_elementwise_program_out, 3, ud_op_elementwise_program_attrs, UD_DTM_FLOAT_GROUP, 0,
       0x0u, 0},
      {"log1p", 3, 1, -1, 0x0u, ud_op_log1p_in, 1, ud_op_log1p_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"expm1", 3, 1, -1, 0x0u, ud_op_expm1_in, 1, ud_op_expm1_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"silu", 3, 1, -1, 0x0u, ud_op_silu_in, 1, ud_op_silu_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"softplus", 3, 1, -1, 0x0u, ud_op_softplus_in, 1, ud_op_softplus_out, 2,
       ud_op_softplus_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"elu", 3, 1, -1, 0x0u, ud_op_elu_in, 1, ud_op_elu_out, 3, ud_op_elu_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"leaky_relu", 3, 1, -1, 0x0u, ud_op_leaky_relu_in, 1, ud_op_leaky_relu_out, 1,
       ud_op_leaky_relu_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"hardswish", 3, 1, -1, 0x0u, ud_op_hardswish_in, 1, ud_op_hardswish_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"hardsigmoid", 3, 1, -1, 0x0u, ud_op_hardsigmoid_in, 1, ud_op_hardsigmoid_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"mish", 3, 1, -1, 0x0u, ud_op_mish_in, 1, ud_op_mish_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"log_sigmoid", 3, 1, -1, 0x0u, ud_op_log_sigmoid_in, 1, ud_op_log_sigmoid_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"clamp", 3, 1, -1, 0x0u, ud_op_clamp_in, 1, ud_op_clamp_out, 2, ud_op_clamp_attrs,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"isnan", 3, 1, -1, 0x0u, ud_op_isnan_in, 1, ud_op_isnan_out, 0, NULL, UD_DTM_ALL, 1, 0x0u,
       -1},
      {"isinf", 3, 1, -1, 0x0u, ud_op_isinf_in, 1, ud_op_isinf_out, 0, NULL, UD_DTM_ALL, 1, 0x0u,
       -1},
      {"floor_divide", 3, 2, -1, 0x0u, ud_op_floor_divide_in, 1, ud_op_floor_divide_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"remainder", 3, 2, -1, 0x0u, ud_op_remainder_in, 1, ud_op_remainder_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"xlogy", 3, 2, -1, 0x0u, ud_op_xlogy_in, 1, ud_op_xlogy_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"silu_backward", 3, 2, -1, 0x0u, ud_op_silu_backward_in, 1, ud_op_silu_backward_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"hardswish_backward", 3, 2, -1, 0x0u, ud_op_hardswish_backward_in, 1,
       ud_op_hardswish_backward_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"hardsigmoid_backward", 3, 2, -1, 0x0u, ud_op_hardsigmoid_backward_in, 1,
       ud_op_hardsigmoid_backward_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"mish_backward", 3, 2, -1, 0x0u, ud_op_mish_backward_in, 1, ud_op_mish_backward_out, 0, NULL,
       UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"log_sigmoid_backward", 3, 2, -1, 0x0u, ud_op_log_sigmoid_backward_in, 1,
       ud_op_log_sigmoid_backward_out, 0, NULL, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
      {"leaky_relu_backward", 3, 2, -1, 0x0u, ud_op_leaky_relu_backward_in, 1,
       ud_op_leaky_relu_backward_out, 1, ud_op_leaky_relu_backward_attrs, UD_DTM_FLOAT_GROUP, 1,
       0x0u, -1},
      {"softplus_backward", 3, 2, -1, 0x0u, ud_op_softplus_backward_in, 1,
       ud_op_softplus_backward_out, 2, ud_op_softplus_backward_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u,
       -1},
      {"elu_backward", 3, 2, -1, 0x0u, ud_op_elu_backward_in, 1, ud_op_elu_backward_out, 4,
       ud_op_elu_backward_attrs, UD_DTM_FLOAT_GROUP, 1, 0x0u, -1},
  };
  return op >= 0 && op < UD_OP_COUNT ? &table[op] : NULL;
}

/* the UD_OpId of op `name`, -1 if unknown (or NULL) */
static inline int ud_op_id(const char* name) {
  if (!name) return -1;
  for (int i = 0; i < UD_OP_COUNT; i++)
    if (strcmp(name, ud_op_info(i)->name) == 0) return i;
  return -1;
}

/* an attribute holding its op-set default, as a kernel receives it when the caller
 * sets nothing (both adapters start every call from these) */
static inline UD_Attr ud_attr_default(const UD_AttrInfo* info) {
  UD_Attr a;
  memset(&a, 0, sizeof a);
  a.name = info->name;
  a.type = info->type;
  switch (info->type) {
    case UD_ATTR_INT: a.value.i = info->i; break;
    case UD_ATTR_FLOAT: a.value.f = info->f; break;
    case UD_ATTR_BOOL: a.value.b = info->b; break;
    case UD_ATTR_STRING: a.value.s = info->s; break;
    case UD_ATTR_INTS:
      a.value.ints.data = info->ints;
      a.value.ints.len = info->ints_len;
      break;
  }
  return a;
}

/* ---- tier 4: activations -------------------------------------------------------------------
 * conv2d_bias_act's and gemm_bias_act's `activation` values, in op-set order. */
#define UD_ACTIVATIONS(X) \
  X(NONE, "none") \
  X(RELU, "relu") \
  X(GELU, "gelu") \
  X(GELU_TANH, "gelu_tanh") \
  X(SIGMOID, "sigmoid") \
  X(TANH, "tanh") \
  X(SILU, "silu")

typedef enum UD_ActivationId {
  UD_ACT_NONE,
  UD_ACT_RELU,
  UD_ACT_GELU,
  UD_ACT_GELU_TANH,
  UD_ACT_SIGMOID,
  UD_ACT_TANH,
  UD_ACT_SILU,
  UD_ACT_COUNT
} UD_ActivationId;

/* the id of `name`, -1 if unknown (or NULL) */
static inline int ud_activation_id(const char* name) {
  static const char* const names[] = {"none", "relu", "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"};
  if (!name) return -1;
  for (int i = 0; i < UD_ACT_COUNT; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

/* ---- tier 4: reductions --------------------------------------------------------------------
 * elementwise_program's `reduce` values, in op-set order. */
#define UD_REDUCTIONS(X) \
  X(NONE, "none") \
  X(SUM, "sum") \
  X(MEAN, "mean") \
  X(MAX, "max") \
  X(MIN, "min")

typedef enum UD_ReductionId {
  UD_RED_NONE,
  UD_RED_SUM,
  UD_RED_MEAN,
  UD_RED_MAX,
  UD_RED_MIN,
  UD_RED_COUNT
} UD_ReductionId;

/* the id of `name`, -1 if unknown (or NULL) */
static inline int ud_reduction_id(const char* name) {
  static const char* const names[] = {"none", "sum", "mean", "max", "min"};
  if (!name) return -1;
  for (int i = 0; i < UD_RED_COUNT; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

/* ---- tier 4: elementwise_program operators ------------------------------------------------
 * X(ID, "token", arity) in unidev.contract.opset.PROGRAM_OPS order; the program grammar
 * and its limits: opset.py's elementwise_program and plugin_kit.h's ud_kit_program_parse. */
#define UD_PROGRAM_OPS(X) \
  X(NEG, "neg", 1) \
  X(ABS, "abs", 1) \
  X(EXP, "exp", 1) \
  X(LOG, "log", 1) \
  X(SQRT, "sqrt", 1) \
  X(RSQRT, "rsqrt", 1) \
  X(RECIPROCAL, "reciprocal", 1) \
  X(SIN, "sin", 1) \
  X(COS, "cos", 1) \
  X(TANH, "tanh", 1) \
  X(SIGMOID, "sigmoid", 1) \
  X(RELU, "relu", 1) \
  X(GELU, "gelu", 1) \
  X(GELU_TANH, "gelu_tanh", 1) \
  X(SILU, "silu", 1) \
  X(ERF, "erf", 1) \
  X(FLOOR, "floor", 1) \
  X(CEIL, "ceil", 1) \
  X(ROUND, "round", 1) \
  X(SIGN, "sign", 1) \
  X(SQUARE, "square", 1) \
  X(ADD, "add", 2) \
  X(SUB, "sub", 2) \
  X(MUL, "mul", 2) \
  X(DIV, "div", 2) \
  X(POW, "pow", 2) \
  X(MAXIMUM, "maximum", 2) \
  X(MINIMUM, "minimum", 2) \
  X(EQ, "eq", 2) \
  X(NE, "ne", 2) \
  X(LT, "lt", 2) \
  X(LE, "le", 2) \
  X(GT, "gt", 2) \
  X(GE, "ge", 2) \
  X(WHERE, "where", 3)

typedef enum UD_ProgramOpId {
  UD_PROG_NEG,
  UD_PROG_ABS,
  UD_PROG_EXP,
  UD_PROG_LOG,
  UD_PROG_SQRT,
  UD_PROG_RSQRT,
  UD_PROG_RECIPROCAL,
  UD_PROG_SIN,
  UD_PROG_COS,
  UD_PROG_TANH,
  UD_PROG_SIGMOID,
  UD_PROG_RELU,
  UD_PROG_GELU,
  UD_PROG_GELU_TANH,
  UD_PROG_SILU,
  UD_PROG_ERF,
  UD_PROG_FLOOR,
  UD_PROG_CEIL,
  UD_PROG_ROUND,
  UD_PROG_SIGN,
  UD_PROG_SQUARE,
  UD_PROG_ADD,
  UD_PROG_SUB,
  UD_PROG_MUL,
  UD_PROG_DIV,
  UD_PROG_POW,
  UD_PROG_MAXIMUM,
  UD_PROG_MINIMUM,
  UD_PROG_EQ,
  UD_PROG_NE,
  UD_PROG_LT,
  UD_PROG_LE,
  UD_PROG_GT,
  UD_PROG_GE,
  UD_PROG_WHERE,
  UD_PROG_COUNT
} UD_ProgramOpId;

#define UD_PROGRAM_MAX_TOKENS 1024
#define UD_PROGRAM_MAX_STACK 64
#define UD_PROGRAM_MAX_REGISTERS 16
#define UD_PROGRAM_MAX_INPUTS 64
#define UD_PROGRAM_MAX_OUTPUTS 16

/* the UD_ProgramOpId of the `len` characters at `token`, -1 if none */
static inline int ud_program_op_id(const char* token, size_t len) {
  static const char* const names[] = {
#define UD_X_(ID, NAME, ARITY) NAME,
      UD_PROGRAM_OPS(UD_X_)
#undef UD_X_
  };
  for (int i = 0; i < UD_PROG_COUNT; i++)
    if (strlen(names[i]) == len && memcmp(names[i], token, len) == 0) return i;
  return -1;
}

static inline const char* ud_program_op_name(int op) {
  static const char* const names[] = {
#define UD_X_(ID, NAME, ARITY) NAME,
      UD_PROGRAM_OPS(UD_X_)
#undef UD_X_
  };
  return op >= 0 && op < UD_PROG_COUNT ? names[op] : "unknown";
}

/* operands the operator pops (it pushes one result); 0 when out of range */
static inline int ud_program_op_arity(int op) {
  static const int arity[] = {
#define UD_X_(ID, NAME, ARITY) ARITY,
      UD_PROGRAM_OPS(UD_X_)
#undef UD_X_
  };
  return op >= 0 && op < UD_PROG_COUNT ? arity[op] : 0;
}

/* ---- error codes -> Python exception kinds (unidev/contract/errors.py) --------------------
 * VALUE: ValueError, INDEX: IndexError, NOT_IMPLEMENTED: NotImplementedError,
 * MEMORY: MemoryError (torch.OutOfMemoryError), RUNTIME: RuntimeError. */
#define UD_ERROR_KINDS(X) \
  X(UD_ERR_INVALID_ARGUMENT, VALUE) \
  X(UD_ERR_OUT_OF_MEMORY, MEMORY) \
  X(UD_ERR_OUT_OF_BOUNDS, INDEX) \
  X(UD_ERR_UNKNOWN_HANDLE, VALUE) \
  X(UD_ERR_UNSUPPORTED, NOT_IMPLEMENTED) \
  X(UD_ERR_NOT_READY, RUNTIME) \
  X(UD_ERR_DEVICE, RUNTIME) \
  X(UD_ERR_INTERNAL, RUNTIME)

typedef enum UD_ErrorKind {
  UD_KIND_VALUE,
  UD_KIND_INDEX,
  UD_KIND_NOT_IMPLEMENTED,
  UD_KIND_MEMORY,
  UD_KIND_RUNTIME,
} UD_ErrorKind;

/* the exception kind of `code`; UD_KIND_RUNTIME for a code the table lacks */
static inline int ud_error_kind(UD_ErrorCode code) {
  switch ((int)code) {
#define UD_X_(CODE, KIND) \
  case CODE:                  \
    return UD_KIND_##KIND;
    UD_ERROR_KINDS(UD_X_)
#undef UD_X_
    default:
      return UD_KIND_RUNTIME;
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UNIDEV_OPS_H_ */
