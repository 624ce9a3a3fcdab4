// call.cpp — the kernel registry, host-side argument checks and the launch of a Call on vesim.
#include <cstdarg>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "aurora.h"

namespace aurora {

namespace {

using Key = std::pair<std::string, uint32_t>;

std::map<Key, UD_KernelFn>& registry() {
  static std::map<Key, UD_KernelFn> r;
  return r;
}

uint32_t dtype_key(UD_DType d) { return uint32_t(d.code) << 24 | uint32_t(d.bits) << 16 | d.lanes; }

// Device half of every kernel: resolve the tensors through vesim, then run the body.
VESIMresult trampoline(VESIMkernel_ctx* k, void* args) {
  std::unique_ptr<Call> c(*static_cast<Call**>(args));
  auto resolve = [&](Tensor& t, const char* kind, size_t i) -> VESIMresult {
    if (!t.present() || t.numel() == 0) return VESIM_SUCCESS;
    int64_t last = 0;
    for (int d = 0; d < t.ndim; d++) last += (t.shape[d] - 1) * t.strides[d];
    uint64_t bytes = t.offset + uint64_t(last + 1) * uint64_t(t.itemsize());
    void* base;  // names are built without printf: this runs for every tensor of every call
    std::string what = std::string(c->op) + ": " + kind + " " + std::to_string(i);
    if (VESIMresult r = vesimDevResolve(k, t.handle, bytes, what.c_str(), &base)) return r;
    t.data = static_cast<char*>(base) + t.offset;
    return VESIM_SUCCESS;
  };
  for (size_t i = 0; i < c->in.size(); i++)
    if (VESIMresult r = resolve(c->in[i], "input", i)) return r;
  for (size_t i = 0; i < c->out.size(); i++)
    if (VESIMresult r = resolve(c->out[i], "output", i)) return r;
  return c->body(k, *c);
}

}  // namespace

UD_DType dtype_from_name(const std::string& n, bool* ok) {
  static const std::map<std::string, UD_DType> names = {
      {"float32", DType<float>::ud}, {"float64", DType<double>::ud},
      {"int32", DType<int32_t>::ud}, {"int64", DType<int64_t>::ud}, {"bool", DType<Bool>::ud}};
  auto it = names.find(n);
  *ok = it != names.end();
  return *ok ? it->second : UD_DType{};
}

void register_kernel(const char* op, UD_DType dtype, UD_KernelFn fn) {
  registry()[{op, dtype_key(dtype)}] = fn;
}

UD_KernelFn find_kernel(const char* op, UD_DType dtype) {
  auto it = registry().find({op, dtype_key(dtype)});
  return it == registry().end() ? nullptr : it->second;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

bool Tensor::contiguous() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool Check::fail(UD_ErrorCode code, const char* fmt, ...) {
  if (err_) return false;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  err_ = ud_kit_error(code, "%s: %s", op_, buf);
  return false;
}

bool Check::signature(int inputs, int outputs, const char* attrs) {
  if (!a_ || a_->struct_size < sizeof(UD_KernelArgs))
    return fail(UD_ERR_INVALID_ARGUMENT, "UD_KernelArgs is NULL or too small");
  if (inputs >= 0 ? a_->num_inputs != inputs : a_->num_inputs < 1)
    return fail(UD_ERR_INVALID_ARGUMENT, "got %d inputs, expected %s%d", a_->num_inputs,
                inputs >= 0 ? "" : "at least ", inputs >= 0 ? inputs : 1);
  if (a_->num_outputs != outputs || (a_->num_inputs && !a_->inputs) || !a_->outputs)
    return fail(UD_ERR_INVALID_ARGUMENT, "got %d outputs (or NULL arrays), expected %d",
                a_->num_outputs, outputs);
  int n = 0;  // attrs is "name:t,..." with t in i f b s I (ints)
  for (const char* p = attrs; *p; n++) {
    const char* colon = strchr(p, ':');
    std::string name(p, colon);
    const char kind = colon[1];
    p = colon[2] ? colon + 3 : colon + 2;
    UD_AttrType want = kind == 'i' ? UD_ATTR_INT : kind == 'f' ? UD_ATTR_FLOAT : kind == 'b'
                       ? UD_ATTR_BOOL : kind == 's' ? UD_ATTR_STRING : UD_ATTR_INTS;
    const UD_Attr* at = n < a_->num_attrs && a_->attrs ? &a_->attrs[n] : nullptr;
    if (!at || at->type != want || (at->name && name != at->name) ||
        (want == UD_ATTR_STRING && !at->value.s) ||
        (want == UD_ATTR_INTS && at->value.ints.len && !at->value.ints.data))
      return fail(UD_ERR_INVALID_ARGUMENT, "attribute %d: expected '%s' of type %c (all of '%s', "
                  "in order), got %s", n, name.c_str(), kind, attrs,
                  at ? (at->name ? at->name : "a nameless one or NULL data") : "none");
  }
  if (a_->num_attrs != n)
    return fail(UD_ERR_INVALID_ARGUMENT, "got %d attributes, expected %d ('%s')", a_->num_attrs,
                n, attrs);
  for (int i = 0; i < a_->num_inputs + a_->num_outputs; i++) {
    bool in = i < a_->num_inputs;
    const UD_Tensor& t = in ? a_->inputs[i] : a_->outputs[i - a_->num_inputs];
    if (in && t.ndim < 0) continue;  // an absent optional input; kernels check which may be
    std::string name = (in ? "input " : "output ") + std::to_string(in ? i : i - a_->num_inputs);
    if ((err_ = ud_kit_check_tensor(op_, name.c_str(), &t))) return false;
    // a view of more than 2^48 elements cannot be real device memory: refuse it before any loop
    double elems = 1;
    for (int d = 0; d < t.ndim; d++) elems *= double(t.shape[d]);
    if (elems > double(int64_t(1) << 48))
      return fail(UD_ERR_INVALID_ARGUMENT, "%s has %.3g elements, expected at most 2^48",
                  name.c_str(), elems);
  }
  return true;
}

bool Check::dtype(const UD_Tensor& t, const char* name, UD_DType want) {
  if (!ok()) return false;
  if (ud_kit_dtype_eq(t.dtype, want)) return true;
  return fail(UD_ERR_INVALID_ARGUMENT, "'%s' has dtype %s, expected %s", name,
              ud_kit_dtype_name(t.dtype), ud_kit_dtype_name(want));
}

bool Check::dtypes(UD_DType want, uint32_t skip) {
  for (int i = 0; i < a_->num_inputs; i++) {
    if (skip >> i & 1 || a_->inputs[i].ndim < 0) continue;
    if (!dtype(a_->inputs[i], ("input " + std::to_string(i)).c_str(), want)) return false;
  }
  for (int i = 0; i < a_->num_outputs; i++) {
    std::string name = "output " + std::to_string(i);
    if (!(skip >> (16 + i) & 1) && !dtype(a_->outputs[i], name.c_str(), want)) return false;
  }
  return true;
}

bool Check::same_shape(const UD_Tensor& t, const char* name, const UD_Tensor& ref,
                       const char* refname) {
  if (!ok()) return false;
  if (ud_kit_same_shape(&t, &ref)) return true;
  std::string a, b;
  for (int i = 0; i < t.ndim; i++) a += std::to_string(t.shape[i]) + ",";
  for (int i = 0; i < ref.ndim; i++) b += std::to_string(ref.shape[i]) + ",";
  return fail(UD_ERR_INVALID_ARGUMENT, "'%s' has shape (%s), expected '%s''s shape (%s)", name,
              a.c_str(), refname, b.c_str());
}

bool Check::ndim(const UD_Tensor& t, const char* name, int lo, int hi) {
  if (!ok()) return false;
  if (t.ndim >= lo && t.ndim <= hi) return true;
  return fail(UD_ERR_INVALID_ARGUMENT, "'%s' has ndim %d, expected %d..%d", name, t.ndim, lo, hi);
}

bool Check::dim(const UD_Tensor& t, const char* name, int d, int64_t want) {
  if (!ok()) return false;
  if (d < t.ndim && t.shape[d] == want) return true;
  return fail(UD_ERR_INVALID_ARGUMENT, "'%s' dim %d is %lld, expected %lld", name, d,
              d < t.ndim ? (long long)t.shape[d] : -1LL, (long long)want);
}

bool Check::pair(int idx, int64_t lo, int64_t out[2], const int64_t* fallback) {
  const UD_Attr& a = a_->attrs[idx];
  int64_t len = a.value.ints.len;
  if (len == 0 && fallback) {
    out[0] = fallback[0];
    out[1] = fallback[1];
    return true;
  }
  if ((len != 1 && len != 2) || a.value.ints.data[0] < lo || a.value.ints.data[len - 1] < lo)
    return fail(UD_ERR_INVALID_ARGUMENT, "attribute '%s' must be 2 ints >= %lld", a.name,
                (long long)lo);
  out[0] = a.value.ints.data[0];
  out[1] = a.value.ints.data[len - 1];
  return true;
}

Call* make_call(const UD_KernelArgs* a, const char* op, Body body, std::vector<int64_t> iparams) {
  auto* c = new Call();
  c->op = op;
  c->body = body;
  c->iparams = std::move(iparams);
  auto copy = [](const UD_Tensor& u) {
    Tensor t;
    t.handle = u.handle;
    t.ndim = u.ndim;
    t.dtype = u.dtype;
    t.offset = u.byte_offset;
    for (int i = 0; i < u.ndim; i++) {
      t.shape[i] = u.shape[i];
      t.strides[i] = u.strides[i];
    }
    return t;
  };
  c->in.reserve(a->num_inputs), c->out.reserve(a->num_outputs), c->attrs.reserve(a->num_attrs);
  for (int i = 0; i < a->num_inputs; i++) c->in.push_back(copy(a->inputs[i]));
  for (int i = 0; i < a->num_outputs; i++) c->out.push_back(copy(a->outputs[i]));
  for (int i = 0; i < a->num_attrs; i++) {
    const UD_Attr& u = a->attrs[i];
    Attr at;
    at.type = u.type;
    switch (u.type) {
      case UD_ATTR_INT: at.i = u.value.i; break;
      case UD_ATTR_FLOAT: at.f = u.value.f; break;
      case UD_ATTR_BOOL: at.i = u.value.b; break;
      case UD_ATTR_STRING: at.s = u.value.s ? u.value.s : ""; break;
      case UD_ATTR_INTS: at.ints.assign(u.value.ints.data, u.value.ints.data + u.value.ints.len);
    }
    c->attrs.push_back(std::move(at));
  }
  return c;
}

UD_Error* launch(const UD_KernelArgs* a, Call* c) {
  std::unique_ptr<Call> owned(c);
  VESIMstream s;
  if (UD_Error* e = check_device(a->device)) return e;
  if (UD_Error* e = stream_of(a->stream, a->device, &s)) return e;
  int sd = -1;
  if (vesimStreamGetDevice(s, &sd) != VESIM_SUCCESS || sd != a->device)
    return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: the stream is not a live stream of device "
                        "%d", c->op, a->device);
  owned.release();
  VESIMresult r = vesimLaunchKernelNamed(c->op, trampoline, s, &c, sizeof c);
  if (r != VESIM_SUCCESS) {
    delete c;
    return from_vesim(r, "launch");
  }
  return nullptr;
}

UD_ErrorCode code_of(VESIMresult r) {
  switch (r) {
    case VESIM_SUCCESS: return UD_OK;
    case VESIM_ERROR_OUT_OF_MEMORY: return UD_ERR_OUT_OF_MEMORY;
    case VESIM_ERROR_OUT_OF_BOUNDS: return UD_ERR_OUT_OF_BOUNDS;
    case VESIM_ERROR_UNKNOWN_VPTR: return UD_ERR_UNKNOWN_HANDLE;
    case VESIM_ERROR_INVALID_VALUE:
    case VESIM_ERROR_OFFSETTED_VPTR_NOT_ALLOWED:
    case VESIM_ERROR_INVALID_DEVICE:
    case VESIM_ERROR_INVALID_STREAM: return UD_ERR_INVALID_ARGUMENT;
    case VESIM_ERROR_NOT_READY: return UD_ERR_NOT_READY;
    case VESIM_ERROR_KERNEL_FAILED:
    case VESIM_ERROR_KERNEL_CRASHED: return UD_ERR_DEVICE;
    default: return UD_ERR_INTERNAL;
  }
}

UD_Error* from_vesim(VESIMresult r, const char* what) {
  if (r == VESIM_SUCCESS) return nullptr;
  return ud_kit_error(code_of(r), "aurora %s: %s (%s)", what, vesimGetLastErrorDetail(),
                      vesimGetErrorName(r));
}

}  // namespace aurora
