/* cuda_plugin.h — what the plugin's translation units share: which launcher serves each op, the
 * argument checks (plain C++, no CUDA, so they build and unit-test without a GPU) and the launch
 * entry points the CUDA files implement. Op signatures and dtypes come from ops.h. */
#ifndef UNIDEV_CUDA_PLUGIN_H_
#define UNIDEV_CUDA_PLUGIN_H_

#include <unidev/plugin_kit.h>
#include <unidev/unidev.h>

#include <cstdint>

namespace udc {

/* Ops that share one checker and one launcher. */
enum Family {
  F_COPY, F_CAST, F_FILL, F_ARANGE, F_EW, F_REDUCE, F_ARG, F_MATMUL, F_GEMM, F_CONV, F_CONV_BI,
  F_CONV_BW, F_MAXPOOL, F_MAXPOOL_B, F_AVGPOOL, F_AVGPOOL_B, F_ADAPT, F_ADAPT_B, F_BN, F_BN_B,
  F_SOFTMAX, F_SOFTMAX_B, F_NLL, F_NLL_B, F_MSE, F_MSE_B, F_CONCAT, F_PAD, F_OPTIM,
  F_PROGRAM, F_CONV_ACT, F_GEMM_ACT, /* tier 4 */
  F_COUNT
};

/* Elementwise and reduction kernel codes (OpInfo::code within F_EW / F_REDUCE / F_ARG / ...). */
enum EwCode {
  E_NEG, E_ABS, E_EXP, E_LOG, E_SQRT, E_RSQRT, E_RECIP, E_SIN, E_COS, E_TANH, E_SIGMOID, E_RELU,
  E_GELU, E_ERF, E_FLOOR, E_CEIL, E_ROUND, E_SIGN, E_SQUARE, E_NOT,
  E_ADD, E_SUB, E_MUL, E_DIV, E_POW, E_MAX, E_MIN, E_EQ, E_NE, E_LT, E_LE, E_GT, E_GE, E_AND, E_OR,
  E_WHERE, E_ADDCMUL, E_ADDCDIV, E_LERP, E_THRESH_B, E_SIGMOID_B, E_TANH_B, E_GELU_B,
  /* tier 3: unary (E_LOG1P..E_ISINF), then binary */
  E_LOG1P, E_EXPM1, E_SILU, E_SOFTPLUS, E_ELU, E_LEAKY_RELU, E_HARDSWISH, E_HARDSIGMOID, E_MISH,
  E_LOG_SIGMOID, E_CLAMP, E_ISNAN, E_ISINF, E_FLOOR_DIVIDE, E_REMAINDER, E_XLOGY, E_SILU_B,
  E_HARDSWISH_B, E_HARDSIGMOID_B, E_MISH_B, E_LOG_SIGMOID_B, E_LEAKY_RELU_B, E_SOFTPLUS_B, E_ELU_B
};
enum ReduceCode { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ARGMAX, R_ARGMIN };
enum SoftmaxCode { S_SOFTMAX, S_LOG_SOFTMAX };

/* UD_DTM_* bit of a dtype (ops.h ids); 0 for one that is not a unidev dtype */
inline unsigned dtype_bit(UD_DType d) { return ud_dtype_id(d) < 0 ? 0u : 1u << ud_dtype_id(d); }
/* the dtypes cuBLAS / cuDNN ops take beyond the op set's: half precision */
constexpr unsigned DT_HALF = UD_DTM_FLOAT16 | UD_DTM_BFLOAT16, DT_DENSE = UD_DTM_FLOAT_GROUP | DT_HALF;

constexpr unsigned kKnownDtypes = UD_DTM_ALL | DT_HALF; /* every dtype some kernel takes */

/* Attribute positions one launcher reads for several ops: ops.h's, asserted equal across them. */
#define UDC_SAME2(A, B, ATTR) (UD_ATTR_##A##_##ATTR == UD_ATTR_##B##_##ATTR)
constexpr int kReduceAxes = UD_ATTR_SUM_AXES, kReduceKeepdims = UD_ATTR_SUM_KEEPDIMS;
static_assert(UDC_SAME2(SUM, MEAN, AXES) && UDC_SAME2(SUM, MAX, AXES) && UDC_SAME2(SUM, MIN, AXES) &&
              UDC_SAME2(SUM, PROD, AXES) && UDC_SAME2(SUM, ARGMAX, AXES) && UDC_SAME2(SUM, ARGMIN, AXES) &&
              UDC_SAME2(SUM, MEAN, KEEPDIMS) && UDC_SAME2(SUM, MAX, KEEPDIMS) && UDC_SAME2(SUM, MIN, KEEPDIMS) &&
              UDC_SAME2(SUM, PROD, KEEPDIMS) && UDC_SAME2(SUM, ARGMAX, KEEPDIMS) &&
              UDC_SAME2(SUM, ARGMIN, KEEPDIMS), "reductions");
constexpr int kSoftmaxAxis = UD_ATTR_SOFTMAX_AXIS;
static_assert(UDC_SAME2(SOFTMAX, LOG_SOFTMAX, AXIS) && UDC_SAME2(SOFTMAX, SOFTMAX_BACKWARD, AXIS) &&
              UDC_SAME2(SOFTMAX, LOG_SOFTMAX_BACKWARD, AXIS), "softmax");
constexpr int kLossReduction = UD_ATTR_NLL_LOSS_REDUCTION, kNllIgnore = UD_ATTR_NLL_LOSS_IGNORE_INDEX;
static_assert(UDC_SAME2(NLL_LOSS, NLL_LOSS_BACKWARD, REDUCTION) && UDC_SAME2(NLL_LOSS, MSE_LOSS, REDUCTION) &&
              UDC_SAME2(NLL_LOSS, MSE_LOSS_BACKWARD, REDUCTION) &&
              UDC_SAME2(NLL_LOSS, NLL_LOSS_BACKWARD, IGNORE_INDEX), "losses");
/* pooling: kernel_size, stride, padding lead in all four; the rest per kind (max or avg) */
constexpr int kPoolKernelSize = UD_ATTR_MAX_POOL2D_KERNEL_SIZE, kPoolStride = UD_ATTR_MAX_POOL2D_STRIDE,
              kPoolPadding = UD_ATTR_MAX_POOL2D_PADDING, kAdaptiveSize = UD_ATTR_ADAPTIVE_AVG_POOL2D_OUTPUT_SIZE;
#define UDC_POOL(B) (UDC_SAME2(MAX_POOL2D, B, KERNEL_SIZE) && UDC_SAME2(MAX_POOL2D, B, STRIDE) && \
                     UDC_SAME2(MAX_POOL2D, B, PADDING))
