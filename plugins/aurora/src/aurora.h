// aurora.h — what every kernel file of the aurora plugin shares: the kernel registry, host-side
// argument checks, the launch of a call onto a vesim stream, and device-side helpers.
//
// A kernel has two halves. The host half (a UD_KernelFn) validates the UD_KernelArgs, copies the
// descriptors and attributes into a Call and launches it on the vesim stream; it never touches
// device memory. The device half (a Body) runs on the stream worker, resolves every tensor's
// virtual pointer through vesim (bounds-checked) and computes.
#pragma once

#include <unidev/plugin_kit.h>
#include <unidev/unidev.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vesim.h"
#include "vesim_device.h"

namespace aurora {

constexpr int kMaxDims = UD_KIT_MAX_DIMS;

// ---- dtypes: the C++ type of each unidev dtype the kernels compute in (ids from ops.h) ----------

using Bool = uint8_t;  // unidev's bool: one byte, 0 or 1

template <class T> struct DType;
template <> struct DType<float> { static constexpr int id = UD_DT_FLOAT32; };
template <> struct DType<double> { static constexpr int id = UD_DT_FLOAT64; };
template <> struct DType<int32_t> { static constexpr int id = UD_DT_INT32; };
template <> struct DType<int64_t> { static constexpr int id = UD_DT_INT64; };
template <> struct DType<Bool> { static constexpr int id = UD_DT_BOOL; };
template <class T> inline UD_DType ud_of() { return ud_dtype_of(DType<T>::id); }

// ---- the registry --------------------------------------------------------------------------------

// Adds (op, dtype) -> fn (a UD_OpId and a UD_DTypeId); called from static initializers.
void register_kernel(int op, int dtype, UD_KernelFn fn);
UD_KernelFn find_kernel(int op, int dtype);

// Stamps `Kernel<T>` for every listed type under `op`.
template <template <class> class Kernel, class... Ts>
struct RegisterTypes {
  explicit RegisterTypes(int op) { (register_kernel(op, DType<Ts>::id, &Kernel<Ts>::run), ...); }
};

// ---- calls ----------------------------------------------------------------------------------------

// A tensor descriptor copied for the device (the caller's arrays may be gone when it runs).
// Line-aligned, with what the device reads and writes first (and up to 4 dims' shape) in one
// cache line: the worker's misses on what the launching thread just wrote set a small op's cost.
struct alignas(64) Tensor {
  UD_Handle handle = 0;
  char* data = nullptr;  // element [0, ...], set on the device side by resolve_all
  uint64_t offset = 0;
  int32_t ndim = -1;
  UD_DType dtype{};
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  bool present() const { return ndim >= 0; }
  UD_Tensor ud() const { return {handle, {}, ndim, dtype, shape, strides, offset}; }  // for the kit
  int64_t numel() const { const UD_Tensor t = ud(); return ud_kit_numel(&t); }
  int64_t itemsize() const { return dtype.bits / 8; }
  bool contiguous() const { const UD_Tensor t = ud(); return ud_kit_is_contiguous(&t); }
  template <class T> T* ptr() const { return reinterpret_cast<T*>(data); }
};

struct Attr {
  UD_AttrType type = UD_ATTR_INT;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

struct Call;
using Body = VESIMresult (*)(VESIMkernel_ctx* k, Call& c);

struct alignas(64) Call {  // what the device reads first in one cache line, as for Tensor
  const char* op = "";  // its name, for vesim's profiler and messages
  int id = 0;           // its UD_OpId
  Body body = nullptr;
  std::vector<Tensor> in, out;
  std::vector<Attr> attrs;
  std::vector<int64_t> iparams;  // values the host half derived for the device half
  Call* next = nullptr;          // in the list of finished calls
};

// Host-side checker: the first failure wins and names the op and the argument.
class Check {
 public:
  Check(const UD_KernelArgs* a, int op) : a_(a), id_(op), op_(ud_op_info(op)->name) {}
  ~Check() { ud_kit_error_destroy(err_); }
  const char* op() const { return op_; }
  bool ok() const { return err_ == nullptr; }
  UD_Error* take() {
    UD_Error* e = err_;
    err_ = nullptr;
    return e;
  }
  bool fail(UD_ErrorCode code, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // the op set's signature (ud_kit_check_signature) and a size vesim can hold for every tensor
  bool signature();
  bool dtype(const UD_Tensor& t, const char* name, UD_DType want);
  // every present input and output has dtype `want`, except those in `skip` (skip_in, skip_out)
  bool dtypes(UD_DType want, uint32_t skip = 0);
  bool same_shape(const UD_Tensor& t, const char* name, const UD_Tensor& ref, const char* refname);
  bool ndim(const UD_Tensor& t, const char* name, int lo, int hi);
  bool dim(const UD_Tensor& t, const char* name, int d, int64_t want);
  // string attribute `idx` is one of the op set's choices for it (ud_kit_check_choice)
  bool choice(int idx);
  // the attributes the op set marks scalar are values of `dtype` (ud_kit_check_scalars)
  bool scalars(UD_DType dtype);
  // ints attribute `idx` as two values >= lo (one value serves both; empty gives `fallback`)
  bool pair(int idx, int64_t lo, int64_t out[2], const int64_t* fallback = nullptr);
  // input / output i; an absent tensor (ndim -1) where the call has none, so that kernels may
  // name their tensors before signature() has looked at the call
  const UD_Tensor& in(int i) const { return a_ && a_->inputs && i < a_->num_inputs ? a_->inputs[i] : kAbsent; }
  const UD_Tensor& out(int i) const { return a_ && a_->outputs && i < a_->num_outputs ? a_->outputs[i] : kAbsent; }
  const UD_KernelArgs* args() const { return a_; }

 private:
  static constexpr UD_Tensor kAbsent = {0, {}, -1, {}, nullptr, nullptr, 0};
  const UD_KernelArgs* a_;
  int id_;
  const char* op_;
  UD_Error* err_ = nullptr;
};

constexpr uint32_t skip_in(int i) { return 1u << i; }
constexpr uint32_t skip_out(int j) { return 1u << (16 + j); }

// "input 3" or "output 0", from a table: names are not built on the per-call path.
const char* tensor_name(bool input, int i);

// Launches `body` on the stream with the Call from make_call. Takes ownership of `c`.
UD_Error* launch(const UD_KernelArgs* a, Call* c);
// A Call for `a` (descriptors and attributes copied, `iparams` attached), recycled: once the
// pool is warm a launch allocates nothing.
using IParams = std::pair<const int64_t*, size_t>;
Call* make_call(const UD_KernelArgs* a, int op, Body body, IParams iparams = {});
void free_call(Call* c);

// A struct of int64 fields (kernel geometry) carried from the host half in Call::iparams.
template <class G> IParams pack(const G& g) {
  return {reinterpret_cast<const int64_t*>(&g), sizeof g / sizeof(int64_t)};
}
template <class G> G unpack(const Call& c) {
  G g;
  std::memcpy(&g, c.iparams.data(), sizeof g);
  return g;
}

// ---- device side --------------------------------------------------------------------------------

// Parallel for over [0, n) on the device's cores with a capturing lambda f(begin, end).
template <class F>
VESIMresult parallel(VESIMkernel_ctx* k, int64_t n, int64_t grain, F&& f) {
  using Fn = std::remove_reference_t<F>;
  auto tramp = [](void* arg, int64_t b, int64_t e, int) { (*static_cast<Fn*>(arg))(b, e); };
  return vesimDevParallelFor(k, n, grain, tramp, &f);
}

// Like parallel(), with the chunk index (< vesimDevCores(k)) passed as f(begin, end, chunk).
template <class F>
VESIMresult parallel_chunks(VESIMkernel_ctx* k, int64_t n, int64_t grain, F&& f) {
  using Fn = std::remove_reference_t<F>;
  auto tramp = [](void* arg, int64_t b, int64_t e, int c) { (*static_cast<Fn*>(arg))(b, e, c); };
  return vesimDevParallelFor(k, n, grain, tramp, &f);
}

// Elements per unit of parallel work: long enough to fill the VE's vector pipes several times.
constexpr int64_t kGrain = 4 * VESIM_VL * 8;

// Offset in elements of linear index `i` of a view with `shape`/`strides` (row-major order).
inline int64_t offset_of(int64_t i, int nd, const int64_t* shape, const int64_t* strides) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0; d--) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

template <class T> inline bool isnan_(T x) { return x != x; }  // false for integers

// Converts between unidev dtypes the way C does (bool: nonzero -> 1).
template <class To, class From> inline To convert(From v) {
  if constexpr (std::is_same_v<To, Bool>) return v != From(0) ? 1 : 0;
  else return static_cast<To>(v);
}

// Maps a vesim error to a unidev error with `what` prefixed.
UD_Error* from_vesim(VESIMresult r, const char* what);
UD_ErrorCode code_of(VESIMresult r);

// UD events (events.cpp), built from vesim stream callbacks: vesim, like VEDA, has none.
UD_Error* event_create(int32_t device, UD_Event* event);
UD_Error* event_destroy(UD_Event event);
UD_Error* event_record(UD_Event event, UD_Stream stream);
UD_Error* event_query(UD_Event event, int32_t* done);
UD_Error* event_synchronize(UD_Event event);
UD_Error* event_elapsed(UD_Event start, UD_Event end, double* milliseconds);
UD_Error* stream_wait_event(UD_Stream stream, UD_Event event);

// NULL if `device` names a device of this plugin (starting vesim on first use).
UD_Error* check_device(int32_t device);

// vesim stream behind a UD_Stream (NULL: the device's default stream).
UD_Error* stream_of(UD_Stream s, int32_t device, VESIMstream* out);
// Like stream_of, for a `device` that must exist and own the stream (`what` names the call).
UD_Error* device_stream(UD_Stream s, int32_t device, const char* what, VESIMstream* out);

}  // namespace aurora
