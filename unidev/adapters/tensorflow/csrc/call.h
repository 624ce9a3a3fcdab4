// call.h — what every handler family shares: TF tensors as UD_Tensor descriptors, attribute
// lists with the op set's defaults, and one kernel invocation (Call) that runs plugin kernels.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <unidev/ops.h>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tensor.h"
#include "udtf.h"

namespace udtf {

// One TF op of the generated table (ops.py): its handler's name, the unidev op (UD_OP_*, ops.h)
// it calls, the dtypes served and the unidev ops the handler needs. Dtypes are ops.h's ids.
struct TfOpInfo {
  const char* tf;
  const char* handler;
  int ud;
  uint32_t dtypes;  // UD_DTM_* mask
  int ntypes;
  const char* type_attrs[3];
  int type_kinds[3];  // kernel dtype (-1), each Cast target (-2), int32+int64 (-3), a UD_DT_* id
  const char* host[2];
  const char* host_int32;  // an argument TF keeps in host memory in the int32 kernel
  int nneeds;
  int needs[8];
};
extern const TfOpInfo kTfOps[];
extern const int kNumTfOps;

constexpr int kMaxDims = 16;
constexpr int kMaxAttrs = 12;

// The TF dtype of ops.h's dtype id `id` (0 if TF has none), and the id of a TF dtype (-1 if
// none); ops.h's UD_DTYPES gives everything else about a dtype.
TF_DataType tf_dtype(int id);
int dtype_id(TF_DataType t);
// The plugin's kernel of unidev op `op` for dtype id `dt`; looked up once in TF_InitKernel
// (lookup_kernels, which also fills in the attribute defaults).
UD_KernelFn kernel_fn(int op, int dt);
void lookup_kernels(const UD_Api* api);

// A descriptor with its own shape/stride storage; get() fixes the pointers after copies. Only
// the first t.ndim entries are ever set or read (not zero-filling them is a tenth of a tiny op).
struct Desc {
  UD_Tensor t{};
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
  const UD_Tensor& get() {
    t.shape = shape;
    t.strides = strides;
    return t;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < t.ndim; i++) n *= shape[i];
    return n;
  }
  // This tensor seen through a permutation of its dimensions (view[i] = dim perm[i]).
  Desc permuted(const int* perm) const {
    Desc d = *this;
    for (int i = 0; i < t.ndim; i++) d.shape[i] = shape[perm[i]], d.strides[i] = strides[perm[i]];
    return d;
  }
};

// A unidev op's attributes in op-set order, starting from the op set's defaults (ops.h).
struct Attrs {
  UD_Attr a[kMaxAttrs];
  int n;
  explicit Attrs(int op);
  UD_Attr& at(const char* name);
  Attrs& i(const char* k, int64_t v) { at(k).value.i = v; return *this; }
  Attrs& f(const char* k, double v) { at(k).value.f = v; return *this; }
  Attrs& b(const char* k, bool v) { at(k).value.b = v; return *this; }
  Attrs& s(const char* k, const char* v) { at(k).value.s = v; return *this; }
  Attrs& ints(const char* k, const int64_t* v, int64_t len) {
    at(k).value.ints.data = v;
    at(k).value.ints.len = len;
    return *this;
  }
};
inline const char* op_name(int op) { return ud_op_info(op)->name; }

struct Call;
using HandlerFn = void (*)(Call&);
enum HandlerFlags { kStageHost = 1 };  // int32 inputs may arrive in host memory: stage them
// Called by each family's register_<family>(): handler `name` of the generated table is `fn`.
void handler(const char* name, HandlerFn fn, int flags = 0);

// What a kernel reads from its node once, at construction.
struct Kern {
  const TfOpInfo* op;
  HandlerFn fn = nullptr;
  int flags = 0;
  bool ta = false, tb = false, keep_dims = false, nchw = false, training = false;
  float epsilon = 1e-4f, avg_factor = 1.0f;  // FusedBatchNorm
  std::string padding;
  std::vector<int64_t> ksize, strides, dilations, explicit_pads;
  TF_DataType dst = TF_FLOAT;
  // A kernel instance serves one device, whose compute stream never changes: asked for once.
  std::atomic<SP_Stream> stream{nullptr};
};

