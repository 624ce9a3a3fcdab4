// call.cc — the shared plugin-call machinery: dtype and kernel tables, attribute defaults,
// descriptors of TF tensors, and Call, which fetches inputs, allocates outputs and runs kernels.
#include "call.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace udtf {
namespace {

UD_KernelFn g_fn[UD_OP_COUNT][UD_DT_COUNT];
UD_Attr g_defaults[UD_OP_COUNT][kMaxAttrs];  // each op's attributes with the op set's defaults

// Kernels never nest on a thread: each thread reuses one list of fetched tensors and one status.
thread_local std::vector<TF_Tensor*> t_owned;

// A copy that changes the order of the dimensions in memory (a transpose), as opposed to one that
// broadcasts, tiles or takes a window: the input's strides, over the dimensions the output
// lays out from outermost to innermost, are not non-increasing.
bool reorders(const UD_Tensor& in, const UD_Tensor& out) {
  if (in.ndim != out.ndim) return false;
  int order[kMaxDims], n = 0;
  for (int i = 0; i < out.ndim; i++)
    if (out.shape[i] > 1 && in.strides[i] != 0) order[n++] = i;
  std::sort(order, order + n, [&](int a, int b) { return out.strides[a] > out.strides[b]; });
  for (int j = 1; j < n; j++)
    if (std::abs(in.strides[order[j]]) > std::abs(in.strides[order[j - 1]])) return true;
  return false;
}

}  // namespace

TF_DataType tf_dtype(int id) {
  switch (id) {
    case UD_DT_FLOAT32: return TF_FLOAT;
    case UD_DT_FLOAT64: return TF_DOUBLE;
    case UD_DT_FLOAT16: return TF_HALF;
    case UD_DT_BFLOAT16: return TF_BFLOAT16;
    case UD_DT_INT32: return TF_INT32;
    case UD_DT_INT64: return TF_INT64;
    case UD_DT_UINT8: return TF_UINT8;
    case UD_DT_BOOL: return TF_BOOL;
    default: return TF_DataType(0);
  }
}

int dtype_id(TF_DataType t) {
  for (int id = 0; id < UD_DT_COUNT; id++)
    if (tf_dtype(id) == t) return id;
  return -1;
}

UD_KernelFn kernel_fn(int op, int dt) { return dt >= 0 ? g_fn[op][dt] : nullptr; }

void lookup_kernels(const UD_Api* api) {
  for (int i = 0; i < kNumTfOps; i++)
    for (int n = 0; n < kTfOps[i].nneeds; n++)
      for (int op = kTfOps[i].needs[n], d = 0; d < UD_DT_COUNT; d++) {
        UD_KernelFn fn = nullptr;
        if (g_fn[op][d]) continue;
        UD_Error* e = api->kernel_lookup(op_name(op), ud_dtype_of(d), &fn);
        if (e) api->error_destroy(e);
        g_fn[op][d] = e ? nullptr : fn;
      }
  for (int op = 0; op < UD_OP_COUNT; op++) {
    const UD_OpInfo* info = ud_op_info(op);
    for (int k = 0; k < info->num_attrs && k < kMaxAttrs; k++)
      g_defaults[op][k] = ud_attr_default(&info->attrs[k]);
  }
}

Attrs::Attrs(int op) : n(std::min<int>(ud_op_info(op)->num_attrs, kMaxAttrs)) {
  std::copy(g_defaults[op], g_defaults[op] + n, a);
}

UD_Attr& Attrs::at(const char* name) {
  for (int i = 0; i < n; i++)
    if (std::strcmp(a[i].name, name) == 0) return a[i];
  std::fprintf(stderr, "unidev TF adapter: op has no attribute %s\n", name);
  return a[0];
}

// The thread's status is OK between calls: a failed call resets it after reporting.
Call::Call(TF_OpKernelContext* c, Kern* kern) : ctx(c), k(kern), owned(t_owned) {
  static thread_local TF_Status* status = TF_NewStatus();
  st = status;
  sp = kern->stream.load(std::memory_order_relaxed);
  if (!sp) kern->stream.store(sp = TF_GetStream(ctx, st), std::memory_order_relaxed);
}

Call::~Call() {
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
    TF_SetStatus(st, TF_OK, "");
  }
  release();
}

void Call::release() {
  for (TF_Tensor* t : owned) TF_DeleteTensor(t);
  owned.clear();
}

bool Call::fail(TF_Code code, const std::string& msg) {
  std::string m = std::string(k->op->tf) + " on " UDTF_TYPE ": " + msg;
  TF_SetStatus(st, code, m.c_str());
  return false;
}

TF_Tensor* Call::input(int i) {
  TF_Tensor* t = nullptr;
  TF_GetInput(ctx, i, &t, st);  // sets `t` only on success
  if (keep(t) && TF_NumDims(t) > kMaxDims) fail(TF_INVALID_ARGUMENT, "rank above 16");
  return ok() ? t : nullptr;
}

TF_Tensor* Call::output(int i, TF_DataType dt, const int64_t* dims, int nd, int reuse) {
  size_t bytes = 0;
  if (!valid_shape(dims, nd, TF_DataTypeSize(dt), &bytes)) return nullptr;
  if (reuse < 0) return keep(TF_AllocateOutput(ctx, i, dt, dims, nd, bytes, st));
  int forwarded = -1;
  release();
  return keep(TF_ForwardInputOrAllocateOutput(ctx, &reuse, 1, i, dims, nd, &forwarded, st));
}

