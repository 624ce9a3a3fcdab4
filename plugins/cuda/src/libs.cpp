/* libs.cpp — finds cuBLAS and cuDNN from the nvidia-* wheels at run time (dlopen + dlsym). */
#include "libs.h"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace udc {
namespace {

/* Folders to try before the system's search path: $UNIDEV_CUDA_LIBRARY_PATH (set by the Python
 * package from the installed nvidia-* wheels), then the wheels' folders beside this library. */
std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = getenv("UNIDEV_CUDA_LIBRARY_PATH")) {
    std::string s(env);
    for (size_t i = 0, j; i <= s.size(); i = j + 1) {
      j = s.find(':', i);
      if (j == std::string::npos) j = s.size();
      if (j > i) dirs.push_back(s.substr(i, j - i));
    }
  }
  Dl_info info;
  if (dladdr((void*)&search_dirs, &info) && info.dli_fname) {
    std::string self(info.dli_fname);
    std::string site = self.substr(0, self.rfind('/')) + "/..";
    for (const char* sub : {"/nvidia/cu13/lib", "/nvidia/cublas/lib", "/nvidia/cudnn/lib"})
      dirs.push_back(site + sub);
  }
  return dirs;
}

void* open_lib(const char* soname, std::string* where) {
  for (const std::string& d : search_dirs()) {
    std::string path = d + "/" + soname;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return *where = path, h;
  }
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h) *where = soname;
  return h;
}

template <class F>
bool sym(std::initializer_list<void*> libs, const char* name, F* out) {
  for (void* l : libs)
    if (l)
      if (void* p = dlsym(l, name)) return *out = (F)p, true;
  return false;
}

struct Loaded {
  std::once_flag once;
  bool ok = false;
  std::string where, why;
};

Blas g_blas;
Loaded g_blas_state;
Dnn g_dnn;
Loaded g_dnn_state;

void load_blas() {
  Loaded& s = g_blas_state;
  void* h = open_lib("libcublas.so.13", &s.where);
  if (!h) {
    s.why = std::string("libcublas.so.13 not found (pip install nvidia-cublas): ") + dlerror();
    return;
  }
  const char* miss = nullptr;
  auto need = [&](const char* n, auto* f) { if (!sym({h}, n, f) && !miss) miss = n; };
  need("cublasCreate_v2", &g_blas.create);
  need("cublasSetStream_v2", &g_blas.set_stream);
  need("cublasGemmStridedBatchedEx", &g_blas.gemm_strided_batched);
  need("cublasGetStatusName", &g_blas.status_name);
  need("cublasGetStatusString", &g_blas.status_string);
  if (miss) s.why = s.where + " lacks " + miss;
  s.ok = !miss;
}

