/* dense.cu — matmul and gemm through cuBLAS (transposes read from strides), conv2d forward and
 * backward through cuDNN, plus our own direct and im2col+GEMM kernels, chosen by `algorithm`. */
#include <array>
#include <cstring>
#include <map>
#include <mutex>

#include "device.cuh"
#include "libs.h"

namespace udc {
namespace {

/* ---- cuBLAS in row-major terms ------------------------------------------------------------- */

struct BlasType {
  int data, compute;
  bool dbl; /* alpha/beta are doubles */
};
BlasType blas_type(UD_DType d) {
  switch (dtype_bit(d)) {
    case UD_DTM_FLOAT64: return {CUDA_R_64F, BLAS_COMPUTE_64F, true};
    case UD_DTM_FLOAT16: return {CUDA_R_16F, BLAS_COMPUTE_32F, false};
    case UD_DTM_BFLOAT16: return {CUDA_R_16BF, BLAS_COMPUTE_32F, false};
    default: return {CUDA_R_32F, BLAS_COMPUTE_32F, false};
  }
}

/* A row-major matrix operand: element (i, j) at ptr + (i * ld + j) (trans: ptr + (j * ld + i)) */
struct Mat {
  const char* ptr;
  bool trans;
  int64_t ld, batch_stride;
};

/* C[M, N] = alpha * op(A) op(B) + beta * C, row-major, `batch` matrices; cuBLAS is column-major,
 * so it computes C^T = op(B)^T op(A)^T. */
UD_Error* gemm_rm(int device, cudaStream_t s, UD_DType dt, int64_t M, int64_t N, int64_t K,
                  double alpha, Mat A, Mat B, double beta, char* C, int64_t ldc, int64_t sc,
                  int64_t batch) {
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || A.ld > INT32_MAX || B.ld > INT32_MAX ||
      ldc > INT32_MAX || batch > INT32_MAX)
    return ud_kit_error(UD_ERR_UNSUPPORTED, "gemm: dimensions beyond cuBLAS's 32-bit API");
  Handle h;
  if (UD_Error* e = blas_handle(device, s, &h)) return e;
  BlasType t = blas_type(dt);
  float af = (float)alpha, bf = (float)beta;
  const void* pa = t.dbl ? (const void*)&alpha : &af;
  const void* pb = t.dbl ? (const void*)&beta : &bf;
  const Blas* b = blas(nullptr);
  return blas_error(b->gemm_strided_batched(h, B.trans ? BLAS_OP_T : BLAS_OP_N,
                                            A.trans ? BLAS_OP_T : BLAS_OP_N, (int)N, (int)M, (int)K,
                                            pa, B.ptr, t.data, (int)B.ld, B.batch_stride, A.ptr,
                                            t.data, (int)A.ld, A.batch_stride, pb, C, t.data,
                                            (int)ldc, sc, (int)batch, t.compute, BLAS_GEMM_DEFAULT),
                    "cublasGemmStridedBatchedEx");
}

/* How cuBLAS can read a [rows, cols] view with strides (sr, sc); false: make it dense first. */
bool as_mat(int64_t rows, int64_t cols, int64_t sr, int64_t sc, Mat* m) {
  if ((sc == 1 || cols <= 1) && (rows <= 1 || sr >= (cols > 1 ? cols : 1))) {
    m->trans = false, m->ld = rows <= 1 ? (cols > 1 ? cols : 1) : sr;
    return true;
  }
  if ((sr == 1 || rows <= 1) && (cols <= 1 || sc >= (rows > 1 ? rows : 1))) {
    m->trans = true, m->ld = cols <= 1 ? (rows > 1 ? rows : 1) : sc;
    return true;
  }
  return false;
}

/* A matrix operand from a tensor's last two dims, densified when cuBLAS cannot read it. */
UD_Error* operand(const UD_Tensor& t, Dense& d, Mat* m, const int64_t** strides, int64_t* st) {
  int n = t.ndim;
  *strides = t.strides;
  if (as_mat(t.shape[n - 2], t.shape[n - 1], t.strides[n - 2], t.strides[n - 1], m)) {
    m->ptr = data_ptr(t);
    return nullptr;
  }
  if (UD_Error* e = d.from(t)) return e;
  d.contiguous_like(t, st);
  *strides = st;
  m->ptr = d.ptr, m->trans = false, m->ld = t.shape[n - 1] > 1 ? t.shape[n - 1] : 1;
  return nullptr;
}

int64_t itemsize(const UD_Tensor& t) { return ud_kit_itemsize(t.dtype); }

/* ---- direct convolution and im2col (NCHW, dense) ------------------------------------------ */

struct ConvK {
  ConvGeom g;
  const char* in0; /* fwd: x; bwd_input: grad_y; bwd_weight: grad_y */
  const char* in1; /* fwd: w;  bwd_input: w;      bwd_weight: x */
  const char* bias;
  char* out;
};

template <class T>
__global__ void k_conv_fwd(ConvK k) {
  const ConvGeom& g = k.g;
  const T *x = (const T*)k.in0, *w = (const T*)k.in1;
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  UDC_GRID_LOOP(i, g.N * g.K * g.OH * g.OW) {
    int64_t ow = i % g.OW, oh = i / g.OW % g.OH, kk = i / (g.OW * g.OH) % g.K, n = i / (g.OW * g.OH * g.K);
    int64_t c0 = kk / Kg * Cg;
    typename Acc<T>::type acc = k.bias ? to_acc(((const T*)k.bias)[kk]) : 0;
    for (int64_t c = 0; c < Cg; c++)
      for (int64_t r = 0; r < g.R; r++) {
        int64_t h = oh * g.stride.h - g.pad.h + r * g.dil.h;
        if (h < 0 || h >= g.H) continue;
        for (int64_t q = 0; q < g.S; q++) {
          int64_t ww = ow * g.stride.w - g.pad.w + q * g.dil.w;
          if (ww < 0 || ww >= g.W) continue;
          acc += to_acc(x[((n * g.C + c0 + c) * g.H + h) * g.W + ww]) *
                 to_acc(w[((kk * Cg + c) * g.R + r) * g.S + q]);
        }
      }
    ((T*)k.out)[i] = from_acc<T>(acc);
  }
}

template <class T>
__global__ void k_conv_bwd_input(ConvK k) {
  const ConvGeom& g = k.g;
  const T *dy = (const T*)k.in0, *w = (const T*)k.in1;
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  UDC_GRID_LOOP(i, g.N * g.C * g.H * g.W) {
    int64_t x = i % g.W, y = i / g.W % g.H, c = i / (g.W * g.H) % g.C, n = i / (g.W * g.H * g.C);
    int64_t grp = c / Cg, cl = c % Cg;
    typename Acc<T>::type acc = 0;
    for (int64_t r = 0; r < g.R; r++) {
      int64_t th = y + g.pad.h - r * g.dil.h;
      if (th < 0 || th % g.stride.h) continue;
      int64_t oh = th / g.stride.h;
      if (oh >= g.OH) continue;
      for (int64_t q = 0; q < g.S; q++) {
        int64_t tw = x + g.pad.w - q * g.dil.w;
        if (tw < 0 || tw % g.stride.w) continue;
        int64_t ow = tw / g.stride.w;
        if (ow >= g.OW) continue;
        for (int64_t kl = 0; kl < Kg; kl++) {
          int64_t kk = grp * Kg + kl;
          acc += to_acc(dy[((n * g.K + kk) * g.OH + oh) * g.OW + ow]) *
                 to_acc(w[((kk * Cg + cl) * g.R + r) * g.S + q]);
        }
      }
    }
    ((T*)k.out)[i] = from_acc<T>(acc);
  }
}

template <class T>
__global__ void k_conv_bwd_weight(ConvK k) {
  const ConvGeom& g = k.g;
  const T *dy = (const T*)k.in0, *x = (const T*)k.in1;
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups;
  UDC_GRID_LOOP(i, g.K * Cg * g.R * g.S) {
    int64_t q = i % g.S, r = i / g.S % g.R, cl = i / (g.S * g.R) % Cg, kk = i / (g.S * g.R * Cg);
    int64_t c = kk / Kg * Cg + cl;
    typename Acc<T>::type acc = 0;
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t oh = 0; oh < g.OH; oh++) {
        int64_t h = oh * g.stride.h - g.pad.h + r * g.dil.h;
        if (h < 0 || h >= g.H) continue;
        for (int64_t ow = 0; ow < g.OW; ow++) {
          int64_t w = ow * g.stride.w - g.pad.w + q * g.dil.w;
          if (w < 0 || w >= g.W) continue;
          acc += to_acc(dy[((n * g.K + kk) * g.OH + oh) * g.OW + ow]) *
                 to_acc(x[((n * g.C + c) * g.H + h) * g.W + w]);
        }
      }
    ((T*)k.out)[i] = from_acc<T>(acc);
  }
}

