/* libs.h — cuBLAS and cuDNN, opened with dlopen from the nvidia-* wheels at first use, so the
 * plugin loads (and reports devices) on machines that lack them. Only the few entry points the
 * plugin calls are declared, with the C ABI types the libraries document. */
#ifndef UNIDEV_CUDA_LIBS_H_
#define UNIDEV_CUDA_LIBS_H_

#include <cstddef>

#include "cuda_plugin.h"

namespace udc {

using Handle = void*;
using Stream = void*;

/* cuBLAS enums (cublas_api.h / library_types.h) */
enum { BLAS_OP_N = 0, BLAS_OP_T = 1, BLAS_GEMM_DEFAULT = -1 };
enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { BLAS_COMPUTE_32F = 68, BLAS_COMPUTE_64F = 70 };

struct Blas {
  int (*create)(Handle*);
  int (*set_stream)(Handle, Stream);
  int (*gemm_strided_batched)(Handle, int ta, int tb, int m, int n, int k, const void* alpha,
                              const void* A, int atype, int lda, long long sa, const void* B,
                              int btype, int ldb, long long sb, const void* beta, void* C,
                              int ctype, int ldc, long long sc, int batch, int compute, int algo);
  const char* (*status_name)(int);
  const char* (*status_string)(int);
};

/* cuDNN enums (cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h, cuDNN 9) */
enum { DNN_FLOAT = 0, DNN_DOUBLE = 1, DNN_HALF = 2, DNN_BFLOAT16 = 9 };
enum { DNN_NCHW = 0, DNN_CROSS_CORRELATION = 1 };
enum { DNN_DEFAULT_MATH = 0, DNN_TENSOR_OP_MATH = 1, DNN_FMA_MATH = 3 };

/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout */
struct DnnAlgoPerf {
  int algo;
  int status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

struct Dnn {
  int (*create)(Handle*);
  int (*set_stream)(Handle, Stream);
  const char* (*error_string)(int);
  int (*create_tensor)(Handle*);
  int (*set_tensor_4d_ex)(Handle, int dtype, int n, int c, int h, int w, int ns, int cs, int hs,
                          int ws);
  int (*destroy_tensor)(Handle);
  int (*create_filter)(Handle*);
  int (*set_filter_4d)(Handle, int dtype, int format, int k, int c, int h, int w);
  int (*destroy_filter)(Handle);
  int (*create_conv)(Handle*);
  int (*set_conv_2d)(Handle, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int dtype);
  int (*set_conv_groups)(Handle, int);
  int (*set_conv_math)(Handle, int);
  int (*destroy_conv)(Handle);
  /* forward: x, w, conv, y; backward data: w, dy, conv, dx; backward filter: x, dy, conv, dw */
  int (*fwd_algos)(Handle, Handle, Handle, Handle, Handle, int, int*, DnnAlgoPerf*);
  int (*fwd_ws)(Handle, Handle, Handle, Handle, Handle, int, size_t*);
  int (*fwd)(Handle, const void*, Handle, const void*, Handle, const void*, Handle, int, void*,
             size_t, const void*, Handle, void*);
  int (*bwd_data_algos)(Handle, Handle, Handle, Handle, Handle, int, int*, DnnAlgoPerf*);
  int (*bwd_data_ws)(Handle, Handle, Handle, Handle, Handle, int, size_t*);
  int (*bwd_data)(Handle, const void*, Handle, const void*, Handle, const void*, Handle, int,
                  void*, size_t, const void*, Handle, void*);
  int (*bwd_filter_algos)(Handle, Handle, Handle, Handle, Handle, int, int*, DnnAlgoPerf*);
  int (*bwd_filter_ws)(Handle, Handle, Handle, Handle, Handle, int, size_t*);
  int (*bwd_filter)(Handle, const void*, Handle, const void*, Handle, const void*, Handle, int,
                    void*, size_t, const void*, Handle, void*);
};

/* The loaded tables, or NULL with *why set to a message naming the library and the wheel. */
const Blas* blas(const char** why);
const Dnn* dnn(const char** why);
/* A per-device, per-thread-safe handle bound to `stream`; NULL + error on failure. */
UD_Error* blas_handle(int device, Stream stream, Handle* out);
UD_Error* dnn_handle(int device, Stream stream, Handle* out);
UD_Error* blas_error(int status, const char* what);
UD_Error* dnn_error(int status, const char* what);
const char* libs_status(); /* lines "cuBLAS: <path> | <why missing>" for tools */

}  // namespace udc

#endif /* UNIDEV_CUDA_LIBS_H_ */