// One kernel invocation: owns the TF tensors it fetched and the status.
struct Call {
  TF_OpKernelContext* ctx;
  const Kern* k;
  TF_Status* st;
  SP_Stream sp = nullptr;
  std::vector<TF_Tensor*>& owned;

  Call(TF_OpKernelContext* c, Kern* kern);
  ~Call();
  void release();
  bool ok() const { return TF_GetCode(st) == TF_OK; }
  bool fail(TF_Code code, const std::string& msg);
  TF_Tensor* keep(TF_Tensor* t) {
    if (t) owned.push_back(t);
    return t;
  }
  TF_Tensor* input(int i);
  TF_Tensor* output(int i, TF_DataType dt, const std::vector<int64_t>& dims) {
    return output(i, dt, dims.data(), int(dims.size()));
  }
  // Output `i`; with `reuse` >= 0 in that input's buffer when TF can hand it over (same dtype
  // and size, no other reader; elementwise ops only). TF hands over only unshared buffers and each
  // fetched input holds a reference, so those are released first: callers must not use them.
  TF_Tensor* output(int i, TF_DataType dt, const int64_t* dims, int nd, int reuse = -1);
  TF_Tensor* temp(TF_DataType dt, const std::vector<int64_t>& dims);
  // TF aborts the process on a shape with a negative dimension or more than 2^63-1 elements:
  // every shape is checked here before it reaches TF's allocation.
  bool valid_shape(const int64_t* dims, int nd, size_t elem, size_t* bytes);
  // Host input `i` (named `what`) read as a shape: every entry a dimension >= 0.
  bool shape_arg(int i, const char* what, std::vector<int64_t>* dims);
  TF_DataType out_type() const { return TF_ExpectedOutputDataType(ctx, 0); }
  // A device-memory descriptor of input `i`; declared host-memory inputs are staged over.
  bool device_input(int i, Desc* d);
  // Integer input `i` (`d` on the device) as host values: host memory is read in place, device
  // memory copied back directly.
  bool host_values(int i, const Desc& d, std::vector<int64_t>* v);
  // Host tensor `src` copied into device tensor `dst` of the same size, waited for.
  bool upload(TF_Tensor* dst, const TF_Tensor* src);
  bool run(int op, std::initializer_list<const Desc*> ins, std::initializer_list<const Desc*> outs,
           const Attrs& attrs);
  bool run(int op, std::initializer_list<const Desc*> in, std::initializer_list<const Desc*> out) {
    return run(op, in, out, Attrs(op));
  }
};

std::vector<int64_t> dims_of(const TF_Tensor* t);
inline std::vector<int64_t> dims_of(const Desc& d) { return {d.shape, d.shape + d.t.ndim}; }
Desc contiguous(UD_Handle h, TF_DataType dt, const int64_t* dims, int nd, int32_t device);
Desc desc(const Call& c, const TF_Tensor* t);
inline Desc absent() {
  Desc d;
  return d.t.ndim = -1, d;
}
// `d` broadcast (numpy rules, right-aligned) to `shape`: stride 0 on broadcast dimensions.
Desc broadcast(const Desc& d, const std::vector<int64_t>& shape);
bool broadcast_shape(Call& c, std::initializer_list<const Desc*> ds, std::vector<int64_t>* out);
std::vector<int64_t> host_ints(const TF_Tensor* t, const void* data = nullptr);
// A device temporary of `like`'s shape.
Desc temp_like(Call& c, const Desc& like, TF_DataType dt);
// Reduce `x` over sorted `axes` into a new output 0 (keep_dims shapes it).
void reduce_into_output(Call& c, int op, const Desc& x, const std::vector<int64_t>& axes,
                        bool keep);

// Debug counters per TF op (udtf_debug_count, for tests): kernel calls, and the copies and pads
// its handler issued, "transposes" being copies that change the order of the dimensions.
enum Counter { kCalls, kCopies, kTransposes, kPads, kNumCounters };
void count(const TfOpInfo* op, Counter what);

// The handler families (one file each); TF_InitKernel calls every one.
void register_elementwise();
void register_reduce();
void register_matmul();
void register_shape();
void register_loss();
void register_conv();
void register_pool();
void register_norm();
// Registers a TF kernel per (TF op, dtype) whose handler and plugin kernels exist; returns how
// many. Then the variable-op library, for the plugin `api`.
int register_kernels();
void register_variable_ops(const UD_Api* api);

}  // namespace udtf
