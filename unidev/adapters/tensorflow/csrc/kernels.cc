// kernels.cc — TF_InitKernel: registers a TF kernel for every (TF op, dtype) of the generated
// table (ops.py) whose unidev kernels the plugin has, and maps each call onto those kernels.
// TF tensors become UD_Tensor descriptors whose handle is TF's device pointer; NHWC tensors
// reach the NCHW ops as permuted-stride views, so layouts never cost a copy.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>
#include <climits>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tensor.h"
#include "udtf.h"

namespace {

struct OpInfo {
  const char* name;
  int nattrs;
  const UD_Attr* defaults;
};
struct TfOpInfo {
  const char* tf;
  int handler;
  int ud;
  uint32_t dtypes;
  int ntypes;
  const char* type_attrs[3];
  int type_kinds[3];  // kernel dtype (-1), each Cast target (-2), int32+int64 (-3), kTfTypes[k]
  const char* host[2];
  int nneeds;
  int needs[8];
};

#include "optable.inc"  // generated: UdOp, kOps, Handler, kTfOps

constexpr int kMaxDims = 16;
constexpr int kNumDTypes = 5;
const TF_DataType kTfTypes[kNumDTypes] = {TF_FLOAT, TF_DOUBLE, TF_INT32, TF_INT64, TF_BOOL};
const UD_DType kUdTypes[kNumDTypes] = {
    {UD_DTYPE_FLOAT, 32, 1}, {UD_DTYPE_FLOAT, 64, 1}, {UD_DTYPE_INT, 32, 1},
    {UD_DTYPE_INT, 64, 1}, {UD_DTYPE_BOOL, 8, 1}};
const char* const kNames[kNumDTypes] = {"float32", "float64", "int32", "int64", "bool"};

UD_KernelFn g_fn[OP_COUNT][kNumDTypes];  // looked up once in TF_InitKernel

int dindex(TF_DataType t) {
  for (int i = 0; i < kNumDTypes; i++)
    if (kTfTypes[i] == t) return i;
  return -1;
}

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

const int kNhwcAsNchw[4] = {0, 3, 1, 2};  // NHWC tensor viewed as NCHW
const int kHwioAsOihw[4] = {3, 2, 0, 1};  // TF filter [R,S,C,K] viewed as unidev [K,C,R,S]

struct Attrs {
  UD_Attr a[12];
  int n;
  explicit Attrs(int op) : n(kOps[op].nattrs) {
    std::copy(kOps[op].defaults, kOps[op].defaults + n, a);
  }
  UD_Attr& at(const char* name) {
    for (int i = 0; i < n; i++)
      if (std::strcmp(a[i].name, name) == 0) return a[i];
    std::fprintf(stderr, "unidev TF adapter: op has no attribute %s\n", name);
    return a[0];
  }
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

// What a kernel reads from its node once, at construction.
struct Kern {
  const TfOpInfo* op;
  bool ta = false, tb = false, keep_dims = false, nchw = false;
  std::string padding;
  std::vector<int64_t> ksize, strides, dilations, explicit_pads;
  TF_DataType dst = TF_FLOAT;
  // A kernel instance serves one device, whose compute stream never changes: asked for once.
  std::atomic<SP_Stream> stream{nullptr};
};

// Kernels never nest on a thread: each thread reuses one list of fetched tensors and one status.
thread_local std::vector<TF_Tensor*> t_owned;

// One kernel invocation: owns the TF tensors it fetched and the status.
struct Call {
  TF_OpKernelContext* ctx;
  const Kern* k;
  TF_Status* st;
  SP_Stream sp = nullptr;
  std::vector<TF_Tensor*>& owned = t_owned;

