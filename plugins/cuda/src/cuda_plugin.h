/* cuda_plugin.h — what the plugin's translation units share: the op table and argument checks
 * (plain C++, no CUDA, so they build and unit-test without a GPU) and the launch entry points
 * the CUDA files implement. */
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
  F_SOFTMAX, F_SOFTMAX_B, F_NLL, F_NLL_B, F_MSE, F_MSE_B, F_CONCAT, F_PAD, F_COUNT
};

/* Elementwise and reduction op codes (OpInfo::code within F_EW / F_REDUCE / F_ARG / ...). */
enum EwCode {
  E_NEG, E_ABS, E_EXP, E_LOG, E_SQRT, E_RSQRT, E_RECIP, E_SIN, E_COS, E_TANH, E_SIGMOID, E_RELU,
  E_GELU, E_ERF, E_FLOOR, E_CEIL, E_ROUND, E_SIGN, E_SQUARE, E_NOT,
  E_ADD, E_SUB, E_MUL, E_DIV, E_POW, E_MAX, E_MIN, E_EQ, E_NE, E_LT, E_LE, E_GT, E_GE, E_AND, E_OR,
  E_WHERE, E_ADDCMUL, E_ADDCDIV, E_LERP, E_THRESH_B, E_SIGMOID_B, E_TANH_B, E_GELU_B
};
enum ReduceCode { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ARGMAX, R_ARGMIN };
enum SoftmaxCode { S_SOFTMAX, S_LOG_SOFTMAX };

/* dtype bits */
constexpr unsigned DT_F32 = 1, DT_F64 = 2, DT_I32 = 4, DT_I64 = 8, DT_BOOL = 16, DT_F16 = 32,
                   DT_BF16 = 64, DT_FLOAT = DT_F32 | DT_F64, DT_INT = DT_I32 | DT_I64,
                   DT_NUMERIC = DT_FLOAT | DT_INT, DT_ALL = DT_NUMERIC | DT_BOOL,
                   DT_DENSE = DT_FLOAT | DT_F16 | DT_BF16;

/* One op. `attrs` spells the attribute types in op-set order: i int, f float, b bool, s str,
 * I ints. `dtypes` are the dtypes of the first input (first output for no-input ops). */
struct OpInfo {
  const char* name;
  Family family;
  int code;
  int num_inputs;  /* -1: variadic */
  int num_outputs;
  const char* attrs;
  unsigned dtypes;
};

int op_count();
const OpInfo& op_at(int index);
const OpInfo* op_find(const char* name);
unsigned dtype_bit(UD_DType d);              /* 0 for a dtype the plugin does not know */
bool dtype_from_name(const char* name, UD_DType* out);

/* Every check that needs no device: counts, attribute types and values, dtypes, shapes. */
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
/* Geometry from x's shape, the weight shape and the attrs starting at `first` (stride...). */
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

/* memset of 1-, 2-, 4- or 8-byte elements */
UD_Error* launch_memset(void* dst, uint64_t pattern, uint32_t elem_size, uint64_t count,
                        void* stream);
/* y = x for one dtype size, any strides (used to make contiguous scratch copies) */
UD_Error* strided_copy(const UD_Tensor& x, const UD_Tensor& y, void* stream);

/* Errors found while kernels run (a target out of range) land in host-mapped memory and are
 * reported by the next synchronizing call. */
struct DeviceFault {
  int32_t code; /* 0: none; else 1 + op index */
  int32_t pad;
  int64_t value, limit;
};
DeviceFault* device_fault_slot(int device); /* device-visible pointer */
int op_index(const OpInfo& op);

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
