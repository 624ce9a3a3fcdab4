// call.cpp — the kernel registry, host-side argument checks and the launch of a Call on vesim.
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "aurora.h"

namespace aurora {

namespace {

UD_KernelFn registry[UD_OP_COUNT][UD_DT_COUNT];  // constant-initialized: no order to get wrong

// Inputs a kernel also writes (the op set's `mutated` inputs): bit i for input i.
uint32_t mutated_inputs(int op) { return ud_op_info(op)->mutated_inputs; }

// True when the view's elements cover every byte of its extent (a permuted contiguous layout):
// only such a write lifts the poison of memory that failed work was to write (vesim.h).
bool tiles(const Tensor& t) {
  if (t.contiguous()) return true;
  int64_t st[kMaxDims], n[kMaxDims];
  int m = 0;
  for (int d = 0; d < t.ndim; d++)
    if (t.shape[d] > 1) st[m] = t.strides[d], n[m++] = t.shape[d];
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && st[j] < st[j - 1]; j--) std::swap(st[j], st[j - 1]), std::swap(n[j], n[j - 1]);
  int64_t expect = 1;
  for (int i = 0; i < m; i++) {
    if (st[i] != expect) return false;
    expect *= n[i];
  }
  return true;
}

// Resolves one tensor (its byte_offset folded into the pointer, so that only its extent counts
// for bounds and poison). `out`: written, declared to vesim before anything can fail; `dense`
// the write may lift poison (an output; not an updated input, which is read as well).
VESIMresult resolve_tensor(VESIMkernel_ctx* k, Tensor& t, const char* what, bool out,
                           bool dense = true) {
  int64_t last = 0;
  for (int d = 0; d < t.ndim; d++) last += (t.shape[d] - 1) * t.strides[d];
  const uint64_t bytes = uint64_t(last + 1) * uint64_t(t.itemsize());
  constexpr uint64_t kMaxOffset = (uint64_t(1) << VESIM_PTR_OFFSET_BITS) - 1;
  if (t.offset > kMaxOffset - VESIM_PTR_OFFSET(t.handle))  // would carry into the index bits
    return vesimDevFail(k, VESIM_ERROR_OUT_OF_BOUNDS, "%s: byte_offset %llu leaves any allocation",
                        what, (unsigned long long)t.offset);
  void* base;  // vesim prefixes the kernel's name (the op) to the message
  VESIMresult r = out ? vesimDevResolveOut(k, t.handle + t.offset, bytes, dense && tiles(t), what, &base)
                      : vesimDevResolve(k, t.handle + t.offset, bytes, what, &base);
  if (r == VESIM_SUCCESS) t.data = static_cast<char*>(base);
  return r;
}

// Device half of every kernel: resolve the tensors through vesim, then run the body. Outputs
// (and inputs the op updates) are declared first, so that whatever fails poisons all of them.
VESIMresult trampoline(VESIMkernel_ctx* k, void* args) {
  std::unique_ptr<Call, void (*)(Call*)> c(*static_cast<Call**>(args), free_call);
  VESIMresult first = VESIM_SUCCESS;
  for (size_t i = 0; i < c->out.size(); i++) {
    Tensor& t = c->out[i];
    if (!t.present() || t.numel() == 0) continue;
    VESIMresult r = resolve_tensor(k, t, tensor_name(false, int(i)), true);
    if (!first) first = r;
  }
  if (uint32_t mutated = mutated_inputs(c->id))
    for (size_t i = 0; i < c->in.size() && i < 32; i++)
      if (mutated >> i & 1 && c->in[i].present() && c->in[i].numel()) {
        VESIMresult r = resolve_tensor(k, c->in[i], tensor_name(true, int(i)), true, false);
        if (!first) first = r;
      }
  if (first) return first;
  for (size_t i = 0; i < c->in.size(); i++) {
    Tensor& t = c->in[i];
    if (!t.present() || t.numel() == 0) continue;
    if (VESIMresult r = resolve_tensor(k, t, tensor_name(true, int(i)), false)) return r;
  }
  return c->body(k, *c);
}

// Finished calls come back from the stream workers on a lock-free stack, which launching
// threads take whole into their pool: the two sides never wait for each other on a lock.
std::atomic<Call*> returned{nullptr};
std::mutex& pool_mu = *new std::mutex;  // never destroyed: workers may run while the process exits
std::vector<Call*>& pool = *new std::vector<Call*>;

// "input 3", "output 0": built once, not per call
const std::vector<std::string>& tensor_names = *new std::vector<std::string>([] {
  std::vector<std::string> v;
  for (int j = 0; j < 128; j++) v.push_back((j & 1 ? "input " : "output ") + std::to_string(j / 2));
  return v;
}());

}  // namespace