static_assert(UDC_POOL(MAX_POOL2D_BACKWARD) && UDC_POOL(AVG_POOL2D) && UDC_POOL(AVG_POOL2D_BACKWARD) &&
              UDC_SAME2(MAX_POOL2D, MAX_POOL2D_BACKWARD, DILATION) &&
              UDC_SAME2(MAX_POOL2D, MAX_POOL2D_BACKWARD, CEIL_MODE) &&
              UDC_SAME2(AVG_POOL2D, AVG_POOL2D_BACKWARD, CEIL_MODE) &&
              UDC_SAME2(AVG_POOL2D, AVG_POOL2D_BACKWARD, COUNT_INCLUDE_PAD) &&
              UDC_SAME2(ADAPTIVE_AVG_POOL2D, ADAPTIVE_AVG_POOL2D_BACKWARD, OUTPUT_SIZE), "pooling");
/* conv: the backward ops lead with the shape they produce; stride..algorithm follow in a run
 * that starts at conv_first(family), offsets kConv* */
constexpr int kConvShape = UD_ATTR_CONV2D_BACKWARD_INPUT_INPUT_SHAPE, kConvStride = 0, kConvPadding = 1,
              kConvDilation = 2, kConvGroups = 3, kConvAlgorithm = 4;
#define UDC_CONV(OP) (UD_ATTR_##OP##_PADDING == UD_ATTR_##OP##_STRIDE + kConvPadding && \
                      UD_ATTR_##OP##_DILATION == UD_ATTR_##OP##_STRIDE + kConvDilation && \
                      UD_ATTR_##OP##_GROUPS == UD_ATTR_##OP##_STRIDE + kConvGroups && \
                      UD_ATTR_##OP##_ALGORITHM == UD_ATTR_##OP##_STRIDE + kConvAlgorithm)