  // The thread's status is OK between calls: a failed call resets it after reporting.
  Call(TF_OpKernelContext* c, Kern* kern) : ctx(c), k(kern) {
    static thread_local TF_Status* status = TF_NewStatus();
    st = status;
    sp = kern->stream.load(std::memory_order_relaxed);
    if (!sp) kern->stream.store(sp = TF_GetStream(ctx, st), std::memory_order_relaxed);
  }
  ~Call() {
    if (TF_GetCode(st) != TF_OK) {
      TF_OpKernelContext_Failure(ctx, st);
      TF_SetStatus(st, TF_OK, "");
    }
    release();
  }
  void release() {
    for (TF_Tensor* t : owned) TF_DeleteTensor(t);
    owned.clear();
  }
  bool ok() const { return TF_GetCode(st) == TF_OK; }
  bool fail(TF_Code code, const std::string& msg) {
    std::string m = std::string(k->op->tf) + " on " UDTF_TYPE ": " + msg;
    TF_SetStatus(st, code, m.c_str());
    return false;
  }
  TF_Tensor* keep(TF_Tensor* t) {
    if (t) owned.push_back(t);
    return t;
  }
  TF_Tensor* input(int i) {
    TF_Tensor* t = nullptr;
    TF_GetInput(ctx, i, &t, st);  // sets `t` only on success
    if (keep(t) && TF_NumDims(t) > kMaxDims) fail(TF_INVALID_ARGUMENT, "rank above 16");
    return ok() ? t : nullptr;
  }
  TF_Tensor* output(int i, TF_DataType dt, const std::vector<int64_t>& dims) {
    return output(i, dt, dims.data(), int(dims.size()));
  }
  // Output `i`; with `reuse` >= 0 in that input's buffer when TF can hand it over (same dtype
  // and size, no other reader; elementwise ops only). TF hands over only unshared buffers and each
  // fetched input holds a reference, so those are released first: callers must not use them.
  TF_Tensor* output(int i, TF_DataType dt, const int64_t* dims, int nd, int reuse = -1) {
    size_t bytes = 0;
    if (!valid_shape(dims, nd, TF_DataTypeSize(dt), &bytes)) return nullptr;
    if (reuse < 0) return keep(TF_AllocateOutput(ctx, i, dt, dims, nd, bytes, st));
    int forwarded = -1;
    release();
    return keep(TF_ForwardInputOrAllocateOutput(ctx, &reuse, 1, i, dims, nd, &forwarded, st));
  }
  TF_Tensor* temp(TF_DataType dt, const std::vector<int64_t>& dims) {
    size_t bytes = 0;
    if (!valid_shape(dims.data(), int(dims.size()), TF_DataTypeSize(dt), &bytes)) return nullptr;
    TF_AllocatorAttributes attr{TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
    return keep(TF_AllocateTemp(ctx, dt, dims.data(), int(dims.size()), &attr, st));
  }
  // TF aborts the process on a shape with a negative dimension or more than 2^63-1 elements:
  // every shape is checked here before it reaches TF's allocation.
  bool valid_shape(const int64_t* dims, int nd, size_t elem, size_t* bytes) {
    int64_t n = 1;
    if (nd > kMaxDims) return fail(TF_INVALID_ARGUMENT, "rank " + std::to_string(nd) + " above 16");
    for (int j = 0; j < nd; j++) {
      if (dims[j] < 0)
        return fail(TF_INVALID_ARGUMENT, "dimension " + std::to_string(j) + " of the result is " +
                                             std::to_string(dims[j]) + ", expected >= 0");
      if (__builtin_mul_overflow(n, dims[j], &n))
        return fail(TF_INVALID_ARGUMENT, "the result would have more than 2^63-1 elements");
    }
    if (__builtin_mul_overflow(size_t(n), elem, bytes))
      return fail(TF_INVALID_ARGUMENT, "the result would have more than 2^64-1 bytes");
    return true;
  }
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

std::vector<int64_t> dims_of(const TF_Tensor* t) {
  std::vector<int64_t> d(TF_NumDims(t));
  for (size_t i = 0; i < d.size(); i++) d[i] = TF_Dim(t, int(i));
  return d;
}

std::vector<int64_t> dims_of(const Desc& d) { return {d.shape, d.shape + d.t.ndim}; }

Desc contiguous(UD_Handle h, TF_DataType dt, const int64_t* dims, int nd, int32_t device) {
  Desc d;
  d.t.handle = h;
  d.t.device = {UD_DLPACK_EXT_DEV, device};
  d.t.ndim = nd;
  d.t.dtype = kUdTypes[std::max(dindex(dt), 0)];
  int64_t s = 1;
  for (int i = d.t.ndim - 1; i >= 0; i--) d.shape[i] = dims[i], d.strides[i] = s, s *= dims[i];
  return d;
}

Desc desc(const Call& c, const TF_Tensor* t) {
  int64_t dims[kMaxDims];  // input() and output() keep ranks within kMaxDims
  int nd = std::min(TF_NumDims(t), kMaxDims);
  for (int i = 0; i < nd; i++) dims[i] = TF_Dim(t, i);
  return contiguous(reinterpret_cast<UD_Handle>(TF_TensorData(t)), TF_TensorType(t), dims, nd,
                    c.sp->device);
}

Desc absent() {
  Desc d;
  return d.t.ndim = -1, d;
}

// `d` broadcast (numpy rules, right-aligned) to `shape`: stride 0 on broadcast dimensions.
Desc broadcast(const Desc& d, const std::vector<int64_t>& shape) {
  Desc r = d;
  int nd = int(shape.size()), off = nd - d.t.ndim;
  r.t.ndim = nd;
  for (int i = 0; i < nd; i++) {
    int j = i - off;
    r.shape[i] = shape[i];
    r.strides[i] = (j < 0 || d.shape[j] != shape[i]) ? 0 : d.strides[j];
  }
  return r;
}

bool broadcast_shape(Call& c, std::initializer_list<const Desc*> ds, std::vector<int64_t>* out) {
  size_t nd = 0;
  for (const Desc* d : ds) nd = std::max(nd, size_t(d->t.ndim));
  out->assign(nd, 1);
  for (const Desc* d : ds)
    for (int j = 0; j < d->t.ndim; j++) {
      int64_t& o = (*out)[nd - d->t.ndim + j];
      int64_t v = d->shape[j];
      if (v == o || v == 1) continue;
      if (o != 1) return c.fail(TF_INVALID_ARGUMENT, "incompatible shapes for broadcasting");
      o = v;
    }
  return true;
}

bool Call::device_input(int i, Desc* d) {
  TF_Tensor* t = input(i);
  // only declared arguments and the int32 inputs of Cast and of a loss's labels are host memory
  int h = k->op->handler;
  bool host = t && (k->op->host[0] || h == H_cast || h == H_sparse_xent) &&
              TF_IsHostMemoryInput(ctx, i, st);
  TF_Tensor* dev = host ? temp(TF_TensorType(t), dims_of(t)) : t;
  if (!dev || (host && !upload(dev, t))) return false;
  *d = desc(*this, dev);
  return true;
}

bool Call::upload(TF_Tensor* dst, const TF_Tensor* src) {
  const UD_Api* api = udtf::plugin().api;
  size_t n = TF_TensorByteSize(src);
  // The host tensor is released when this kernel returns, so wait for the copy.
  return !n || (udtf::check(api->memcpy_h2d(sp->stream, reinterpret_cast<UD_Handle>(
                                                TF_TensorData(dst)), TF_TensorData(src), n),
                            st, "memcpy_h2d") &&
                udtf::check(api->stream_synchronize(sp->stream), st, "memcpy_h2d"));
}

bool Call::run(int op, std::initializer_list<const Desc*> ins,
               std::initializer_list<const Desc*> outs, const Attrs& attrs) {
  if (!ok()) return false;
  const Desc* first = ins.size() ? *ins.begin() : *outs.begin();
  int di = -1;
  for (int i = 0; i < kNumDTypes && di < 0; i++)
    if (std::memcmp(&kUdTypes[i], &first->t.dtype, sizeof(UD_DType)) == 0) di = i;
  UD_KernelFn fn = di >= 0 ? g_fn[op][di] : nullptr;
  if (!fn)
    return fail(TF_UNIMPLEMENTED, std::string("the plugin has no kernel ") + kOps[op].name + ":" +
                                      (di >= 0 ? kNames[di] : "?"));
  for (const Desc* o : outs)
    if (o->numel() == 0) return true;  // nothing to compute
  UD_Tensor ti[12], to[4];
  int ni = 0, no = 0;
  for (const Desc* d : ins) ti[ni++] = const_cast<Desc*>(d)->get();
  for (const Desc* d : outs) to[no++] = const_cast<Desc*>(d)->get();
  UD_KernelArgs args{sizeof(UD_KernelArgs), sp->device, sp->stream, ti, ni, to, no, attrs.a,
                     attrs.n};
  UD_Error* err = fn(&args);
  return !err || udtf::check(err, st, std::string(k->op->tf) + " (unidev " + kOps[op].name + ")");
}

std::vector<int64_t> host_ints(const TF_Tensor* t, const void* data = nullptr) {
  int64_t n = TF_TensorElementCount(t);
  std::vector<int64_t> v(n);
  data = data ? data : TF_TensorData(t);
  for (int64_t i = 0; i < n; i++)
    v[i] = TF_TensorType(t) == TF_INT64 ? static_cast<const int64_t*>(data)[i]
                                        : static_cast<const int32_t*>(data)[i];
  return v;
}

bool Call::shape_arg(int i, const char* what, std::vector<int64_t>* dims) {
  TF_Tensor* t = input(i);
  if (!t) return false;
  *dims = host_ints(t);
  if (TF_NumDims(t) > 1) return fail(TF_INVALID_ARGUMENT, std::string(what) + " must be 1-D");
  if (dims->size() > kMaxDims)
    return fail(TF_INVALID_ARGUMENT, std::string(what) + " has more than 16 entries");
  for (size_t j = 0; j < dims->size(); j++)
    if ((*dims)[j] < 0)
      return fail(TF_INVALID_ARGUMENT, std::string(what) + "[" + std::to_string(j) + "] is " +
                                           std::to_string((*dims)[j]) + ", expected >= 0");
  return true;
}

bool Call::host_values(int i, const Desc& d, std::vector<int64_t>* v) {
  TF_Tensor* t = input(i);
  if (!t) return false;
  if (TF_IsHostMemoryInput(ctx, i, st)) return *v = host_ints(t), ok();
  std::vector<int64_t> raw(TF_TensorElementCount(t));  // room for int32 or int64 elements
  const UD_Api* api = udtf::plugin().api;
  if (!udtf::check(api->memcpy_d2h(sp->stream, raw.data(), d.t.handle, TF_TensorByteSize(t)), st,
                   "memcpy_d2h") ||
      !udtf::check(api->stream_synchronize(sp->stream), st, "memcpy_d2h"))
    return false;
  *v = host_ints(t, raw.data());
  return true;
}

// ---- elementwise ------------------------------------------------------------------------------

void h_unary(Call& c) {
  TF_Tensor* x = c.input(0);
  Desc dx = x ? desc(c, x) : absent();
  bool rowwise = c.k->op->ud == OP_softmax || c.k->op->ud == OP_log_softmax;  // never in place
  TF_Tensor* y = x ? c.output(0, c.out_type(), dx.shape, dx.t.ndim, rowwise ? -1 : 0) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(c.k->op->ud, {&dx}, {&dy});
}

// eager tf.constant: TF's own kernel would take the input in device memory, copied through
// TF's EventMgr (a callback on another thread per copy); here the host input is copied directly.
void h_eager_const(Call& c) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* y = x ? c.output(0, TF_TensorType(x), dims_of(x)) : nullptr;
  if (y) c.upload(y, x);
}

void h_forward(Call& c) {
  if (TF_Tensor* x = c.input(0)) TF_SetOutput(c.ctx, 0, x, c.st);
}

void h_like(Call& c, double value) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* y = x ? c.output(0, TF_TensorType(x), dims_of(x)) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  if (value == 0) c.run(OP_zero, {}, {&dy});
  else c.run(OP_fill, {}, {&dy}, Attrs(OP_fill).f("value", value));
}

// Inputs 0..n-1 broadcast together; the output gets the broadcast shape, in the buffer of input
// `reuse` if TF hands it over (an elementwise op may write its first input; conformance checks it).
bool broadcast_inputs(Call& c, int n, Desc* ds, Desc* out, int reuse = -1) {
  static thread_local std::vector<int64_t> shape;
  for (int i = 0; i < n; i++)
    if (!c.device_input(i, &ds[i])) return false;
  if (!broadcast_shape(c, {&ds[0], &ds[n > 1 ? 1 : 0], &ds[n - 1]}, &shape)) return false;
  for (int i = 0; i < n; i++)
    if (ds[i].t.ndim != int(shape.size()) || !std::equal(shape.begin(), shape.end(), ds[i].shape))
      ds[i] = broadcast(ds[i], shape);
  TF_DataType dt = c.out_type();
  TF_Tensor* y = c.output(0, dt, shape.data(), int(shape.size()), reuse);
  if (y)
    *out = contiguous(reinterpret_cast<UD_Handle>(TF_TensorData(y)), dt, shape.data(),
                      int(shape.size()), c.sp->device);
  if (y && reuse >= 0 && ds[reuse].t.handle == out->t.handle) ds[reuse] = *out;  // exact alias
  return y != nullptr;
}

void h_binary(Call& c, bool reversed) {
  Desc in[2], out;
  if (broadcast_inputs(c, 2, in, &out, reversed ? 1 : 0))
    c.run(c.k->op->ud, {&in[reversed], &in[!reversed]}, {&out});
}

Desc temp_like(Call& c, const Desc& like, TF_DataType dt) {
  TF_Tensor* t = c.temp(dt, dims_of(like));
  return t ? desc(c, t) : absent();
}

// A device scalar holding `value`, broadcast to `like`'s shape.
Desc constant(Call& c, double value, const Desc& like) {
  TF_Tensor* t = c.temp(c.out_type(), {});
  if (!t) return absent();
  Desc d = desc(c, t);
  c.run(OP_fill, {}, {&d}, Attrs(OP_fill).f("value", value));
  return broadcast(d, dims_of(like));
}

void h_squared_difference(Call& c) {
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc t = temp_like(c, out, c.out_type());
  if (c.run(OP_sub, {&in[0], &in[1]}, {&t})) c.run(OP_square, {&t}, {&out});
}

void h_rsqrt_grad(Call& c) {  // dy * -0.5 * y^3
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc a = temp_like(c, out, c.out_type()), b = temp_like(c, out, c.out_type());
  Desc k = constant(c, -0.5, out);
  c.run(OP_mul, {&in[0], &in[0]}, {&a}) && c.run(OP_mul, {&a, &in[0]}, {&b}) &&
      c.run(OP_mul, {&b, &in[1]}, {&a}) && c.run(OP_mul, {&a, &k}, {&out});
}

void h_sqrt_grad(Call& c) {  // dy * 0.5 / y
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc a = temp_like(c, out, c.out_type()), k = constant(c, 0.5, out);
  c.run(OP_div, {&in[1], &in[0]}, {&a}) && c.run(OP_mul, {&a, &k}, {&out});
}

void h_div_no_nan(Call& c) {
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc q = temp_like(c, out, c.out_type()), zero = constant(c, 0.0, out);
  Desc m = temp_like(c, out, TF_BOOL);
  c.run(OP_div, {&in[0], &in[1]}, {&q}) && c.run(OP_eq, {&in[1], &zero}, {&m}) &&
      c.run(OP_where, {&zero, &q, &m}, {&out});
}

void h_select(Call& c) {
  Desc in[3], out;
  if (broadcast_inputs(c, 3, in, &out)) c.run(OP_where, {&in[1], &in[2], &in[0]}, {&out});
}

void h_add_n(Call& c) {
  int n = TF_NumInputs(c.ctx);
  Desc x0, x1;
  if (!c.device_input(0, &x0)) return;
  TF_Tensor* y = c.output(0, c.out_type(), dims_of(x0));
  if (!y) return;
  Desc out = desc(c, y);
  if (n == 1) return void(c.run(OP_copy, {&x0}, {&out}));
  // Partial sums alternate between two temporaries: kernels never write an input.
  Desc acc[2] = {temp_like(c, out, c.out_type()),
                 n > 2 ? temp_like(c, out, c.out_type()) : absent()};
  const Desc* sum = &x0;
  for (int i = 1; i < n && c.ok(); i++) {
    if (!c.device_input(i, &x1)) return;
    Desc* dst = i == n - 1 ? &out : &acc[i % 2];
    c.run(OP_add, {sum, &x1}, {dst});
    sum = dst;
  }
}

void h_cast(Call& c) {
  Desc x;
  TF_Tensor* y = c.device_input(0, &x) ? c.output(0, c.k->dst, dims_of(x)) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(OP_cast, {&x}, {&dy}, Attrs(OP_cast).s("dtype", kNames[dindex(c.k->dst)]));
}

// ---- reductions -------------------------------------------------------------------------------

bool axes_of(Call& c, const Desc& x, const TF_Tensor* t, std::vector<int64_t>* axes) {
  int nd = x.t.ndim;
  for (int64_t a : host_ints(t)) {
    if (a < -nd || a >= std::max(nd, 1))
      return c.fail(TF_INVALID_ARGUMENT, "axis " + std::to_string(a) + " out of range for rank " +
                                             std::to_string(nd));
    if (nd) axes->push_back((a + nd) % nd);
  }
  std::sort(axes->begin(), axes->end());
  axes->erase(std::unique(axes->begin(), axes->end()), axes->end());
  return true;
}

// Reduce `x` over sorted `axes` into a new output 0 (keep_dims shapes it).
void reduce_into_output(Call& c, int op, const Desc& x, const std::vector<int64_t>& axes,
                        bool keep) {
  std::vector<int64_t> dims;
  for (int i = 0; i < x.t.ndim; i++) {
    bool r = std::binary_search(axes.begin(), axes.end(), i);
    if (!r || keep) dims.push_back(r ? 1 : x.shape[i]);
  }
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dy = desc(c, y);
  // TF: no axes means no reduction; unidev: empty axes means all
  if (axes.empty()) return void(c.run(OP_copy, {&x}, {&dy}));
  c.run(op, {&x}, {&dy},
        Attrs(op).ints("axes", axes.data(), int64_t(axes.size())).b("keepdims", keep));
}

void h_reduce(Call& c, bool single) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* ax = x ? c.input(1) : nullptr;
  if (!ax) return;
  Desc dx = desc(c, x);
  std::vector<int64_t> axes;
  if (!axes_of(c, dx, ax, &axes)) return;
  if (single && axes.size() != 1) return void(c.fail(TF_INVALID_ARGUMENT, "expected one axis"));
  reduce_into_output(c, c.k->op->ud, dx, axes, c.k->keep_dims);
}

int channel_axis(const Kern* k, int nd) { return k->nchw ? 1 : nd - 1; }

void h_bias_add(Call& c) {
  Desc x, bias;
  if (!c.device_input(0, &x) || !c.device_input(1, &bias)) return;
  int ch = channel_axis(c.k, x.t.ndim);
  if (x.t.ndim < 2 || bias.t.ndim != 1 || bias.shape[0] != x.shape[ch])
    return void(c.fail(TF_INVALID_ARGUMENT, "bias must be 1-D and match value's channels"));
  Desc b = broadcast(bias, dims_of(x));
  for (int i = 0; i < x.t.ndim; i++) b.strides[i] = i == ch ? 1 : 0;
  TF_Tensor* y = c.output(0, c.out_type(), x.shape, x.t.ndim, 0);  // in place when TF allows
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(OP_add, {&x, &b}, {&dy});
}

void h_bias_add_grad(Call& c) {
  Desc g;
  if (!c.device_input(0, &g)) return;
  std::vector<int64_t> axes;
  for (int i = 0; i < g.t.ndim; i++)
    if (i != channel_axis(c.k, g.t.ndim)) axes.push_back(i);
  reduce_into_output(c, OP_sum, g, axes, false);
}

// ---- matrix products --------------------------------------------------------------------------

void h_matmul(Call& c) {
  Desc a, b;
  if (!c.device_input(0, &a) || !c.device_input(1, &b)) return;
  if (a.t.ndim < 2 || b.t.ndim < 2)
    return void(c.fail(TF_INVALID_ARGUMENT, "inputs must be at least 2-D"));
  for (auto [d, t] : {std::pair<Desc*, bool>{&a, c.k->ta}, {&b, c.k->tb}})
    if (t) {
      std::swap(d->shape[d->t.ndim - 1], d->shape[d->t.ndim - 2]);
      std::swap(d->strides[d->t.ndim - 1], d->strides[d->t.ndim - 2]);
    }
  int64_t m = a.shape[a.t.ndim - 2], k = a.shape[a.t.ndim - 1], n = b.shape[b.t.ndim - 1];
  if (b.shape[b.t.ndim - 2] != k)
    return void(c.fail(TF_INVALID_ARGUMENT, "matrix size-incompatible: inner dimensions " +
                                                std::to_string(k) + " and " +
                                                std::to_string(b.shape[b.t.ndim - 2])));
  Desc ba = a, bb = b;  // batch dims only, for broadcasting
  ba.t.ndim -= 2;
  bb.t.ndim -= 2;
  std::vector<int64_t> dims;
  if (!broadcast_shape(c, {&ba, &bb}, &dims)) return;
  Desc va = broadcast(ba, dims), vb = broadcast(bb, dims);
  int nd = va.t.ndim = vb.t.ndim = int32_t(dims.size()) + 2;
  va.shape[nd - 2] = m, va.shape[nd - 1] = k, vb.shape[nd - 2] = k, vb.shape[nd - 1] = n;
  va.strides[nd - 2] = a.strides[a.t.ndim - 2], va.strides[nd - 1] = a.strides[a.t.ndim - 1];
  vb.strides[nd - 2] = b.strides[b.t.ndim - 2], vb.strides[nd - 1] = b.strides[b.t.ndim - 1];
  dims.push_back(m);
  dims.push_back(n);
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dy = desc(c, y);
  if (k == 0) c.run(OP_zero, {}, {&dy});
  else c.run(OP_matmul, {&va, &vb}, {&dy});
}

// ---- shape ops as strided copies --------------------------------------------------------------

void copy_to_new_output(Call& c, const Desc& view) {
  if (view.t.ndim > kMaxDims) return void(c.fail(TF_INVALID_ARGUMENT, "rank above 16"));
  TF_Tensor* y = c.output(0, c.out_type(), dims_of(view));
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(OP_copy, {&view}, {&dy});
}

void h_broadcast_to(Call& c) {
  Desc x;
  std::vector<int64_t> shape, check;
  if (!c.device_input(0, &x) || !c.shape_arg(1, "shape", &shape)) return;
  Desc target = contiguous(0, TF_FLOAT, shape.data(), int(shape.size()), 0);
  if (!broadcast_shape(c, {&x, &target}, &check)) return;
  if (check != shape)
    return void(c.fail(TF_INVALID_ARGUMENT, "input is not broadcastable to the requested shape"));
  copy_to_new_output(c, broadcast(x, shape));
}

void h_fill(Call& c) {
  std::vector<int64_t> dims;
  Desc v;
  if (!c.shape_arg(0, "dims", &dims) || !c.device_input(1, &v)) return;
  if (v.t.ndim != 0) return void(c.fail(TF_INVALID_ARGUMENT, "value must be a scalar"));
  copy_to_new_output(c, broadcast(v, dims));
}

void h_tile(Call& c) {
  Desc x;
  std::vector<int64_t> m, dims;
  if (!c.device_input(0, &x) || !c.shape_arg(1, "multiples", &m)) return;
  if (int(m.size()) != x.t.ndim || 2 * x.t.ndim > kMaxDims)
    return void(c.fail(TF_INVALID_ARGUMENT, "multiples needs one entry per dimension (rank <= 8)"));
  // Output viewed as [m0, d0, m1, d1, ...]: the input repeats with stride 0 over each m_i.
  Desc src = x;
  src.t.ndim = 2 * x.t.ndim;
  for (int i = 0; i < x.t.ndim; i++) {
    src.shape[2 * i] = m[i], src.strides[2 * i] = 0;
    src.shape[2 * i + 1] = x.shape[i], src.strides[2 * i + 1] = x.strides[i];
    dims.push_back(0);
    if (__builtin_mul_overflow(m[i], x.shape[i], &dims.back()))
      return void(c.fail(TF_INVALID_ARGUMENT, "multiples overflow the result's dimensions"));
  }
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dst = contiguous(reinterpret_cast<UD_Handle>(TF_TensorData(y)), c.out_type(), src.shape,
                        src.t.ndim, c.sp->device);
  c.run(OP_copy, {&src}, {&dst});
}

void h_transpose(Call& c) {
  Desc x;
  TF_Tensor* pt = c.device_input(0, &x) ? c.input(1) : nullptr;
  if (!pt) return;
  std::vector<int64_t> p = host_ints(pt);
  std::vector<int> perm(p.begin(), p.end()), seen(x.t.ndim, 0);
  bool valid = int(p.size()) == x.t.ndim;
  for (int v : perm) valid = valid && v >= 0 && v < x.t.ndim && !seen[v]++;
  if (!valid) return void(c.fail(TF_INVALID_ARGUMENT, "perm is not a permutation of the dims"));
  copy_to_new_output(c, x.permuted(perm.data()));
}

// ---- losses -----------------------------------------------------------------------------------

void h_sparse_xent(Call& c) {
  Desc x, labels;
  if (!c.device_input(0, &x) || !c.device_input(1, &labels)) return;
  if (x.t.ndim != 2 || labels.t.ndim != 1 || labels.shape[0] != x.shape[0])
    return void(c.fail(TF_INVALID_ARGUMENT, "logits must be [batch, classes], labels [batch]"));
  // Labels are checked here: a bad label fails this op, not a later synchronization. int64 labels
  // live in device memory and are read back directly (TF's own copy to a host-memory argument
  // goes through its EventMgr threads, ~100 us a step); int32 ones are in host memory.
  std::vector<int64_t> host;
  if (!c.host_values(1, labels, &host)) return;
  for (int64_t v : host)
    if (v < 0 || v >= x.shape[1])
      return void(c.fail(TF_INVALID_ARGUMENT, "Received a label value of " + std::to_string(v) +
                                                  " which is outside the valid range of [0, " +
                                                  std::to_string(x.shape[1]) + ")"));
  TF_DataType dt = c.out_type();
  TF_Tensor* loss = c.output(0, dt, {x.shape[0]});
  TF_Tensor* back = loss ? c.output(1, dt, {x.shape[0], x.shape[1]}) : nullptr;
  if (!back) return;
  Desc dl = desc(c, loss), db = desc(c, back);
  Desc logp = temp_like(c, x, dt), p = temp_like(c, x, dt), onehot = temp_like(c, x, dt);
  Desc ones = temp_like(c, dl, dt), total = absent(), none = absent();
  if (TF_Tensor* t = c.temp(dt, {})) total = desc(c, t);
  const int64_t no_ignore = INT64_MIN;  // TF has no ignored label: every label must be valid
  Attrs nll = Attrs(OP_nll_loss).s("reduction", "none").i("ignore_index", no_ignore);
  Attrs nllb = Attrs(OP_nll_loss_backward).s("reduction", "none").i("ignore_index", no_ignore);
  // loss = -log_softmax(x)[label]; backprop = softmax(x) - onehot(label)
  c.run(OP_log_softmax, {&x}, {&logp}) &&
      c.run(OP_nll_loss, {&logp, &labels, &none}, {&dl, &total}, nll) &&
      c.run(OP_fill, {}, {&ones}, Attrs(OP_fill).f("value", 1.0)) &&
      c.run(OP_nll_loss_backward, {&ones, &logp, &labels, &none, &total}, {&onehot}, nllb) &&
      c.run(OP_exp, {&logp}, {&p}) && c.run(OP_add, {&p, &onehot}, {&db});
}

// ---- convolution and pooling (NHWC handled as permuted NCHW views) ----------------------------

// TF CPU's checks of the window attributes, with its error codes, so the device refuses what TF
// CPU refuses and never ignores a batch or depth entry. Where TF CPU's refusal is only a limit
// of its CPU kernels (NCHW, dilated gradients), the device computes, as TF's GPU kernels do.
bool check_padding(Call& c, int cd) {
  const std::vector<int64_t>& p = c.k->explicit_pads;
  if (c.k->padding != "EXPLICIT")
    return p.empty() || c.fail(TF_INVALID_ARGUMENT, "explicit_paddings attribute must be empty "
                                                    "if the padding attribute is not EXPLICIT");
  if (p.size() != 8)
    return c.fail(TF_INVALID_ARGUMENT, "explicit_paddings attribute must contain 8 values, but "
                                       "got: " + std::to_string(p.size()));
  for (int64_t v : p)
    if (v < 0) return c.fail(TF_INVALID_ARGUMENT, "All elements of explicit_paddings must be "
                                                  "nonnegative, got " + std::to_string(v));
  if (p[0] || p[1] || p[2 * cd] || p[2 * cd + 1])
    return c.fail(TF_INVALID_ARGUMENT, "Nonzero explicit padding in the batch or depth "
                                       "dimensions is not supported");
  return true;
}

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool check_conv_attrs(Call& c) {
  const Kern* k = c.k;
  int cd = k->nchw ? 1 : 3, h = k->nchw ? 2 : 1;
  // TF CPU's Conv2DBackpropFilter reports these as invalid arguments, the others as unimplemented
  TF_Code unsupported = k->op->handler == H_conv2d_bf ? TF_INVALID_ARGUMENT : TF_UNIMPLEMENTED;
  const std::vector<int64_t>&s = k->strides, &d = k->dilations;
  if (s.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window strides field must specify 4 dimensions");
  if (d.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window dilations field must specify 4 dimensions");
  if (s[0] != 1 || s[cd] != 1)
    return c.fail(unsupported, "strides " + list_str(s) + ": the batch and depth entries must "
                               "be 1 (strides there are not supported)");
  if (s[h] < 1 || s[h + 1] < 1)
    return c.fail(TF_INVALID_ARGUMENT, "strides " + list_str(s) + ": row and column strides "
                                       "should be larger than 0");
  if (d[0] != 1 || d[cd] != 1)
    return c.fail(unsupported, "dilations " + list_str(d) + ": the batch and depth entries must "
                               "be 1 (dilations there are not supported)");
  if (d[h] < 1 || d[h + 1] < 1)
    return c.fail(TF_INVALID_ARGUMENT, "dilations " + list_str(d) + ": dilated rates should be "
                                       "larger than 0");
  return check_padding(c, cd);
}

// `depth`: the input's channels. TF's rules for pooling over the depth dimension are TF's own
// (MaxPool's depthwise pooling runs only on TF's CPU, as on its GPU: refused here).
bool check_pool_attrs(Call& c, int64_t depth) {
  const Kern* k = c.k;
  int cd = k->nchw ? 1 : 3, h = k->nchw ? 2 : 1, op = k->op->ud;
  const std::vector<int64_t>&ks = k->ksize, &s = k->strides;
  if (ks.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window ksize field must specify 4 dimensions");
  if (s.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window stride field must specify 4 dimensions");
  if (ks[0] != 1 || s[0] != 1)
    return c.fail(TF_UNIMPLEMENTED, "ksize " + list_str(ks) + ", strides " + list_str(s) +
                                        ": pooling is not yet supported on the batch dimension");
  for (int i = 0; i < 4; i++) {
    if (ks[i] < 1)
      return c.fail(TF_INVALID_ARGUMENT, "ksize " + list_str(ks) + ": every entry must be > 0");
    if (s[i] < 1)
      return c.fail(TF_INVALID_ARGUMENT, "strides " + list_str(s) + ": every entry must be > 0");
  }
  bool spatial = ks[h] != 1 || ks[h + 1] != 1;
  if (op == OP_max_pool2d_backward && (ks[cd] != 1 || s[cd] != 1))
    return c.fail(TF_UNIMPLEMENTED, "MaxPoolingGrad is not yet supported on the depth dimension");
  if (op == OP_avg_pool2d_backward && ks[cd] != 1)
    return c.fail(TF_UNIMPLEMENTED, "non-spatial pooling (ksize " + list_str(ks) +
                                        ") is not yet supported");
  if (ks[cd] != 1) {
    if (spatial)
      return c.fail(TF_UNIMPLEMENTED, "ksize " + list_str(ks) + ": pooling supports exactly one "
                                      "of pooling across depth or across width/height");
    if (depth % ks[cd])
      return c.fail(TF_UNIMPLEMENTED, "depthwise pooling requires the depth window to evenly "
                                      "divide the input depth " + std::to_string(depth));
    if (s[cd] != ks[cd])
      return c.fail(TF_UNIMPLEMENTED, "depthwise pooling requires the depth window to equal "
                                      "the depth stride");
    return c.fail(TF_UNIMPLEMENTED, op == OP_avg_pool2d
                                        ? "non-spatial pooling is not yet supported"
                                        : "depthwise max pooling is only implemented by TF's CPU");
  }
  if (!check_padding(c, cd)) return false;
  const std::vector<int64_t>& p = k->explicit_pads;
  for (int i = h; i < h + 2 && k->padding == "EXPLICIT"; i++)
    if (p[2 * i] >= ks[i] || p[2 * i + 1] >= ks[i])
      return c.fail(TF_INVALID_ARGUMENT, "explicit_paddings " + list_str(k->explicit_pads) +
                                             ": padding must be smaller than the window size");
  return true;
}

// A tensor's shape (TF layout) against what the op's other arguments imply.
bool expect_shape(Call& c, const char* what, const Desc& d, const std::vector<int64_t>& want) {
  std::vector<int64_t> got(d.shape, d.shape + d.t.ndim);
  return got == want || c.fail(TF_INVALID_ARGUMENT, std::string("Expected ") + what +
                                                        " shape to be " + list_str(want) +
                                                        ", but got " + list_str(got));
}

struct Window {
  int64_t before[2], after[2], stride[2], dilation[2], out[2];
};

// TF's padding rules for the spatial dims of an NCHW-ordered shape.
bool window(Call& c, const int64_t* in, const int64_t* kernel, Window* w) {
  const Kern* k = c.k;
  int h = k->nchw ? 2 : 1;
  for (int i = 0; i < 2; i++) {
    w->stride[i] = k->strides.size() == 4 ? k->strides[h + i] : 1;
    w->dilation[i] = k->dilations.size() == 4 ? k->dilations[h + i] : 1;
    int64_t ext = (kernel[i] - 1) * w->dilation[i] + 1, size = in[2 + i];
    if (w->stride[i] < 1) return c.fail(TF_INVALID_ARGUMENT, "strides must be positive");
    w->before[i] = w->after[i] = 0;
    if (k->padding == "SAME") {
      int64_t out = (size + w->stride[i] - 1) / w->stride[i];
      int64_t total = std::max<int64_t>((out - 1) * w->stride[i] + ext - size, 0);
      w->before[i] = total / 2, w->after[i] = total - total / 2;
    } else if (k->padding == "EXPLICIT" && k->explicit_pads.size() == 8) {
      w->before[i] = k->explicit_pads[2 * (h + i)], w->after[i] = k->explicit_pads[2 * (h + i) + 1];
    }
    if (size + w->before[i] + w->after[i] < ext)
      return c.fail(TF_INVALID_ARGUMENT, "window larger than the padded input");
    w->out[i] = (size + w->before[i] + w->after[i] - ext) / w->stride[i] + 1;
  }
  return true;
}

bool symmetric(const Window& w) { return w.before[0] == w.after[0] && w.before[1] == w.after[1]; }

// A tensor of this kernel's data layout as an NCHW view.
Desc nchw(const Kern* k, const Desc& d) { return k->nchw ? d : d.permuted(kNhwcAsNchw); }
std::vector<int64_t> layout_dims(const Kern* k, int64_t n, int64_t ch, int64_t h, int64_t w) {
  return k->nchw ? std::vector<int64_t>{n, ch, h, w} : std::vector<int64_t>{n, h, w, ch};
}

// x zero-padded (asymmetrically) into a contiguous NCHW temporary.
Desc padded(Call& c, const Desc& x, const Window& w) {
  TF_Tensor* t = c.temp(c.out_type(), {x.shape[0], x.shape[1],
                                       x.shape[2] + w.before[0] + w.after[0],
                                       x.shape[3] + w.before[1] + w.after[1]});
  if (!t) return absent();
  Desc out = desc(c, t);
  int64_t pads[8] = {0, 0, 0, 0, w.before[0], w.after[0], w.before[1], w.after[1]};
  c.run(OP_pad_constant, {&x}, {&out}, Attrs(OP_pad_constant).ints("pads", pads, 8));
  return out;
}

// Convolution attributes; `pad` null means the input comes pre-padded.
Attrs conv_attrs(int op, Window& w, const int64_t* pad, int64_t groups) {
  static const int64_t zero[2] = {0, 0};
  return Attrs(op).ints("stride", w.stride, 2).ints("padding", pad ? pad : zero, 2)
      .ints("dilation", w.dilation, 2).i("groups", groups);
}

// The input depth a multiple of the filter's, out_backprop the shape the forward gives.
bool conv_shapes(Call& c, const Desc& x, const Desc& f, const Desc& grad, Window* w) {
  int64_t ks[2] = {f.shape[2], f.shape[3]};
  if (f.shape[1] < 1 || x.shape[1] % f.shape[1])
    return c.fail(TF_INVALID_ARGUMENT, "input depth " + std::to_string(x.shape[1]) +
                                           " must be evenly divisible by filter depth " +
                                           std::to_string(f.shape[1]));
  return window(c, x.shape, ks, w) &&
         (grad.t.ndim < 0 ||
          expect_shape(c, "out_backprop", grad,
                       layout_dims(c.k, x.shape[0], f.shape[0], w->out[0], w->out[1])));
}

void h_conv2d(Call& c) {
  Desc xin, fin;
  if (!c.device_input(0, &xin) || !c.device_input(1, &fin)) return;
  if (!check_conv_attrs(c)) return;
  if (xin.t.ndim != 4 || fin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input and filter must be 4-D"));
  Desc x = nchw(c.k, xin), f = fin.permuted(kHwioAsOihw), none = absent();
  Window w;
  if (!conv_shapes(c, x, f, none, &w)) return;
  TF_Tensor* y = c.output(0, c.out_type(), layout_dims(c.k, x.shape[0], f.shape[0], w.out[0],
                                                      w.out[1]));
  if (!y) return;
  Desc dy = nchw(c.k, desc(c, y)), src = symmetric(w) ? x : padded(c, x, w);
  c.run(OP_conv2d, {&src, &f, &none}, {&dy},
        conv_attrs(OP_conv2d, w, symmetric(w) ? w.before : nullptr, x.shape[1] / f.shape[1]));
}

void h_conv2d_bi(Call& c) {
  std::vector<int64_t> xdims;
  Desc fin, gin;
  if (!c.shape_arg(0, "input_sizes", &xdims) || !c.device_input(1, &fin) ||
      !c.device_input(2, &gin) || !check_conv_attrs(c))
    return;
  if (xdims.size() != 4 || fin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input_sizes, filter and out_backprop must be 4-D"));
  Desc f = fin.permuted(kHwioAsOihw);
  Window w;
  if (!conv_shapes(c, nchw(c.k, contiguous(0, c.out_type(), xdims.data(), 4, 0)), f, gin, &w))
    return;
  TF_Tensor* gx = c.output(0, c.out_type(), xdims);
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx)), g = nchw(c.k, gin);
  int64_t groups = dx.shape[1] / f.shape[1];
  int64_t shape[4] = {dx.shape[0], dx.shape[1], dx.shape[2], dx.shape[3]};
  if (symmetric(w))
    return void(c.run(OP_conv2d_backward_input, {&g, &f}, {&dx},
                      conv_attrs(OP_conv2d_backward_input, w, w.before, groups)
                          .ints("input_shape", shape, 4)));
  // Asymmetric padding: the gradient of the padded input, then its interior.
  shape[2] += w.before[0] + w.after[0];
  shape[3] += w.before[1] + w.after[1];
  TF_Tensor* t = c.temp(c.out_type(), std::vector<int64_t>(shape, shape + 4));
  if (!t) return;
  Desc gp = desc(c, t), inner = gp;
  if (!c.run(OP_conv2d_backward_input, {&g, &f}, {&gp},
             conv_attrs(OP_conv2d_backward_input, w, nullptr, groups)
                 .ints("input_shape", shape, 4)))
    return;
  for (int i = 0; i < 4; i++) inner.shape[i] = dx.shape[i];
  inner.t.byte_offset = uint64_t(w.before[0] * gp.strides[2] + w.before[1] * gp.strides[3]) *
                        TF_DataTypeSize(c.out_type());
  c.run(OP_copy, {&inner}, {&dx});
}

void h_conv2d_bf(Call& c) {
  Desc xin, gin;
  std::vector<int64_t> fdims;
  if (!c.device_input(0, &xin) || !c.shape_arg(1, "filter_sizes", &fdims) ||
      !c.device_input(2, &gin) || !check_conv_attrs(c))
    return;
  if (fdims.size() != 4 || xin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input, filter_sizes and out_backprop must be 4-D"));
  Desc x = nchw(c.k, xin), g = nchw(c.k, gin);
  Window w;
  if (!conv_shapes(c, x, contiguous(0, c.out_type(), fdims.data(), 4, 0).permuted(kHwioAsOihw),
                   gin, &w))
    return;
  TF_Tensor* gf = c.output(0, c.out_type(), fdims);
  if (!gf) return;
  Desc df = desc(c, gf).permuted(kHwioAsOihw);
  int64_t groups = x.shape[1] / df.shape[1];
  int64_t wshape[4] = {df.shape[0], df.shape[1], df.shape[2], df.shape[3]};
  Desc src = symmetric(w) ? x : padded(c, x, w);
  c.run(OP_conv2d_backward_weight, {&g, &src}, {&df},
        conv_attrs(OP_conv2d_backward_weight, w, symmetric(w) ? w.before : nullptr, groups)
            .ints("weight_shape", wshape, 4));
}

// Pool attributes; asymmetric SAME padding becomes padding=before with ceil_mode when that
// gives TF's output size (padded cells never count: max pads -inf, avg excludes padding).
bool pool_attrs(Call& c, int op, const Desc& x, Window* w, Attrs* a, int64_t* buf) {
  int h = c.k->nchw ? 2 : 1;
  if (!check_pool_attrs(c, x.shape[1])) return false;
  int64_t ks[2] = {c.k->ksize[h], c.k->ksize[h + 1]};
  if (!window(c, x.shape, ks, w)) return false;
  bool ceil = !symmetric(*w);
  for (int i = 0; i < 2; i++) {
    int64_t in = x.shape[2 + i], p = w->before[i], s = w->stride[i];
    int64_t out = ceil ? (in + 2 * p - ks[i] + s - 1) / s + 1 : (in + 2 * p - ks[i]) / s + 1;
    if (ceil && (out - 1) * s >= in + p) out--;
    if (out != w->out[i]) return c.fail(TF_UNIMPLEMENTED, "this asymmetric SAME padding");
  }
  buf[0] = ks[0], buf[1] = ks[1], buf[2] = w->stride[0], buf[3] = w->stride[1];
  buf[4] = w->before[0], buf[5] = w->before[1];
  a->ints("kernel_size", buf, 2).ints("stride", buf + 2, 2).ints("padding", buf + 4, 2)
      .b("ceil_mode", ceil);
  if (op == OP_avg_pool2d || op == OP_avg_pool2d_backward) a->b("count_include_pad", false);
  return true;
}

void h_pool(Call& c) {
  Desc xin;
  if (!c.device_input(0, &xin)) return;
  if (xin.t.ndim != 4) return void(c.fail(TF_INVALID_ARGUMENT, "input must be 4-D"));
  Desc x = nchw(c.k, xin);
  Window w;
  Attrs a(c.k->op->ud);
  int64_t buf[6];
  if (!pool_attrs(c, c.k->op->ud, x, &w, &a, buf)) return;
  TF_Tensor* y = c.output(0, c.out_type(), layout_dims(c.k, x.shape[0], x.shape[1], w.out[0],
                                                      w.out[1]));
  if (!y) return;
  Desc dy = nchw(c.k, desc(c, y));
  if (c.k->op->ud == OP_avg_pool2d) return void(c.run(OP_avg_pool2d, {&x}, {&dy}, a));
  Desc idx = temp_like(c, dy, TF_INT64);
  c.run(OP_max_pool2d, {&x}, {&dy, &idx}, a);
}

void h_max_pool_grad(Call& c) {
  Desc xin, gin;
  if (!c.device_input(0, &xin) || !c.device_input(2, &gin)) return;
  if (xin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input and grad must be 4-D"));
  Desc x = nchw(c.k, xin), g = nchw(c.k, gin);
  Window w;
  Attrs a(OP_max_pool2d);
  int64_t buf[6];
  if (!pool_attrs(c, OP_max_pool2d, x, &w, &a, buf)) return;
  std::vector<int64_t> out = layout_dims(c.k, x.shape[0], x.shape[1], w.out[0], w.out[1]);
  TF_Tensor* y0 = c.input(1);
  if (!y0 || !expect_shape(c, "orig_output", desc(c, y0), out) ||
      !expect_shape(c, "grad", gin, out))
    return;
  TF_Tensor* gx = c.output(0, c.out_type(), dims_of(xin));
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx));
  // TF passes no argmax: recompute it with the forward kernel.
  Desc y = temp_like(c, g, c.out_type()), idx = temp_like(c, g, TF_INT64);
  Attrs b(OP_max_pool2d_backward);
  std::copy(a.a, a.a + a.n, b.a);
  c.run(OP_max_pool2d, {&x}, {&y, &idx}, a) &&
      c.run(OP_max_pool2d_backward, {&g, &x, &idx}, {&dx}, b);
}

void h_avg_pool_grad(Call& c) {
  std::vector<int64_t> xdims;
  Desc gin;
  if (!c.shape_arg(0, "orig_input_shape", &xdims) || !c.device_input(1, &gin)) return;
  if (xdims.size() != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "orig_input_shape and grad must be 4-D"));
  Desc x = nchw(c.k, contiguous(0, c.out_type(), xdims.data(), 4, 0)), g = nchw(c.k, gin);
  Window w;
  Attrs a(OP_avg_pool2d_backward);
  int64_t buf[6];
  if (!pool_attrs(c, OP_avg_pool2d_backward, x, &w, &a, buf) ||
      !expect_shape(c, "grad", gin, layout_dims(c.k, x.shape[0], x.shape[1], w.out[0], w.out[1])))
    return;
  TF_Tensor* gx = c.output(0, c.out_type(), xdims);
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx));
  // The op set's backward takes x only for its shape: a stride-0 view of grad stands in for it.
  x = dx;
  x.t.handle = g.t.handle;
  x.t.byte_offset = g.t.byte_offset;
  for (int i = 0; i < 4; i++) x.strides[i] = 0;
  c.run(OP_avg_pool2d_backward, {&g, &x}, {&dx}, a);
}

// ---- registration -----------------------------------------------------------------------------

std::vector<int64_t> list_attr(TF_OpKernelConstruction* ctx, const char* name, TF_Status* st) {
  if (!TF_OpKernelConstruction_HasAttr(ctx, name, st)) return {};
  int32_t n = 0, total = 0;
  TF_OpKernelConstruction_GetAttrSize(ctx, name, &n, &total, st);
  std::vector<int64_t> v(std::max(n, 0));
  if (n > 0) TF_OpKernelConstruction_GetAttrInt64List(ctx, name, v.data(), n, st);
  return v;
}

bool bool_attr(TF_OpKernelConstruction* ctx, const char* name, TF_Status* st) {
  TF_Bool v = 0;
  if (TF_OpKernelConstruction_HasAttr(ctx, name, st))
    TF_OpKernelConstruction_GetAttrBool(ctx, name, &v, st);
  return v;
}

std::string string_attr(TF_OpKernelConstruction* ctx, const char* name, TF_Status* st) {
  if (!TF_OpKernelConstruction_HasAttr(ctx, name, st)) return "";
  char buf[64] = {};
  TF_OpKernelConstruction_GetAttrString(ctx, name, buf, sizeof buf - 1, st);
  return buf;
}

template <int I>
void* create(TF_OpKernelConstruction* ctx) {
  auto* k = new Kern{&kTfOps[I]};
  TF_Status* st = TF_NewStatus();
  k->ta = bool_attr(ctx, "transpose_a", st) || bool_attr(ctx, "adj_x", st);
  k->tb = bool_attr(ctx, "transpose_b", st) || bool_attr(ctx, "adj_y", st);
  k->keep_dims = bool_attr(ctx, "keep_dims", st);
  k->nchw = string_attr(ctx, "data_format", st) == "NCHW";
  k->padding = string_attr(ctx, "padding", st);
  k->ksize = list_attr(ctx, "ksize", st);
  k->strides = list_attr(ctx, "strides", st);
  k->dilations = list_attr(ctx, "dilations", st);
  k->explicit_pads = list_attr(ctx, "explicit_paddings", st);
  if (TF_OpKernelConstruction_HasAttr(ctx, "DstT", st))
    TF_OpKernelConstruction_GetAttrType(ctx, "DstT", &k->dst, st);
  if (TF_GetCode(st) != TF_OK) TF_OpKernelConstruction_Failure(ctx, st);
  TF_DeleteStatus(st);
  return k;
}

void destroy(void* k) { delete static_cast<Kern*>(k); }

void compute(void* kernel, TF_OpKernelContext* ctx) {
  Call c(ctx, static_cast<Kern*>(kernel));
  if (!c.ok() || !c.sp) return;
  switch (c.k->op->handler) {
    case H_unary: return h_unary(c);
    case H_forward: return h_forward(c);
    case H_eager_const: return h_eager_const(c);
    case H_zeros_like: return h_like(c, 0.0);
    case H_ones_like: return h_like(c, 1.0);
    case H_binary: return h_binary(c, false);
    case H_binary_rev: return h_binary(c, true);
    case H_squared_difference: return h_squared_difference(c);
    case H_rsqrt_grad: return h_rsqrt_grad(c);
    case H_sqrt_grad: return h_sqrt_grad(c);
    case H_div_no_nan: return h_div_no_nan(c);
    case H_select: return h_select(c);
    case H_add_n: return h_add_n(c);
    case H_cast: return h_cast(c);
    case H_reduce: return h_reduce(c, false);
    case H_argmax: return h_reduce(c, true);
    case H_bias_add: return h_bias_add(c);
    case H_bias_add_grad: return h_bias_add_grad(c);
    case H_matmul: return h_matmul(c);
    case H_broadcast_to: return h_broadcast_to(c);
    case H_fill: return h_fill(c);
    case H_tile: return h_tile(c);
    case H_transpose: return h_transpose(c);
    case H_sparse_xent: return h_sparse_xent(c);
    case H_conv2d: return h_conv2d(c);
    case H_conv2d_bi: return h_conv2d_bi(c);
    case H_conv2d_bf: return h_conv2d_bf(c);
    case H_pool: return h_pool(c);
    case H_max_pool_grad: return h_max_pool_grad(c);
    case H_avg_pool_grad: return h_avg_pool_grad(c);
  }
  c.fail(TF_INTERNAL, "no handler");
}

constexpr int kNumTfOps = sizeof(kTfOps) / sizeof(kTfOps[0]);
using CreateFn = void* (*)(TF_OpKernelConstruction*);

template <int... I>
constexpr std::array<CreateFn, sizeof...(I)> creators(std::integer_sequence<int, I...>) {
  return {create<I>...};
}

const auto kCreate = creators(std::make_integer_sequence<int, kNumTfOps>{});

// For the variable-op library's fast kernels: this library's kernel of a TF op, by name.
void* create_by_name(void* construction, const char* tf_op) {
  for (int i = 0; i < kNumTfOps; i++)
    if (std::strcmp(kTfOps[i].tf, tf_op) == 0)
      return kCreate[i](static_cast<TF_OpKernelConstruction*>(construction));
  return nullptr;
}

// One kernel of kTfOps[i] for dtype index `di`, its type attributes constrained to `types`
// (kTfTypes indices), registered only when the op's real definition agrees.
bool register_one(int i, int di, const int* types, TF_Status* st) {
  const TfOpInfo& op = kTfOps[i];
  std::vector<std::pair<const char*, int>> cons;
  for (int j = 0; j < op.ntypes; j++) cons.emplace_back(op.type_attrs[j], kTfTypes[types[j]]);
  std::vector<const char*> host;
  for (const char* h : op.host)
    if (h) host.push_back(h);
  // int32 lives in host memory (TF's rule): a Cast from it stages the value itself, rather than
  // TF copying it over through its EventMgr (one per Keras step: the batch size of the loss)
  if (op.handler == H_cast && kTfTypes[di] == TF_INT32) host.push_back("x");
  std::string why = udtf::opdef_mismatch(op.tf, cons, host);
  if (!why.empty()) {
    TF_SetStatus(st, TF_INVALID_ARGUMENT, why.c_str());
    return false;
  }
  TF_KernelBuilder* b = TF_NewKernelBuilder(op.tf, UDTF_TYPE, kCreate[i], compute, destroy);
  for (const auto& [attr, dt] : cons)
    TF_KernelBuilder_TypeConstraint(b, attr, static_cast<TF_DataType>(dt), st);
  for (const char* h : host) TF_KernelBuilder_HostMemory(b, h);
  if (TF_GetCode(st) != TF_OK) {
    TF_DeleteKernelBuilder(b);
    return false;
  }
  TF_RegisterKernelBuilder(op.tf, b, st);
  return TF_GetCode(st) == TF_OK;
}

// The dtype indices a type attribute of kind `kind` takes for a kernel of dtype index `di`.
std::vector<int> choices(int kind, int di) {
  if (kind == -1) return {di};
  if (kind == -2) return {0, 1, 3, 4};  // Cast to int32 stays with TF: it feeds host shape math
  if (kind == -3) return {2, 3};
  return {kind};
}

void compute_any(void* k, void* ctx) { compute(k, static_cast<TF_OpKernelContext*>(ctx)); }

// The C++ variable-op library (also the same-shape AddV2/Sub/Mul) is tied to the TF version it
// was built with: load it only into that version, else leave variable updates to TF (say so).
void register_variable_ops(const UD_Api* api) {
  static UdtfBridge bridge{sizeof(UdtfBridge), UDTF_TYPE, api, {}, {}, {},
                           create_by_name, compute_any, destroy};
  for (int d = 0; d < 4; d++) {
    bridge.add[d] = g_fn[OP_add][d], bridge.sub[d] = g_fn[OP_sub][d];
    bridge.mul[d] = g_fn[OP_mul][d];
  }
  auto version = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "TF_Version"));
  // Installed beside this library (build.py), so a copied installation uses its own.
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&register_variable_ops), &self);
  std::string lib = self.dli_fname ? self.dli_fname : "";
  lib = lib.substr(0, lib.find_last_of('/') + 1) + "unidev/" UDTF_VAROPS_NAME;
  std::string why;
  if (version && std::strcmp(version(), UDTF_TF_VERSION) != 0) {
    why = std::string("built for TensorFlow ") + UDTF_TF_VERSION + ", running " + version();
  } else if (void* dl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    auto reg = reinterpret_cast<UdtfRegisterVarOpsFn>(dlsym(dl, UDTF_VAROPS_ENTRY));
    char err[256] = {};
    if (reg && reg(&bridge, err, sizeof err) > 0) return;
    why = reg ? err : "no " UDTF_VAROPS_ENTRY;
  } else {
    const char* e = dlerror();
    why = e ? e : "cannot load " + lib;
  }
  std::fprintf(stderr, "unidev: %s variable updates (AssignAddVariableOp...) are unavailable: %s; "
               "run `unidev build tensorflow`\n", UDTF_TYPE, why.c_str());
}

}  // namespace