void load_dnn() {
  Loaded& s = g_dnn_state;
  void* h = open_lib("libcudnn.so.9", &s.where);
  if (!h) {
    s.why = std::string("libcudnn.so.9 not found (pip install nvidia-cudnn-cu13): ") + dlerror();
    return;
  }
  /* cuDNN 9 splits its API over sub-libraries; the front library usually re-exports all */
  std::string dir = s.where.find('/') != std::string::npos ? s.where.substr(0, s.where.rfind('/') + 1) : "";
  void* sub[3];
  const char* names[3] = {"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9"};
  for (int i = 0; i < 3; i++) sub[i] = dlopen((dir + names[i]).c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* miss = nullptr;
  auto need = [&](const char* n, auto* f) {
    if (!sym({h, sub[0], sub[1], sub[2]}, n, f) && !miss) miss = n;
  };
  need("cudnnCreate", &g_dnn.create);
  need("cudnnSetStream", &g_dnn.set_stream);
  need("cudnnGetErrorString", &g_dnn.error_string);
  need("cudnnCreateTensorDescriptor", &g_dnn.create_tensor);
  need("cudnnSetTensor4dDescriptorEx", &g_dnn.set_tensor_4d_ex);
  need("cudnnDestroyTensorDescriptor", &g_dnn.destroy_tensor);
  need("cudnnCreateFilterDescriptor", &g_dnn.create_filter);
  need("cudnnSetFilter4dDescriptor", &g_dnn.set_filter_4d);
  need("cudnnDestroyFilterDescriptor", &g_dnn.destroy_filter);
  need("cudnnCreateConvolutionDescriptor", &g_dnn.create_conv);
  need("cudnnSetConvolution2dDescriptor", &g_dnn.set_conv_2d);
  need("cudnnSetConvolutionGroupCount", &g_dnn.set_conv_groups);
  need("cudnnSetConvolutionMathType", &g_dnn.set_conv_math);
  need("cudnnDestroyConvolutionDescriptor", &g_dnn.destroy_conv);
  need("cudnnGetConvolutionForwardAlgorithm_v7", &g_dnn.fwd_algos);
  need("cudnnGetConvolutionForwardWorkspaceSize", &g_dnn.fwd_ws);
  need("cudnnConvolutionForward", &g_dnn.fwd);
  need("cudnnGetConvolutionBackwardDataAlgorithm_v7", &g_dnn.bwd_data_algos);
  need("cudnnGetConvolutionBackwardDataWorkspaceSize", &g_dnn.bwd_data_ws);
  need("cudnnConvolutionBackwardData", &g_dnn.bwd_data);
  need("cudnnGetConvolutionBackwardFilterAlgorithm_v7", &g_dnn.bwd_filter_algos);
  need("cudnnGetConvolutionBackwardFilterWorkspaceSize", &g_dnn.bwd_filter_ws);
  need("cudnnConvolutionBackwardFilter", &g_dnn.bwd_filter);
  if (miss) s.why = s.where + " lacks " + miss;
  s.ok = !miss;
}

/* Handles per thread and device: neither library allows one handle on two threads at once. */
thread_local std::array<Handle, 64> t_blas{}, t_dnn{};

}  // namespace

const Blas* blas(const char** why) {
  std::call_once(g_blas_state.once, load_blas);
  if (why) *why = g_blas_state.why.c_str();
  return g_blas_state.ok ? &g_blas : nullptr;
}

const Dnn* dnn(const char** why) {
  std::call_once(g_dnn_state.once, load_dnn);
  if (why) *why = g_dnn_state.why.c_str();
  return g_dnn_state.ok ? &g_dnn : nullptr;
}

UD_Error* blas_error(int status, const char* what) {
  if (!status) return nullptr;
  return ud_kit_error(status == 3 /* ALLOC_FAILED */ ? UD_ERR_OUT_OF_MEMORY : UD_ERR_DEVICE,
                      "%s: %s: %s", what, g_blas.status_name(status), g_blas.status_string(status));
}

UD_Error* dnn_error(int status, const char* what) {
  if (!status) return nullptr;
  return ud_kit_error(status == 2000 /* BAD_PARAM */ ? UD_ERR_INVALID_ARGUMENT : UD_ERR_DEVICE,
                      "%s: cuDNN status %d: %s", what, status, g_dnn.error_string(status));
}

UD_Error* blas_handle(int device, Stream stream, Handle* out) {
  const char* why;
  const Blas* b = blas(&why);
  if (!b) return ud_kit_error(UD_ERR_UNSUPPORTED, "cuBLAS unavailable: %s", why);
  Handle& h = t_blas[device];
  if (!h) {
    if (UD_Error* e = blas_error(b->create(&h), "cublasCreate")) return h = nullptr, e;
  }
  *out = h;
  return blas_error(b->set_stream(h, stream), "cublasSetStream");
}

UD_Error* dnn_handle(int device, Stream stream, Handle* out) {
  const char* why;
  const Dnn* d = dnn(&why);
  if (!d) return ud_kit_error(UD_ERR_UNSUPPORTED, "cuDNN unavailable: %s", why);
  Handle& h = t_dnn[device];
  if (!h) {
    if (UD_Error* e = dnn_error(d->create(&h), "cudnnCreate")) return h = nullptr, e;
  }
  *out = h;
  return dnn_error(d->set_stream(h, stream), "cudnnSetStream");
}

const char* libs_status() {
  static std::string text;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* why;
    text = std::string("cuBLAS: ") + (blas(&why) ? g_blas_state.where : why) + "\n";
    text += std::string("cuDNN: ") + (dnn(&why) ? g_dnn_state.where : why) + "\n";
  });
  return text.c_str();
}

}  // namespace udc