static_assert(UDC_CONV(CONV2D) && UDC_CONV(CONV2D_BACKWARD_INPUT) && UDC_CONV(CONV2D_BACKWARD_WEIGHT) &&
              UDC_CONV(CONV2D_BIAS_ACT) && kConvShape == UD_ATTR_CONV2D_BACKWARD_WEIGHT_WEIGHT_SHAPE,
              "conv");
/* conv2d_bias_act is conv2d with a residual input and an activation attribute appended */
static_assert(UD_IN_CONV2D_BIAS_ACT_BIAS == UD_IN_CONV2D_BIAS && UD_ATTR_CONV2D_BIAS_ACT_STRIDE == 0 &&
              UD_ATTR_CONV2D_STRIDE == 0, "conv2d_bias_act");

/* One op as this plugin runs it: its UD_OpId and name (ops.h), its launcher family and kernel
 * code, and the dtypes of its first input (first output for no-input ops) it has kernels for:
 * the op set's, plus half precision for the dense ops. */
struct OpInfo {
  const char* name;
  int id;
  Family family;
  int code;
  unsigned dtypes;
};

const OpInfo& op_at(int id); /* a UD_OpId */
const OpInfo* op_find(const char* name);

/* Every check that needs no device: the op set's signature (ud_kit_check_signature), then
 * dtypes, attribute values and shapes. */
UD_Error* check_args(const OpInfo& op, const UD_KernelArgs* a);

/* ---- helpers shared by the checker and the launchers ----------------------------------------- */

struct Pair { int64_t h, w; };
/* a 1- or 2-element ints attribute as (h, w); false when it has another length */
bool attr_pair(const UD_Attr& a, Pair* out);

struct ConvGeom {
  int64_t N, C, H, W, K, R, S, OH, OW, groups;
  Pair stride, pad, dil;
};
struct PoolGeom {
  int64_t N, C, H, W, OH, OW;
  Pair k, stride, pad, dil;
  bool ceil_mode, count_include_pad;
};
inline bool conv_forward(Family f) { return f == F_CONV || f == F_CONV_ACT; }
inline int conv_first(Family f) {
  return conv_forward(f) ? UD_ATTR_CONV2D_STRIDE
         : f == F_CONV_BI ? UD_ATTR_CONV2D_BACKWARD_INPUT_STRIDE : UD_ATTR_CONV2D_BACKWARD_WEIGHT_STRIDE;
}
/* Geometry from x's shape, the weight shape and the attrs starting at conv_first (stride...). */
UD_Error* conv_geometry(const char* op, const int64_t* x, const int64_t* w, const UD_Attr* attrs,
                        ConvGeom* g);
UD_Error* pool_geometry(const char* op, const int64_t* x, const UD_Attr* attrs, bool has_dilation,
                        PoolGeom* g);
int64_t pool_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);
/* Normalized reduction axes as a bit mask; empty attr means every axis. */
UD_Error* reduce_mask(const char* op, const UD_Attr& axes, int ndim, uint32_t* mask);
int norm_axis(int64_t axis, int ndim); /* -1 if out of range */

}  // namespace udc