int udtf_registered_kernels = 0;

extern "C" __attribute__((visibility("default"))) void TF_InitKernel() {
  static bool done = false;  // TF may call it once as an op library and once as a device
  const UD_Api* api = udtf::plugin().api;
  if (!api || done) return;  // a rejected plugin has no devices and gets no kernels
  done = true;
  for (int op = 0; op < OP_COUNT; op++)
    for (int d = 0; d < kNumDTypes; d++) {
      UD_KernelFn fn = nullptr;
      UD_Error* e = api->kernel_lookup(kOps[op].name, kUdTypes[d], &fn);
      if (e) api->error_destroy(e);
      g_fn[op][d] = e ? nullptr : fn;
    }
  TF_Status* st = TF_NewStatus();
  for (int i = 0; i < kNumTfOps; i++) {
    const TfOpInfo& op = kTfOps[i];
    for (int d = 0; d < kNumDTypes; d++) {
      if (!(op.dtypes & (1u << d))) continue;
      bool have = true;
      for (int n = 0; n < op.nneeds; n++) have = have && g_fn[op.needs[n]][d];
      if (!have) continue;
      // every combination of the type attributes' values gets its own kernel
      std::vector<std::array<int, 3>> combos(1);
      for (int j = 0; j < op.ntypes; j++) {
        std::vector<std::array<int, 3>> next;
        for (const auto& c : combos)
          for (int v : choices(op.type_kinds[j], d)) next.push_back(c), next.back()[j] = v;
        combos.swap(next);
      }
      for (const auto& c : combos) {
        TF_SetStatus(st, TF_OK, "");
        if (register_one(i, d, c.data(), st)) udtf_registered_kernels++;
        else std::fprintf(stderr, "unidev: not registering %s:%s on %s: %s\n", op.tf, kNames[d],
                          UDTF_TYPE, TF_Message(st));
      }
    }
  }
  TF_DeleteStatus(st);
  register_variable_ops(api);
}