/* cols[(c * R + r) * S + q, oh * OW + ow] = x[n, c, h, w] (0 in the padding) for one image;
 * COL2IM: the reverse, summing every column entry that maps to one x element (a gather). */
template <class T, bool COL2IM>
__global__ void k_im2col(ConvGeom g, const T* src, T* dst) {
  const int64_t L = g.OH * g.OW;
  if constexpr (!COL2IM) {
    UDC_GRID_LOOP(i, g.C * g.R * g.S * L) {
      int64_t l = i % L, row = i / L, q = row % g.S, r = row / g.S % g.R, c = row / (g.S * g.R);
      int64_t h = l / g.OW * g.stride.h - g.pad.h + r * g.dil.h;
      int64_t w = l % g.OW * g.stride.w - g.pad.w + q * g.dil.w;
      dst[i] = h >= 0 && h < g.H && w >= 0 && w < g.W ? src[(c * g.H + h) * g.W + w] : T(0);
    }
  } else {
    UDC_GRID_LOOP(i, g.C * g.H * g.W) {
      int64_t x = i % g.W, y = i / g.W % g.H, c = i / (g.W * g.H);
      typename Acc<T>::type acc = 0;
      for (int64_t r = 0; r < g.R; r++) {
        int64_t th = y + g.pad.h - r * g.dil.h;
        if (th < 0 || th % g.stride.h || th / g.stride.h >= g.OH) continue;
        for (int64_t q = 0; q < g.S; q++) {
          int64_t tw = x + g.pad.w - q * g.dil.w;
          if (tw < 0 || tw % g.stride.w || tw / g.stride.w >= g.OW) continue;
          acc += to_acc(src[((c * g.R + r) * g.S + q) * L + th / g.stride.h * g.OW + tw / g.stride.w]);
        }
      }
      dst[i] = from_acc<T>(acc);
    }
  }
}

