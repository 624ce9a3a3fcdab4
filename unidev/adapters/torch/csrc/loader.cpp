// loader.cpp — binds the plugin table discovery already loaded (load once: no second dlopen) to
// PrivateUse1: the ABI rule of loader.h, kernels looked up once per (op, dtype), attribute
// defaults from ops.h; the dtype pairing with at::ScalarType; plugin errors as Python types.
#include <c10/util/Exception.h>
#include <unidev/loader.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <utility>

#include "unidev_torch.h"

namespace unidev_torch {
namespace {

Plugin g_plugin;
std::atomic<bool> g_loaded{false};
std::mutex g_mu;

// torch's type of each unidev dtype, keyed by ops.h's UD_DT_* ids
constexpr std::pair<int, at::ScalarType> kScalarTypes[] = {
    {UD_DT_FLOAT32, at::kFloat}, {UD_DT_FLOAT64, at::kDouble}, {UD_DT_FLOAT16, at::kHalf},
    {UD_DT_BFLOAT16, at::kBFloat16}, {UD_DT_INT32, at::kInt}, {UD_DT_INT64, at::kLong},
    {UD_DT_UINT8, at::kByte}, {UD_DT_BOOL, at::kBool}};
static_assert(std::size(kScalarTypes) == UD_DT_COUNT, "every unidev dtype needs a torch type");

void bind_kernels(Plugin& p) {
  for (int op = 0; op < UD_OP_COUNT; ++op) {
    const UD_OpInfo* info = ud_op_info(op);
    TORCH_INTERNAL_ASSERT(info->num_attrs <= kMaxAttrs, info->name, " has ", info->num_attrs,
                          " attributes; raise kMaxAttrs");
    for (int d = 0; d < UD_DT_COUNT; ++d) {
      if (!(info->dtypes & (1u << d))) continue;
      UD_KernelFn fn = nullptr;
      UD_Error* err = p.api->kernel_lookup(info->name, ud_dtype_of(d), &fn);
      if (err) p.api->error_destroy(err);
      else p.kernels[op][d] = fn;
    }
    for (int k = 0; k < info->num_attrs; ++k) p.defaults[op][k] = ud_attr_default(&info->attrs[k]);
  }
}

}  // namespace

int init(uint64_t address, const std::string& path, const std::string& torch_name) {
  std::lock_guard<std::mutex> g(g_mu);
  const auto* api = reinterpret_cast<const UD_Api*>(address);
  if (g_loaded) {
    TORCH_CHECK(api == g_plugin.api, "unidev: PrivateUse1 is already bound to plugin '",
                g_plugin.name, "' (", g_plugin.path, "); torch allows one such backend per process");
    return g_plugin.device_count;
  }
  char why[512];
  TORCH_CHECK(ud_loader_check(api, path.c_str(), why, sizeof why) == UD_LOAD_OK, "unidev: ", why);
  Plugin& p = g_plugin;
  p.api = api;
  p.path = path;
  p.name = api->plugin_name ? api->plugin_name : "?";
  p.torch_name = torch_name;
  int32_t n = 0;
  const char* reason = nullptr;
  UD_Error* err = api->device_count(&n, &reason);
  if (err) {
    std::string msg = api->error_message(err);
    api->error_destroy(err);
    TORCH_CHECK(false, "unidev: ", p.name, " device_count failed: ", msg);
  }
  p.device_count = std::min<int>(n, kMaxDevices);
  if (n > 0) {
    UD_DeviceProperties props{};
    props.struct_size = sizeof props;
    err = api->device_properties(0, &props);
    if (err) api->error_destroy(err);
    else if (props.host_addressable) p.dl_device_type = UD_DLPACK_CPU;
  }
  bind_kernels(p);
  register_hooks();
  g_loaded = true;
  return p.device_count;
}

Plugin& plugin() {
  TORCH_CHECK(g_loaded.load(std::memory_order_acquire),
              "unidev: no plugin is loaded behind the PrivateUse1 device");
  return g_plugin;
}
bool loaded() { return g_loaded.load(std::memory_order_relaxed); }

int dtype_index(at::ScalarType t) {
  for (const auto& [id, type] : kScalarTypes)
    if (type == t) return id;
  return -1;
}
UD_DType ud_dtype(at::ScalarType t) { return ud_dtype_of(dtype_index(t)); }
const char* op_name(int op) { return ud_op_info(op)->name; }

void check(UD_Error* err, const char* what) {
  if (!err) return;
  const UD_Api* api = g_plugin.api;
  auto code = static_cast<UD_ErrorCode>(api->error_code(err));
  std::string msg = api->error_message(err);
  api->error_destroy(err);
  if (ud_error_kind(code) == UD_KIND_MEMORY)
    TORCH_CHECK_WITH(OutOfMemoryError, false, "unidev ", g_plugin.torch_name, ": ", what,
                     ": out of device memory: ", msg);
  std::string m = c10::str("unidev ", g_plugin.torch_name, " (plugin ", g_plugin.name, "): ", what,
                           ": ", msg);
  switch (ud_error_kind(code)) {
    case UD_KIND_VALUE: TORCH_CHECK_VALUE(false, m);
    case UD_KIND_INDEX: TORCH_CHECK_INDEX(false, m);
    case UD_KIND_NOT_IMPLEMENTED: TORCH_CHECK_NOT_IMPLEMENTED(false, m);
    default: TORCH_CHECK(false, m);
  }
}

void check_index(c10::DeviceIndex d) {
  TORCH_CHECK_VALUE(d >= 0 && d < g_plugin.device_count, "unidev ", g_plugin.torch_name,
                    ": device index ", int(d), " out of range; there are ",
                    g_plugin.device_count, " device(s)");
}

namespace {

// Debug counters (op_counts(), for tests): kernel calls per op, and copies that change the order
// of the dimensions in memory (a .contiguous() of a channels-last tensor is one).
std::atomic<int64_t> g_calls[UD_OP_COUNT];
std::atomic<int64_t> g_transposes{0};

// The input's strides, over the dimensions the output lays out from outermost to innermost,
// are not non-increasing (broadcast and size-1 dimensions do not count).
bool reorders(const UD_Tensor& in, const UD_Tensor& out) {
  if (in.ndim != out.ndim || in.ndim > 16) return false;
  int order[16], n = 0;
  for (int i = 0; i < out.ndim; ++i)
    if (out.shape[i] > 1 && in.strides[i] != 0) order[n++] = i;
  std::sort(order, order + n, [&](int a, int b) { return out.strides[a] > out.strides[b]; });
  for (int j = 1; j < n; ++j)
    if (std::abs(in.strides[order[j]]) > std::abs(in.strides[order[j - 1]])) return true;
  return false;
}

}  // namespace

std::map<std::string, int64_t> op_counts() {
  std::map<std::string, int64_t> m;
  for (int op = 0; op < UD_OP_COUNT; ++op)
    if (int64_t n = g_calls[op].load(std::memory_order_relaxed)) m[op_name(op)] = n;
  if (int64_t n = g_transposes.load(std::memory_order_relaxed)) m["copy.transposes"] = n;
  return m;
}

void reset_op_counts() {
  for (auto& n : g_calls) n.store(0, std::memory_order_relaxed);
  g_transposes.store(0, std::memory_order_relaxed);
}

void launch(UD_KernelFn fn, int op, c10::DeviceIndex device, const UD_Tensor* in, int nin,
            const UD_Tensor* out, int nout, const Attrs& attrs) {
  g_calls[op].fetch_add(1, std::memory_order_relaxed);
  if (op == UD_OP_COPY && nin == 1 && nout == 1 && reorders(in[0], out[0]))
    g_transposes.fetch_add(1, std::memory_order_relaxed);
  UD_KernelArgs args{sizeof(UD_KernelArgs), device, current_stream(device), in, nin, out, nout,
                     attrs.a, attrs.n};
  check(fn(&args), op_name(op));
}

}  // namespace unidev_torch