const char* tensor_name(bool input, int i) {
  return i < 64 ? tensor_names[2 * i + input].c_str() : input ? "input (64th or later)" : "output";
}

void free_call(Call* c) {  // no more calls live than vesim queues (or the host is launching)
  c->next = returned.load(std::memory_order_relaxed);
  while (!returned.compare_exchange_weak(c->next, c, std::memory_order_release)) {}
}

void register_kernel(int op, int dtype, UD_KernelFn fn) { registry[op][dtype] = fn; }

UD_KernelFn find_kernel(int op, int dtype) {
  return op >= 0 && op < UD_OP_COUNT && dtype >= 0 && dtype < UD_DT_COUNT ? registry[op][dtype]
                                                                           : nullptr;
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

bool Check::signature() {
  if ((err_ = ud_kit_check_signature(id_, a_))) return false;
  for (int i = 0; i < a_->num_inputs + a_->num_outputs; i++) {
    bool in = i < a_->num_inputs;
    const UD_Tensor& t = in ? a_->inputs[i] : a_->outputs[i - a_->num_inputs];
    // a view of more than 2^48 elements cannot be real device memory: refuse it before any loop
    double elems = 1;
    for (int d = 0; d < t.ndim; d++) elems *= double(t.shape[d]);  // none for an absent input
    if (elems > double(int64_t(1) << 48))
      return fail(UD_ERR_INVALID_ARGUMENT, "%s has %.3g elements, expected at most 2^48",
                  tensor_name(in, in ? i : i - a_->num_inputs), elems);
  }
  return true;
}

bool Check::dtype(const UD_Tensor& t, const char* name, UD_DType want) {
  return ok() && !(err_ = ud_kit_check_dtype(op_, name, &t, want));
}

bool Check::dtypes(UD_DType want, uint32_t skip) {
  for (int i = 0; i < a_->num_inputs; i++)
    if (!(skip >> i & 1) && a_->inputs[i].ndim >= 0 && !dtype(in(i), tensor_name(true, i), want))
      return false;
  for (int i = 0; i < a_->num_outputs; i++)
    if (!(skip >> (16 + i) & 1) && !dtype(out(i), tensor_name(false, i), want)) return false;
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

bool Check::choice(int idx) { return ok() && !(err_ = ud_kit_check_choice(id_, a_, idx, nullptr)); }

bool Check::scalars(UD_DType dtype) { return ok() && !(err_ = ud_kit_check_scalars(id_, a_, dtype)); }

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

Call* make_call(const UD_KernelArgs* a, int op, Body body, IParams iparams) {
  std::unique_lock<std::mutex> lock(pool_mu);
  if (pool.empty())
    for (Call* r = returned.exchange(nullptr); r; r = r->next) pool.push_back(r);
  Call* c = pool.empty() ? new Call() : pool.back();
  if (!pool.empty()) pool.pop_back();
  lock.unlock();
  c->op = ud_op_info(op)->name, c->id = op, c->body = body;
  c->iparams.assign(iparams.first, iparams.first + iparams.second);
  auto copy = [](const UD_Tensor& u, Tensor& t) {
    t.handle = u.handle, t.ndim = u.ndim, t.dtype = u.dtype, t.offset = u.byte_offset, t.data = nullptr;
    for (int i = 0; i < u.ndim; i++) t.shape[i] = u.shape[i], t.strides[i] = u.strides[i];
  };
  c->in.resize(a->num_inputs), c->out.resize(a->num_outputs), c->attrs.resize(a->num_attrs);
  for (int i = 0; i < a->num_inputs; i++) copy(a->inputs[i], c->in[i]);
  for (int i = 0; i < a->num_outputs; i++) copy(a->outputs[i], c->out[i]);
  for (int i = 0; i < a->num_attrs; i++) {
    const UD_Attr& u = a->attrs[i];
    Attr& at = c->attrs[i];
    at.type = u.type;
    at.i = u.type == UD_ATTR_BOOL ? u.value.b : u.type == UD_ATTR_INT ? u.value.i : 0;
    at.f = u.type == UD_ATTR_FLOAT ? u.value.f : 0;
    if (u.type == UD_ATTR_STRING) at.s.assign(u.value.s ? u.value.s : "");
    if (u.type == UD_ATTR_INTS) at.ints.assign(u.value.ints.data, u.value.ints.data + u.value.ints.len);
  }
  return c;
}

UD_Error* launch(const UD_KernelArgs* a, Call* c) {
  std::unique_ptr<Call, void (*)(Call*)> owned(c, free_call);
  VESIMstream s;
  if (UD_Error* e = device_stream(a->stream, a->device, c->op, &s)) return e;
  owned.release();
  VESIMresult r = vesimLaunchKernelNamed(c->op, trampoline, s, &c, sizeof c);
  if (r != VESIM_SUCCESS) {
    free_call(c);
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