template <class T>
__global__ void k_add_bias(T* y, const T* b, int64_t n, int64_t plane, int64_t K) {
  UDC_GRID_LOOP(i, n) y[i] = from_acc<T>(to_acc(y[i]) + to_acc(b[i / plane % K]));
}

/* ---- cuDNN ------------------------------------------------------------------------------- */

int dnn_type(UD_DType d) {
  switch (dtype_bit(d)) {
    case UD_DTM_FLOAT64: return DNN_DOUBLE;
    case UD_DTM_FLOAT16: return DNN_HALF;
    case UD_DTM_BFLOAT16: return DNN_BFLOAT16;
    default: return DNN_FLOAT;
  }
}

struct DnnConv {
  const Dnn* d = nullptr;
  Handle x = nullptr, y = nullptr, w = nullptr, conv = nullptr;
  ~DnnConv() {
    if (!d) return;
    if (x) d->destroy_tensor(x);
    if (y) d->destroy_tensor(y);
    if (w) d->destroy_filter(w);
    if (conv) d->destroy_conv(conv);
  }
  UD_Error* init(const ConvGeom& g, UD_DType dt) {
    const char* why;
    d = dnn(&why);
    if (!d) return ud_kit_error(UD_ERR_UNSUPPORTED, "conv2d algorithm 'cudnn': %s", why);
    int t = dnn_type(dt);
    int64_t dims[] = {g.N, g.C, g.H, g.W, g.K, g.OH, g.OW};
    for (int64_t v : dims)
      if (v > INT32_MAX / 4 || g.N * g.C * g.H * g.W > INT32_MAX || g.N * g.K * g.OH * g.OW > INT32_MAX)
        return ud_kit_error(UD_ERR_UNSUPPORTED, "conv2d: tensor too large for cuDNN's 32-bit API");
    int C = (int)g.C, H = (int)g.H, W = (int)g.W, K = (int)g.K, OH = (int)g.OH, OW = (int)g.OW;
    UD_Error* e = dnn_error(d->create_tensor(&x), "cudnnCreateTensorDescriptor");
    if (!e) e = dnn_error(d->set_tensor_4d_ex(x, t, (int)g.N, C, H, W, C * H * W, H * W, W, 1), "cudnnSetTensor4dDescriptorEx(x)");
    if (!e) e = dnn_error(d->create_tensor(&y), "cudnnCreateTensorDescriptor");
    if (!e) e = dnn_error(d->set_tensor_4d_ex(y, t, (int)g.N, K, OH, OW, K * OH * OW, OH * OW, OW, 1), "cudnnSetTensor4dDescriptorEx(y)");
    if (!e) e = dnn_error(d->create_filter(&w), "cudnnCreateFilterDescriptor");
    if (!e) e = dnn_error(d->set_filter_4d(w, t, DNN_NCHW, K, (int)(g.C / g.groups), (int)g.R, (int)g.S), "cudnnSetFilter4dDescriptor");
    if (!e) e = dnn_error(d->create_conv(&conv), "cudnnCreateConvolutionDescriptor");
    if (!e) e = dnn_error(d->set_conv_2d(conv, (int)g.pad.h, (int)g.pad.w, (int)g.stride.h, (int)g.stride.w, (int)g.dil.h, (int)g.dil.w, DNN_CROSS_CORRELATION, t == DNN_DOUBLE ? DNN_DOUBLE : DNN_FLOAT), "cudnnSetConvolution2dDescriptor");
    if (!e) e = dnn_error(d->set_conv_groups(conv, (int)g.groups), "cudnnSetConvolutionGroupCount");
    /* float32 stays IEEE float32 (no TF32), as the conformance tolerances expect */
    if (!e) e = dnn_error(d->set_conv_math(conv, t == DNN_HALF || t == DNN_BFLOAT16 ? DNN_TENSOR_OP_MATH : DNN_FMA_MATH), "cudnnSetConvolutionMathType");
    return e;
  }
};