/* ---- the CUDA side (runtime.cpp, kernels.cu, dense.cu); `stream` is a cudaStream_t ---------- */

namespace udc {
using LaunchFn = UD_Error* (*)(const OpInfo& op, const UD_KernelArgs* a, void* stream);

UD_Error* launch_copy(const OpInfo&, const UD_KernelArgs*, void*);    /* copy, cast */
UD_Error* launch_fill(const OpInfo&, const UD_KernelArgs*, void*);    /* fill, zero, arange */
UD_Error* launch_ew(const OpInfo&, const UD_KernelArgs*, void*);
UD_Error* launch_reduce(const OpInfo&, const UD_KernelArgs*, void*);  /* incl. argmax/argmin */
UD_Error* launch_pool(const OpInfo&, const UD_KernelArgs*, void*);    /* every pooling op */
UD_Error* launch_bn(const OpInfo&, const UD_KernelArgs*, void*);
UD_Error* launch_softmax(const OpInfo&, const UD_KernelArgs*, void*);
UD_Error* launch_loss(const OpInfo&, const UD_KernelArgs*, void*);    /* nll, mse (+ backward) */
UD_Error* launch_concat(const OpInfo&, const UD_KernelArgs*, void*);
UD_Error* launch_pad(const OpInfo&, const UD_KernelArgs*, void*);
UD_Error* launch_matmul(const OpInfo&, const UD_KernelArgs*, void*);  /* matmul, gemm */
UD_Error* launch_conv(const OpInfo&, const UD_KernelArgs*, void*);    /* conv2d (+ backward) */
UD_Error* launch_optim(const OpInfo&, const UD_KernelArgs*, void*);   /* sgd/adam_update (optim.cu) */
UD_Error* launch_program(const OpInfo&, const UD_KernelArgs*, void*); /* elementwise_program (fused.cu) */
/* The fused ops' epilogue in place over y (dense or strided): y = act(y + bias[c] + residual)
 * with c = (linear index / inner) % bias length; bias and residual may be absent (ndim -1). */
UD_Error* launch_epilogue(const UD_Tensor& y, const UD_Tensor& bias, const UD_Tensor& residual,
                          int64_t inner, int activation, void* stream);
/* kernel_compile (ABI 1.2): validates an elementwise_program; no specialization to return */
UD_Error* kernel_compile(const char* op, UD_DType dtype, const UD_Attr* attrs, int32_t num_attrs,
                         UD_KernelFn* kernel);

/* memset of 1-, 2-, 4- or 8-byte elements */
UD_Error* launch_memset(void* dst, uint64_t pattern, uint32_t elem_size, uint64_t count,
                        void* stream);
/* y = x for one dtype size, any strides (used to make contiguous scratch copies) */
UD_Error* strided_copy(const UD_Tensor& x, const UD_Tensor& y, void* stream);

/* Errors found while kernels run (a target out of range) land in host-mapped memory and are
 * reported by the next synchronizing call. */
struct DeviceFault {
  int32_t code; /* 0: none; else 1 + the op's UD_OpId */
  int32_t pad;
  int64_t value, limit;
};
DeviceFault* device_fault_slot(int device); /* device-visible pointer */

/* CUDA error → UD_Error with CUDA's name and message; NULL for cudaSuccess */
UD_Error* cuda_error(int status, const char* what);
/* Handles are device pointers (below 2^48 on every 64-bit CUDA platform) with an allocation
 * generation in the top 16 bits, so a freed handle whose memory the pool reused is refused. */
constexpr uint64_t kAddrMask = (1ull << 48) - 1;
inline char* address(UD_Handle h) { return (char*)(uintptr_t)(h & kAddrMask); }
/* Device pointer of a tensor's element [0, ...] */
inline char* data_ptr(const UD_Tensor& t) { return address(t.handle) + t.byte_offset; }
}  // namespace udc

#endif /* UNIDEV_CUDA_PLUGIN_H_ */