TF_Tensor* Call::temp(TF_DataType dt, const std::vector<int64_t>& dims) {
  size_t bytes = 0;
  if (!valid_shape(dims.data(), int(dims.size()), TF_DataTypeSize(dt), &bytes)) return nullptr;
  TF_AllocatorAttributes attr{TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE, 0};
  return keep(TF_AllocateTemp(ctx, dt, dims.data(), int(dims.size()), &attr, st));
}

bool Call::valid_shape(const int64_t* dims, int nd, size_t elem, size_t* bytes) {
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

bool Call::device_input(int i, Desc* d) {
  TF_Tensor* t = input(i);
  // only declared arguments and the int32 inputs of a few handlers are host memory
  bool host = t && (k->op->host[0] || (k->flags & kStageHost)) && TF_IsHostMemoryInput(ctx, i, st);
  TF_Tensor* dev = host ? temp(TF_TensorType(t), dims_of(t)) : t;
  if (!dev || (host && !upload(dev, t))) return false;
  *d = desc(*this, dev);
  return true;
}

bool Call::upload(TF_Tensor* dst, const TF_Tensor* src) {
  const UD_Api* api = plugin().api;
  size_t n = TF_TensorByteSize(src);
  // The host tensor is released when this kernel returns, so wait for the copy.
  return !n || (check(api->memcpy_h2d(sp->stream, reinterpret_cast<UD_Handle>(TF_TensorData(dst)),
                                      TF_TensorData(src), n),
                      st, "memcpy_h2d") &&
                check(api->stream_synchronize(sp->stream), st, "memcpy_h2d"));
}

bool Call::host_values(int i, const Desc& d, std::vector<int64_t>* v) {
  TF_Tensor* t = input(i);
  if (!t) return false;
  if (TF_IsHostMemoryInput(ctx, i, st)) return *v = host_ints(t), ok();
  std::vector<int64_t> raw(TF_TensorElementCount(t));  // room for int32 or int64 elements
  const UD_Api* api = plugin().api;
  if (!check(api->memcpy_d2h(sp->stream, raw.data(), d.t.handle, TF_TensorByteSize(t)), st,
             "memcpy_d2h") ||
      !check(api->stream_synchronize(sp->stream), st, "memcpy_d2h"))
    return false;
  *v = host_ints(t, raw.data());
  return true;
}

bool Call::run(int op, std::initializer_list<const Desc*> ins,
               std::initializer_list<const Desc*> outs, const Attrs& attrs) {
  if (!ok()) return false;
  const Desc* first = ins.size() ? *ins.begin() : *outs.begin();
  int di = ud_dtype_id(first->t.dtype);
  UD_KernelFn fn = kernel_fn(op, di);
  if (!fn)
    return fail(TF_UNIMPLEMENTED, std::string("the plugin has no kernel ") + op_name(op) + ":" +
                                      ud_dtype_id_name(di));
  for (const Desc* o : outs)
    if (o->numel() == 0) return true;  // nothing to compute
  UD_Tensor ti[12], to[4];
  int ni = 0, no = 0;
  for (const Desc* d : ins) ti[ni++] = const_cast<Desc*>(d)->get();
  for (const Desc* d : outs) to[no++] = const_cast<Desc*>(d)->get();
  if (op == UD_OP_COPY) {
    count(k->op, kCopies);
    if (reorders(ti[0], to[0])) count(k->op, kTransposes);
  } else if (op == UD_OP_PAD_CONSTANT) {
    count(k->op, kPads);
  }
  UD_KernelArgs args{sizeof(UD_KernelArgs), sp->device, sp->stream, ti, ni, to, no, attrs.a,
                     attrs.n};
  UD_Error* err = fn(&args);
  return !err || check(err, st, std::string(k->op->tf) + " (unidev " + op_name(op) + ")");
}

std::vector<int64_t> dims_of(const TF_Tensor* t) {
  std::vector<int64_t> d(TF_NumDims(t));
  for (size_t i = 0; i < d.size(); i++) d[i] = TF_Dim(t, int(i));
  return d;
}

Desc contiguous(UD_Handle h, TF_DataType dt, const int64_t* dims, int nd, int32_t device) {
  Desc d;
  d.t.handle = h;
  d.t.device = {UD_DLPACK_EXT_DEV, device};
  d.t.ndim = nd;
  d.t.dtype = ud_dtype_of(std::max(dtype_id(dt), 0));
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

std::vector<int64_t> host_ints(const TF_Tensor* t, const void* data) {
  int64_t n = TF_TensorElementCount(t);
  std::vector<int64_t> v(n);
  data = data ? data : TF_TensorData(t);
  for (int64_t i = 0; i < n; i++)
    v[i] = TF_TensorType(t) == TF_INT64 ? static_cast<const int64_t*>(data)[i]
                                        : static_cast<const int32_t*>(data)[i];
  return v;
}

Desc temp_like(Call& c, const Desc& like, TF_DataType dt) {
  TF_Tensor* t = c.temp(dt, dims_of(like));
  return t ? desc(c, t) : absent();
}

}  // namespace udtf