/* the first algorithm cuDNN's heuristics rank usable (no tensor-op math for float32/64) */
int pick(const DnnAlgoPerf* p, int n, bool full_precision) {
  for (int i = 0; i < n; i++)
    if (p[i].status == 0 && (!full_precision || (p[i].math_type != 1 && p[i].math_type != 2)))
      return p[i].algo;
  return n ? p[0].algo : 0;
}

/* cuDNN's heuristic choice per (direction, geometry, dtype, device): asked once, then reused */
using AlgoKey = std::array<int64_t, 17>;
std::mutex g_algo_mu;
std::map<AlgoKey, int> g_algos;

template <class Query>
UD_Error* cached_algo(const AlgoKey& key, bool full, Query query, int* algo) {
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) return *algo = it->second, nullptr;
  }
  DnnAlgoPerf perf[16];
  int n = 0;
  if (UD_Error* e = query(perf, &n)) return e;
  *algo = pick(perf, n, full);
  std::lock_guard<std::mutex> lock(g_algo_mu);
  g_algos[key] = *algo;
  return nullptr;
}

UD_Error* conv_cudnn(Family f, const ConvGeom& g, UD_DType dt, const char* in0, const char* in1,
                     char* out, int device, cudaStream_t s) {
  DnnConv c;
  if (UD_Error* e = c.init(g, dt)) return e;
  Handle h;
  if (UD_Error* e = dnn_handle(device, s, &h)) return e;
  const Dnn* d = c.d;
  size_t ws = 0;
  bool full = dnn_type(dt) == DNN_FLOAT || dnn_type(dt) == DNN_DOUBLE;
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void* alpha = dnn_type(dt) == DNN_DOUBLE ? (const void*)&one : &onef;
  const void* beta = dnn_type(dt) == DNN_DOUBLE ? (const void*)&zero : &zerof;
  const AlgoKey key{f, g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.stride.h, g.stride.w, g.pad.h,
                    g.pad.w, g.dil.h, g.dil.w, g.groups, dnn_type(dt), device};
  Scratch work(s);
  int algo = 0;
  UD_Error* e = nullptr;
  if (f == F_CONV) {
    e = cached_algo(key, full, [&](DnnAlgoPerf* p, int* n) {
      return dnn_error(d->fwd_algos(h, c.x, c.w, c.conv, c.y, 16, n, p), "cudnnGetConvolutionForwardAlgorithm_v7");
    }, &algo);
    if (!e) e = dnn_error(d->fwd_ws(h, c.x, c.w, c.conv, c.y, algo, &ws), "cudnnGetConvolutionForwardWorkspaceSize");
    if (!e) e = work.alloc(ws);
    if (!e) e = dnn_error(d->fwd(h, alpha, c.x, in0, c.w, in1, c.conv, algo, work.p, ws, beta, c.y, out), "cudnnConvolutionForward");
  } else if (f == F_CONV_BI) {
    e = cached_algo(key, full, [&](DnnAlgoPerf* p, int* n) {
      return dnn_error(d->bwd_data_algos(h, c.w, c.y, c.conv, c.x, 16, n, p), "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    }, &algo);
    if (!e) e = dnn_error(d->bwd_data_ws(h, c.w, c.y, c.conv, c.x, algo, &ws), "cudnnGetConvolutionBackwardDataWorkspaceSize");
    if (!e) e = work.alloc(ws);
    if (!e) e = dnn_error(d->bwd_data(h, alpha, c.w, in1, c.y, in0, c.conv, algo, work.p, ws, beta, c.x, out), "cudnnConvolutionBackwardData");
  } else {
    e = cached_algo(key, full, [&](DnnAlgoPerf* p, int* n) {
      return dnn_error(d->bwd_filter_algos(h, c.x, c.y, c.conv, c.w, 16, n, p), "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    }, &algo);
    if (!e) e = dnn_error(d->bwd_filter_ws(h, c.x, c.y, c.conv, c.w, algo, &ws), "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    if (!e) e = work.alloc(ws);
    if (!e) e = dnn_error(d->bwd_filter(h, alpha, c.x, in1, c.y, in0, c.conv, algo, work.p, ws, beta, c.w, out), "cudnnConvolutionBackwardFilter");
  }
  return e;
}

/* im2col + one batched GEMM over the groups, per image */
template <class T>
UD_Error* conv_im2col(Family f, const ConvGeom& g, UD_DType dt, const char* in0, const char* in1,
                      char* out, int device, cudaStream_t s) {
  const int64_t Cg = g.C / g.groups, Kg = g.K / g.groups, L = g.OH * g.OW, CRS = Cg * g.R * g.S;
  Scratch cols(s);
  if (UD_Error* e = cols.alloc(sizeof(T) * g.C * g.R * g.S * L)) return e;
  T* cp = (T*)cols.p;
  const int64_t xs = g.C * g.H * g.W, ys = g.K * L;
  for (int64_t n = 0; n < g.N; n++) {
    UD_Error* e = nullptr;
    if (f == F_CONV || f == F_CONV_BW) {
      const T* x = (const T*)(f == F_CONV ? in0 : in1) + n * xs;
      k_im2col<T, false><<<blocks_for(g.C * g.R * g.S * L), kThreads, 0, s>>>(g, x, cp);
      if ((e = launched("conv2d im2col"))) return e;
    }
    if (f == F_CONV) { /* y_g[Kg, L] = w_g[Kg, CRS] @ cols_g[CRS, L] */
      e = gemm_rm(device, s, dt, Kg, L, CRS, 1.0, {in1, false, CRS, Kg * CRS},
                  {(const char*)cp, false, L, CRS * L}, 0.0, out + n * ys * sizeof(T), L, Kg * L, g.groups);
    } else if (f == F_CONV_BI) { /* cols_g[CRS, L] = w_g^T @ dy_g[Kg, L], then col2im */
      e = gemm_rm(device, s, dt, CRS, L, Kg, 1.0, {in1, true, CRS, Kg * CRS},
                  {in0 + n * ys * sizeof(T), false, L, Kg * L}, 0.0, (char*)cp, L, CRS * L, g.groups);
      if (!e) {
        k_im2col<T, true><<<blocks_for(xs), kThreads, 0, s>>>(g, cp, (T*)out + n * xs);
        e = launched("conv2d col2im");
      }
    } else { /* dw_g[Kg, CRS] += dy_g[Kg, L] @ cols_g^T */
      e = gemm_rm(device, s, dt, Kg, CRS, L, 1.0, {in0 + n * ys * sizeof(T), false, L, Kg * L},
                  {(const char*)cp, true, L, CRS * L}, n ? 1.0 : 0.0, out, CRS, Kg * CRS, g.groups);
    }
    if (e) return e;
  }
  if (f == F_CONV_BW && g.N == 0)
    return cuda_error(cudaMemsetAsync(out, 0, sizeof(T) * g.K * CRS, s), "conv2d_backward_weight");
  return nullptr;
}

}  // namespace

UD_Error* launch_matmul(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const UD_Tensor &A = a->inputs[0], &B = a->inputs[1], &O = a->outputs[0];
  const int n = O.ndim;
  const int64_t M = O.shape[n - 2], N = O.shape[n - 1], K = A.shape[n - 1];
  if (!ud_kit_numel(&O)) return nullptr;
  Dense da(s), db(s), dout(s);
  Mat ma, mb, mo;
  const int64_t *sa, *sb, *so;
  int64_t bufa[kMaxDims], bufb[kMaxDims], bufo[kMaxDims];
  if (UD_Error* e = operand(A, da, &ma, &sa, bufa)) return e;
  if (UD_Error* e = operand(B, db, &mb, &sb, bufb)) return e;
  /* the output must be plain row-major; otherwise compute into scratch and copy out */
  bool direct = as_mat(M, N, O.strides[n - 2], O.strides[n - 1], &mo) && !mo.trans;
  UD_Tensor tmp = O;
  if (direct) {
    mo.ptr = data_ptr(O);
    so = O.strides;
  } else {
    if (UD_Error* e = dout.buf.alloc(ud_kit_numel(&O) * itemsize(O))) return e;
    dout.ptr = (char*)dout.buf.p;
    tmp = dout.contiguous_like(O, bufo);
    so = bufo;
    mo = {dout.ptr, false, N, 0};
  }
  double alpha = 1.0, beta = 0.0;
  if (op.family == F_GEMM_ACT) alpha = ud_kit_attr_float(a, UD_ATTR_GEMM_BIAS_ACT_ALPHA);
  if (op.family == F_GEMM) {
    alpha = ud_kit_attr_float(a, UD_ATTR_GEMM_ALPHA);
    if (ud_kit_present(&a->inputs[UD_IN_GEMM_C])) {
      beta = ud_kit_attr_float(a, UD_ATTR_GEMM_BETA);
      if (UD_Error* e = strided_copy(a->inputs[UD_IN_GEMM_C], tmp, s)) return e;
    }
  }
  /* batch dims: collapse jointly; the innermost goes to cuBLAS's strided batch, the rest loop */
  int64_t bshape[kMaxDims], bst[3][kMaxDims];
  const int64_t* bs_in[3] = {sa, sb, so};
  int nb = ud_kit_collapse(n - 2, O.shape, 3, bs_in, bshape, bst);
  int64_t inner = nb ? bshape[nb - 1] : 1, outer = 1;
  for (int d = 0; d + 1 < nb; d++) outer *= bshape[d];
  const int64_t isz = itemsize(O);
  for (int64_t o = 0; o < outer; o++) {
    int64_t off[3] = {0, 0, 0}, rem = o;
    for (int d = nb - 2; d >= 0; d--) {
      int64_t idx = rem % bshape[d];
      rem /= bshape[d];
      for (int t = 0; t < 3; t++) off[t] += idx * bst[t][d];
    }
    Mat pa = ma, pb = mb;
    pa.ptr += off[0] * isz, pb.ptr += off[1] * isz;
    pa.batch_stride = nb ? bst[0][nb - 1] : 0, pb.batch_stride = nb ? bst[1][nb - 1] : 0;
    int64_t sc = nb ? bst[2][nb - 1] : 0;
    if (UD_Error* e = gemm_rm(a->device, s, A.dtype, M, N, K, alpha, pa, pb, beta,
                              (char*)mo.ptr + off[2] * isz, mo.ld, sc, inner))
      return e;
  }
  if (op.family == F_GEMM_ACT) { /* bias, residual and activation over the product, in place */
    int act = ud_activation_id(ud_kit_attr_str(a, UD_ATTR_GEMM_BIAS_ACT_ACTIVATION));
    if (UD_Error* e = launch_epilogue(direct ? O : tmp, a->inputs[UD_IN_GEMM_BIAS_ACT_BIAS],
                                      a->inputs[UD_IN_GEMM_BIAS_ACT_RESIDUAL], 1, act, s))
      return e;
  }
  return direct ? nullptr : strided_copy(tmp, O, s);
}

UD_Error* launch_conv(const OpInfo& op, const UD_KernelArgs* a, void* stream) {
  cudaStream_t s = (cudaStream_t)stream;
  const Family f = op.family == F_CONV_ACT ? F_CONV : op.family; /* + an epilogue below */
  const int first = conv_first(f);
  const UD_Tensor &in0 = a->inputs[0], &in1 = a->inputs[1], &out = a->outputs[0];
  const int64_t* xs = f == F_CONV ? in0.shape : f == F_CONV_BW ? in1.shape : a->attrs[kConvShape].value.ints.data;
  const int64_t* ws = f == F_CONV_BW ? a->attrs[kConvShape].value.ints.data : in1.shape;
  ConvGeom g;
  if (UD_Error* e = conv_geometry(op.name, xs, ws, a->attrs + first, &g)) return e;
  if (!ud_kit_numel(&out)) return nullptr;
  Dense d0(s), d1(s), dout(s);
  if (UD_Error* e = d0.from(in0)) return e;
  if (UD_Error* e = d1.from(in1)) return e;
  bool dense_out = ud_kit_is_contiguous(&out);
  char* o = data_ptr(out);
  if (!dense_out) {
    if (UD_Error* e = dout.buf.alloc(ud_kit_numel(&out) * itemsize(out))) return e;
    o = (char*)dout.buf.p;
  }
  const bool empty_in = ud_kit_numel(&in0) == 0 || ud_kit_numel(&in1) == 0;
  if (empty_in) { /* nothing to sum: zeros (plus the bias below) */
    if (UD_Error* e = cuda_error(cudaMemsetAsync(o, 0, ud_kit_numel(&out) * itemsize(out), s), op.name))
      return e;
  } else {
    const char* alg = a->attrs[first + kConvAlgorithm].value.s;
    const char* why = "";
    bool use_dnn = !strcmp(alg, "cudnn") || (!strcmp(alg, "auto") && dnn(&why));
    bool use_i2c = !strcmp(alg, "im2col") || (!strcmp(alg, "auto") && !use_dnn && blas(&why));
    UD_Error* e = by_dtype<DT_DENSE>(in0.dtype, op.name, [&](auto t) -> UD_Error* {
      using T = decltype(t);
      if (use_dnn) return conv_cudnn(f, g, in0.dtype, d0.ptr, d1.ptr, o, a->device, s);
      if (use_i2c) return conv_im2col<T>(f, g, in0.dtype, d0.ptr, d1.ptr, o, a->device, s);
      ConvK k{g, d0.ptr, d1.ptr, nullptr, o};
      int64_t n = f == F_CONV ? g.N * g.K * g.OH * g.OW
                : f == F_CONV_BI ? g.N * g.C * g.H * g.W : g.K * (g.C / g.groups) * g.R * g.S;
      if (f == F_CONV) k_conv_fwd<T><<<blocks_for(n), kThreads, 0, s>>>(k);
      else if (f == F_CONV_BI) k_conv_bwd_input<T><<<blocks_for(n), kThreads, 0, s>>>(k);
      else k_conv_bwd_weight<T><<<blocks_for(n), kThreads, 0, s>>>(k);
      return launched(op.name);
    });
    if (e) return e;
  }
  if (op.family == F_CONV && ud_kit_present(&a->inputs[2])) {
    Dense db(s);
    if (UD_Error* e = db.from(a->inputs[2])) return e;
    UD_Error* e = by_dtype<DT_DENSE>(in0.dtype, op.name, [&](auto t) {
      using T = decltype(t);
      int64_t n = ud_kit_numel(&out);
      k_add_bias<T><<<blocks_for(n), kThreads, 0, s>>>((T*)o, (const T*)db.ptr, n, g.OH * g.OW, g.K);
      return launched("conv2d bias");
    });
    if (e) return e;
  }
  int64_t st[kMaxDims];
  dout.ptr = o;
  const UD_Tensor dense = dout.contiguous_like(out, st); /* y as computed, row-major */
  if (op.family == F_CONV_ACT) { /* bias, residual and activation, in place before any copy */
    int act = ud_activation_id(ud_kit_attr_str(a, UD_ATTR_CONV2D_BIAS_ACT_ACTIVATION));
    if (UD_Error* e = launch_epilogue(dense, a->inputs[UD_IN_CONV2D_BIAS_ACT_BIAS],
                                      a->inputs[UD_IN_CONV2D_BIAS_ACT_RESIDUAL], g.OH * g.OW, act,
                                      s))
      return e;
  }
  return dense_out ? nullptr : strided_copy(dense, out, s);
}

}  // namespace udc
