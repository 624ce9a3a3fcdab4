/* fused.cu — tier 4: elementwise_program (an interpreter of the parsed program, one thread per
 * output element, templated over float/double) and the fused conv/gemm epilogue (bias, residual,
 * activation) that dense.cu runs after cuDNN/cuBLAS. The operators' scalar semantics are the
 * kit's (program_kit.h, host and device), so this file defines none of its own. */
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "device.cuh"

namespace udc {
namespace {

/* ---- elementwise_program ------------------------------------------------------------------ */

constexpr int kProgTensors = UD_PROGRAM_MAX_INPUTS + UD_PROGRAM_MAX_OUTPUTS;

/* One call as the device reads it (uploaded per call, only its used prefix): the shape S, the
 * reduction, and each tensor's base and strides (elements; outputs index S's leading dims). */
struct ProgCall {
  int nd, keep, n_in, n_out, reduce, pad;
  int64_t shape[kMaxDims];
  int64_t cells, count; /* output elements; elements reduced into each (1 without reduce) */
  struct View {
    char* base;
    int64_t st[kMaxDims];
  } t[kProgTensors]; /* inputs, then outputs */
};

template <class T>
__device__ __forceinline__ T prog_op(int op, T a, T b, T c) {
  if constexpr (std::is_same_v<T, double>) return ud_kit_program_op_f64(op, a, b, c);
  else return ud_kit_program_op_f32(op, a, b, c);
}

__device__ __forceinline__ int prog_arity(int op) { /* ops.h's table, as a device switch */
  switch (op) {
#define UDC_ARITY_(ID, NAME, ARITY) case UD_PROG_##ID: return ARITY;
    UD_PROGRAM_OPS(UDC_ARITY_)
#undef UDC_ARITY_
    default: return 1;
  }
}

/* The program at one element: in[k] input values, out[k] results. */
template <class T>
__device__ void prog_eval(const UD_KitProgram* p, const T* in, T* out) {
  T stack[UD_PROGRAM_MAX_STACK + 1], regs[UD_PROGRAM_MAX_REGISTERS];
  int top = 0;
  for (int i = 0; i < p->num_instrs; i++) {
    const UD_KitInstr ins = p->instrs[i];
    switch (ins.kind) {
      case UD_KIT_PI_INPUT: stack[top++] = in[ins.arg]; break;
      case UD_KIT_PI_CONST: stack[top++] = (T)ins.value; break;
      case UD_KIT_PI_STORE: regs[ins.arg] = stack[--top]; break;
      case UD_KIT_PI_LOAD: stack[top++] = regs[ins.arg]; break;
      case UD_KIT_PI_OUTPUT: out[ins.arg] = stack[--top]; break;
      default: {
        const int n = prog_arity(ins.arg);
        const T a = stack[top - n], b = n > 1 ? stack[top - n + 1] : T(0),
                c = n > 2 ? stack[top - n + 2] : T(0);
        top -= n;
        stack[top++] = prog_op<T>(ins.arg, a, b, c);
      }
    }
  }
}

/* Offsets (elements) of logical index i of S (dims [0, nd)) in tensors [t0, t1). */
__device__ __forceinline__ void prog_offsets(const ProgCall* c, int nd, int64_t i, int t0, int t1,
                                             int64_t* off) {
  for (int t = t0; t < t1; t++) off[t] = 0;
  for (int d = nd - 1; d >= 0; d--) {
    const int64_t q = i / c->shape[d], r = i - q * c->shape[d];
    for (int t = t0; t < t1; t++) off[t] += r * c->t[t].st[d];
    i = q;
  }
}

/* One thread per output element (cell); with a reduction it walks the cell's `count` elements
 * of S in order, accumulating in double (max/min in the dtype, nan propagating). */
template <class T>
__global__ void k_program(const ProgCall* c, const UD_KitProgram* p) {
  const int ni = c->n_in, no = c->n_out;
  UDC_GRID_LOOP(cell, c->cells) {
    int64_t off[kProgTensors];
    T in[UD_PROGRAM_MAX_INPUTS], out[UD_PROGRAM_MAX_OUTPUTS];
    double acc[UD_PROGRAM_MAX_OUTPUTS];
    for (int k = 0; k < no; k++)
      acc[k] = c->reduce == UD_RED_MAX ? -INFINITY : c->reduce == UD_RED_MIN ? INFINITY : 0.0;
    for (int64_t j = 0; j < c->count; j++) {
      prog_offsets(c, c->nd, cell * c->count + j, 0, ni, off);
      for (int t = 0; t < ni; t++) in[t] = ((const T*)c->t[t].base)[off[t]];
      prog_eval<T>(p, in, out);
      for (int k = 0; k < no; k++) {
        const double v = (double)out[k];
        if (c->reduce == UD_RED_NONE || c->reduce == UD_RED_SUM || c->reduce == UD_RED_MEAN)
          acc[k] += v;
        else if (v != v || acc[k] != acc[k]) acc[k] = NAN;
        else if (c->reduce == UD_RED_MAX ? v > acc[k] : v < acc[k]) acc[k] = v;
      }
    }
    prog_offsets(c, c->keep, cell, ni, ni + no, off);
    for (int k = 0; k < no; k++) {
      double v = acc[k];
      if (c->reduce == UD_RED_MEAN) v /= (double)c->count; /* 0 / 0 is nan for an empty axis */
      ((T*)c->t[ni + k].base)[off[ni + k]] = (T)v;
    }
  }
}

/* ---- the fused ops' epilogue ------------------------------------------------------------- */

template <class T>
__device__ __forceinline__ T activation(int act, T v) {
  if constexpr (std::is_same_v<T, double>) return ud_kit_activation_f64(act, v);
  else return ud_kit_activation_f32(act, v);
}

template <class T>
__global__ void k_epilogue(Strided<2> s, const char* bias, int64_t bias_st, int64_t inner,
                           int64_t channels, bool residual, int act) {
  UDC_GRID_LOOP(i, s.numel) {
    int64_t off[2];
    s.offsets(i, off);
    T v = ld<T>(s.base[0] + off[0]);
    if (bias) v += ((const T*)bias)[(i / inner) % channels * bias_st];
    if (residual) v += ld<T>(s.base[1] + off[1]);
    st<T>(s.base[0] + off[0], activation<T>(act, v));
  }
}

}  // namespace

UD_Error* launch_epilogue(const UD_Tensor& y, const UD_Tensor& bias, const UD_Tensor& residual,
                          int64_t inner, int act, void* stream) {
  const bool has_res = ud_kit_present(&residual);
  const UD_Tensor* ts[2] = {&y, has_res ? &residual : &y};
  Strided<2> s = strided_of<2>(ts);
  if (!s.numel) return nullptr;
  const bool has_bias = ud_kit_present(&bias);
  const char* bp = has_bias ? data_ptr(bias) : nullptr;
  const int64_t bst = has_bias && bias.ndim == 1 ? bias.strides[0] : 0;
  const int64_t channels = has_bias && bias.ndim == 1 && bias.shape[0] > 0 ? bias.shape[0] : 1;
  cudaStream_t cs = (cudaStream_t)stream;
  return by_dtype<UD_DTM_FLOAT_GROUP>(y.dtype, "epilogue", [&](auto t) {
    k_epilogue<decltype(t)><<<blocks_for(s.numel), kThreads, 0, cs>>>(s, bp, bst, inner, channels,
                                                                       has_res, act);
    return launched("fused epilogue");
  });
}

UD_Error* launch_program(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  int reduce = 0, reduced = 0;
  /* host copies of the program and the call, uploaded together (pageable memory: the copy has
   * read them when cudaMemcpyAsync returns, so they may go right after) */
  const size_t call_bytes = sizeof(ProgCall), prog_bytes = sizeof(UD_KitProgram);
  char* host = (char*)malloc(call_bytes + prog_bytes);
  if (!host) return ud_kit_host_oom_error();
  ProgCall* c = (ProgCall*)host;
  UD_KitProgram* p = (UD_KitProgram*)(host + call_bytes);
  UD_Error* e = ud_kit_program_check_call(a, p, &reduce, &reduced);
  const UD_Tensor& x0 = a->inputs[0];
  if (!e) {
    memset(c, 0, offsetof(ProgCall, t));
    c->nd = x0.ndim, c->keep = x0.ndim - reduced, c->n_in = a->num_inputs;
    c->n_out = a->num_outputs, c->reduce = reduce;
    c->cells = c->count = 1;
    for (int d = 0; d < x0.ndim; d++) {
      c->shape[d] = x0.shape[d];
      (d < c->keep ? c->cells : c->count) *= x0.shape[d];
    }
    for (int t = 0; t < c->n_in + c->n_out; t++) {
      const UD_Tensor& v = t < c->n_in ? a->inputs[t] : a->outputs[t - c->n_in];
      c->t[t].base = data_ptr(v);
      for (int d = 0; d < v.ndim; d++) c->t[t].st[d] = v.strides[d];
    }
  }
  if (!e && c->cells > 0) {
    /* only the used prefixes travel: the views in use, the instructions in use */
    const size_t cb = offsetof(ProgCall, t) + sizeof(ProgCall::View) * (c->n_in + c->n_out);
    const size_t pb = offsetof(UD_KitProgram, instrs) + sizeof(UD_KitInstr) * p->num_instrs;
    Scratch dev(s);
    e = dev.alloc(call_bytes + prog_bytes);
    if (!e) e = cuda_error(cudaMemcpyAsync(dev.p, c, cb, cudaMemcpyHostToDevice, s), op.name);
    if (!e)
      e = cuda_error(cudaMemcpyAsync((char*)dev.p + call_bytes, p, pb, cudaMemcpyHostToDevice, s),
                     op.name);
    if (!e) {
      const ProgCall* dc = (const ProgCall*)dev.p;
      const UD_KitProgram* dp = (const UD_KitProgram*)((char*)dev.p + call_bytes);
      const int64_t cells = c->cells;
      e = by_dtype<UD_DTM_FLOAT_GROUP>(x0.dtype, op.name, [&](auto t) {
        k_program<decltype(t)><<<blocks_for(cells, 128), 128, 0, s>>>(dc, dp);
        return launched(op.name);
      });
    }
  }
  free(host);
  return e;
}

UD_Error* kernel_compile(const char* op, UD_DType dtype, const UD_Attr* attrs, int32_t num_attrs,
                         UD_KernelFn* kernel) {
  if (!kernel) return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "kernel_compile: kernel is NULL");
  *kernel = nullptr; /* no specialization: every program runs on the one interpreter */
  if (!op || strcmp(op, "elementwise_program") != 0 || !(dtype_bit(dtype) & UD_DTM_FLOAT_GROUP))
    return nullptr;
  const UD_OpInfo* info = ud_op_info(UD_OP_ELEMENTWISE_PROGRAM);
  const UD_Attr* prog = attrs ? &attrs[UD_ATTR_ELEMENTWISE_PROGRAM_PROGRAM] : nullptr;
  if (num_attrs != info->num_attrs || !prog || prog->type != UD_ATTR_STRING || !prog->value.s)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "elementwise_program: kernel_compile takes the "
                        "op's %d attributes in op-set order, 'program' a string", info->num_attrs);
  UD_KitProgram* p = (UD_KitProgram*)malloc(sizeof *p);
  if (!p) return ud_kit_host_oom_error();
  /* the call's tensor counts are not known yet: any valid input count, the outputs it writes */
  UD_Error* e = ud_kit_program_parse("elementwise_program", prog->value.s, UD_PROGRAM_MAX_INPUTS,
                                     -1, p);
  free(p);
  return e;
}

}  // namespace udc
