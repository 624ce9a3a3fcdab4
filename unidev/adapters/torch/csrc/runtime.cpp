// runtime.cpp — the device side of the PrivateUse1 backend: loading the plugin, a caching
// allocator over its stream-ordered malloc, the device guard with the plugin's streams and
// events, the hooks, the generator, and the Python functions the adapter's modules call.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>
#include <torch/extension.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "unidev_torch.h"

namespace unidev_torch {
thread_local c10::DeviceIndex tls_device = 0;
namespace {

constexpr int kMaxDevices = 16;
constexpr int kMaxStreams = 32;  // per device; getNewStream reuses them round-robin beyond that
const at::ScalarType kScalarTypes[kNumDTypes] = {at::kFloat, at::kDouble, at::kHalf,
                                                 at::kBFloat16, at::kInt, at::kLong,
                                                 at::kByte, at::kBool};
const UD_DType kUdTypes[kNumDTypes] = {{UD_DTYPE_FLOAT, 32, 1}, {UD_DTYPE_FLOAT, 64, 1},
                                       {UD_DTYPE_FLOAT, 16, 1}, {UD_DTYPE_BFLOAT, 16, 1},
                                       {UD_DTYPE_INT, 32, 1},   {UD_DTYPE_INT, 64, 1},
                                       {UD_DTYPE_UINT, 8, 1},   {UD_DTYPE_BOOL, 8, 1}};

Plugin g_plugin;
std::atomic<bool> g_loaded{false};
std::mutex g_mu;  // plugin loading, stream creation
std::atomic<UD_Stream> g_streams[kMaxDevices][kMaxStreams];
std::atomic<int> g_num_streams[kMaxDevices];
thread_local std::array<int64_t, kMaxDevices> tls_stream{};

std::mutex g_fb_mu;
std::map<std::string, int64_t> g_fallbacks;

void check_index(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < g_plugin.device_count, "unidev ", g_plugin.torch_name, ": device index ",
              int(d), " out of range; there are ", g_plugin.device_count, " device(s)");
}

UD_Stream stream_at(c10::DeviceIndex dev, int64_t id) {
  TORCH_CHECK(dev >= 0 && dev < kMaxDevices && id >= 0 && id < kMaxStreams,
              "unidev: invalid stream ", id, " on device ", int(dev));
  UD_Stream s = g_streams[dev][id].load(std::memory_order_acquire);
  if (s) return s;
  std::lock_guard<std::mutex> g(g_mu);
  check_index(dev);
  s = g_streams[dev][id].load();
  if (!s) {
    check(plugin().api->stream_create(dev, &s), "stream_create");
    g_streams[dev][id].store(s, std::memory_order_release);
  }
  return s;
}

int64_t new_stream_id(c10::DeviceIndex dev) {
  int n = g_num_streams[dev].fetch_add(1);
  int64_t id = 1 + n % (kMaxStreams - 1);
  stream_at(dev, id);
  return id;
}

// ---------------------------------------------------------------------------------------------
// Allocator: caches freed blocks per (device, stream, rounded size). A block is reused only by
// allocations on the stream it was allocated on, whose work runs in order, so reuse needs no
// synchronization; recordStream adds streams that must be drained before the block is reused.
// ---------------------------------------------------------------------------------------------
struct Block {
  UD_Handle handle;
  size_t size, requested;
  c10::DeviceIndex device;
  UD_Stream stream;
  std::vector<UD_Stream> used_on;
};

size_t round_size(size_t n) {
  if (n <= 512) return 512;
  if (n < (1u << 20)) return (n + 511) & ~size_t(511);
  return (n + (1u << 20) - 1) & ~size_t((1u << 20) - 1);
}

void free_block(void* ctx);

class CachingAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex dev = tls_device;
    check_index(dev);
    UD_Stream stream = current_stream(dev);
    size_t size = round_size(n);
    Block* b = nullptr;
    std::unique_lock<std::mutex> lock(mu_);
    auto it = cache_.find({dev, stream, size});
    if (it != cache_.end() && !it->second.empty()) {
      b = it->second.back();
      it->second.pop_back();
    } else {
      lock.unlock();  // fresh() may release the cache and retry: it locks by itself
      b = fresh(dev, stream, size);
      lock.lock();
    }
    b->requested = n;
    auto& st = stats_[dev];
    st.allocation[0].increase(1);
    st.active[0].increase(1);
    st.allocated_bytes[0].increase(size);
    st.active_bytes[0].increase(size);
    st.requested_bytes[0].increase(n);
    return {reinterpret_cast<void*>(b->handle), b, &free_block,
            c10::Device(c10::DeviceType::PrivateUse1, dev)};
  }

  void release(Block* b) {
    for (UD_Stream s : b->used_on)
      if (s != b->stream) check(plugin().api->stream_synchronize(s), "free (recorded stream)");
    b->used_on.clear();
    std::lock_guard<std::mutex> g(mu_);
    auto& st = stats_[b->device];
    st.allocation[0].decrease(1);
    st.active[0].decrease(1);
    st.allocated_bytes[0].decrease(b->size);
    st.active_bytes[0].decrease(b->size);
    st.requested_bytes[0].decrease(b->requested);
    cache_[{b->device, b->stream, b->size}].push_back(b);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dst, const void* src, size_t count) const override {
    c10::DeviceIndex dev = tls_device;
    check(plugin().api->memcpy_d2d(current_stream(dev), reinterpret_cast<UD_Handle>(dst),
                                   reinterpret_cast<UD_Handle>(src), count),
          "copy_data");
  }

  bool initialized() override { return loaded(); }

  void emptyCache(c10::MempoolId_t) override {
    for (int d = 0; d < g_plugin.device_count; ++d) release_cached(static_cast<c10::DeviceIndex>(d));
  }

  void release_cached(c10::DeviceIndex dev) {
    std::vector<Block*> victims;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto it = cache_.begin(); it != cache_.end();) {
        if (std::get<0>(it->first) == dev) {
          victims.insert(victims.end(), it->second.begin(), it->second.end());
          it = cache_.erase(it);
        } else {
          ++it;
        }
      }
      for (Block* b : victims) {
        stats_[dev].reserved_bytes[0].decrease(b->size);
        stats_[dev].segment[0].decrease(1);
        stats_[dev].num_device_free++;
      }
    }
    for (Block* b : victims) {
      UD_Error* err = plugin().api->mem_free(dev, b->stream, b->handle);
      delete b;
      check(err, "mem_free");
    }
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    auto* b = static_cast<Block*>(ptr.get_context());
    if (!b || ptr.get_deleter() != &free_block) return;
    UD_Stream s = stream_at(stream.device_index(), stream.id());
    std::lock_guard<std::mutex> g(mu_);
    if (s != b->stream) b->used_on.push_back(s);
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex dev) override {
    std::lock_guard<std::mutex> g(mu_);
    return stats_[dev];
  }
  template <class F>
  void each_stat(c10::DeviceIndex dev, F f) {
    std::lock_guard<std::mutex> g(mu_);
    auto& s = stats_[dev];
    for (auto* a : {&s.allocation, &s.segment, &s.active, &s.allocated_bytes, &s.reserved_bytes,
                    &s.active_bytes, &s.requested_bytes})
      f((*a)[0]);
  }
  void resetAccumulatedStats(c10::DeviceIndex dev) override {
    each_stat(dev, [](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
  }
  void resetPeakStats(c10::DeviceIndex dev) override {
    each_stat(dev, [](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex dev) override {
    uint64_t free_b = 0, total = 0;
    TORCH_CHECK(plugin().api->device_memory_info, "unidev: plugin has no device_memory_info");
    check(plugin().api->device_memory_info(dev, &free_b, &total), "device_memory_info");
    return {free_b, total};
  }

 private:
  Block* fresh(c10::DeviceIndex dev, UD_Stream stream, size_t size) {
    UD_Handle h = 0;
    UD_Error* err = plugin().api->mem_alloc(dev, stream, size, &h);
    if (err && plugin().api->error_code(err) == UD_ERR_OUT_OF_MEMORY) {
      plugin().api->error_destroy(err);
      {
        std::lock_guard<std::mutex> g(mu_);
        stats_[dev].num_alloc_retries++;
      }
      release_cached(dev);
      check(plugin().api->device_synchronize(dev), "device_synchronize");
      err = plugin().api->mem_alloc(dev, stream, size, &h);
      if (err && plugin().api->error_code(err) == UD_ERR_OUT_OF_MEMORY) {
        std::string msg = plugin().api->error_message(err);
        plugin().api->error_destroy(err);
        int64_t in_use;
        {
          std::lock_guard<std::mutex> g(mu_);
          stats_[dev].num_ooms++;
          in_use = stats_[dev].allocated_bytes[0].current;
        }
        TORCH_CHECK_WITH(OutOfMemoryError, false, "unidev ", g_plugin.torch_name, ":",
                         int(dev), " out of memory: tried to allocate ", size, " bytes with ",
                         in_use, " bytes in use by tensors (", msg, ")");
      }
    }
    check(err, "mem_alloc");
    TORCH_CHECK(h != 0, "unidev: plugin mem_alloc returned handle 0");
    // The contract's malloc is stream-ordered, but torch hands a block to whatever stream asks
    // (cudaMalloc semantics): wait for the allocation itself once, on this cache miss only.
    check(plugin().api->stream_synchronize(stream), "stream_synchronize after mem_alloc");
    std::lock_guard<std::mutex> g(mu_);
    stats_[dev].reserved_bytes[0].increase(size);
    stats_[dev].segment[0].increase(1);
    stats_[dev].num_device_alloc++;
    return new Block{h, size, 0, dev, stream, {}};
  }

  std::mutex mu_;
  std::map<std::tuple<c10::DeviceIndex, UD_Stream, size_t>, std::vector<Block*>> cache_;
  c10::CachingDeviceAllocator::DeviceStats stats_[kMaxDevices];
};

CachingAllocator g_allocator;
void free_block(void* ctx) { g_allocator.release(static_cast<Block*>(ctx)); }
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// ---------------------------------------------------------------------------------------------
// Pinned host memory (pin_memory(), DataLoader(pin_memory=True)): page-aligned host blocks,
// page-locked where the memlock limit allows, and known to is_pinned(). The contract has no
// host allocation call; every plugin's copies accept any host pointer.
// ---------------------------------------------------------------------------------------------
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t size = std::max<size_t>((n + page - 1) / page * page, page);
    void* p = nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&p, page, size) == 0,
                     "unidev: cannot allocate ", n, " bytes of pinned host memory");
    bool locked = mlock(p, size) == 0;
    std::lock_guard<std::mutex> g(mu_);
    blocks_[p] = {size, locked};
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  bool contains(const void* p) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return false;
    --it;
    return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second.first;
  }
  static void free_pinned(void* p);
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dst, const void* src, size_t count) const override {
    std::memcpy(dst, src, count);
  }

 private:
  std::mutex mu_;
  std::map<const void*, std::pair<size_t, bool>> blocks_;  // start -> (size, page-locked)
};

PinnedAllocator g_pinned;
void PinnedAllocator::free_pinned(void* p) {
  std::pair<size_t, bool> b;
  {
    std::lock_guard<std::mutex> g(g_pinned.mu_);
    auto it = g_pinned.blocks_.find(p);
    if (it == g_pinned.blocks_.end()) return;
    b = it->second;
    g_pinned.blocks_.erase(it);
  }
  if (b.second) munlock(p, b.first);
  std::free(p);
}

// ---------------------------------------------------------------------------------------------
// Guard: current device and stream per thread; torch's events are the plugin's events.
// ---------------------------------------------------------------------------------------------
struct Guard final : c10::impl::DeviceGuardImplInterface {
  static constexpr auto kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kType, tls_device}; }
  void setDevice(c10::Device d) const override {
    check_index(d.index());
    tls_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tls_device = d.index(); }
  static c10::Device full(c10::Device d) { return d.has_index() ? d : c10::Device(kType, tls_device); }
  c10::Stream getStream(c10::Device d) const override {
    d = full(d);
    return c10::Stream(c10::Stream::UNSAFE, d, tls_stream[d.index()]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, full(d), 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return getNewStream(d, 0);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    d = full(d);
    return c10::Stream(c10::Stream::UNSAFE, d, new_stream_id(d.index()));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    stream_at(s.device_index(), s.id());
    tls_stream[s.device_index()] = s.id();
    return old;
  }
  void destroyEvent(void* e, const c10::DeviceIndex) const noexcept override {
    if (!e || !loaded()) return;
    UD_Error* err = plugin().api->event_destroy(static_cast<UD_Event>(e));
    if (err) plugin().api->error_destroy(err);
  }
  void record(void** e, const c10::Stream& s, const c10::DeviceIndex, const c10::EventFlag) const
      override {
    TORCH_CHECK(plugin().api->event_create, "unidev: plugin has no events");
    if (!*e) {
      UD_Event ev = nullptr;
      check(plugin().api->event_create(s.device_index(), &ev), "event_create");
      *e = ev;
    }
    check(plugin().api->event_record(static_cast<UD_Event>(*e), stream_at(s.device_index(), s.id())),
          "event_record");
  }
  void block(void* e, const c10::Stream& s) const override {
    if (!e) return;
    check(plugin().api->stream_wait_event(stream_at(s.device_index(), s.id()),
                                          static_cast<UD_Event>(e)),
          "stream_wait_event");
  }
  bool queryEvent(void* e) const override {
    if (!e) return true;
    int32_t done = 0;
    check(plugin().api->event_query(static_cast<UD_Event>(e), &done), "event_query");
    return done != 0;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return loaded() ? static_cast<c10::DeviceIndex>(g_plugin.device_count) : 0;
  }
  c10::DeviceCapability getDeviceCapability(c10::Device) const override { return {}; }
  bool queryStream(const c10::Stream& s) const override {
    int32_t done = 0;
    check(plugin().api->stream_query(stream_at(s.device_index(), s.id()), &done), "stream_query");
    return done != 0;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check(plugin().api->stream_synchronize(stream_at(s.device_index(), s.id())),
          "stream_synchronize");
  }
  void synchronizeEvent(void* e) const override {
    if (e) check(plugin().api->event_synchronize(static_cast<UD_Event>(e)), "event_synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    check(plugin().api->device_synchronize(d), "device_synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr& p, const c10::Stream& s) const override {
    g_allocator.recordStream(p, s);
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b, "unidev: elapsed_time needs two recorded events");
    double ms = 0;
    check(plugin().api->event_elapsed(static_cast<UD_Event>(a), static_cast<UD_Event>(b), &ms),
          "event_elapsed");
    return ms;
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// ---------------------------------------------------------------------------------------------
// Generator and hooks. Random ops fall back to CPU kernels; the device generator keeps torch's
// seeding API (manual_seed, get_rng_state) working per device.
// ---------------------------------------------------------------------------------------------
struct Generator : at::CPUGeneratorImpl {
  explicit Generator(c10::DeviceIndex d) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, d);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

const at::Generator& default_generator(c10::DeviceIndex d) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int i = 0; i < g_plugin.device_count; ++i)
      v.push_back(at::make_generator<Generator>(static_cast<c10::DeviceIndex>(i)));
    return v;
  }();
  if (d < 0) d = tls_device;
  check_index(d);
  return gens[d];
}

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return loaded() && g_plugin.device_count > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<Generator>(d < 0 ? tls_device : d);
  }
  c10::Device getDeviceFromPtr(void*) const override {  // handles are opaque: the current one
    return {c10::DeviceType::PrivateUse1, tls_device};
  }
  bool isPinnedPtr(const void* p) const override { return p && g_pinned.contains(p); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(g_plugin.device_count);
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    check_index(d);
    tls_device = d;
  }
  c10::DeviceIndex getCurrentDevice() const override { return tls_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = tls_device;
    setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& s, size_t n) const override { resize_bytes(s, n); }
};

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------
int init(const std::string& path, const std::string& torch_name) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_loaded) {
    TORCH_CHECK(path == g_plugin.path, "unidev: PrivateUse1 is already bound to plugin '",
                g_plugin.name, "' (", g_plugin.path, "); torch allows one such backend per process");
    return g_plugin.device_count;
  }
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(dl, "unidev: cannot load plugin library ", path, ": ", dlerror());
  auto get = reinterpret_cast<UD_GetApiFn>(dlsym(dl, UD_ENTRY_POINT));
  TORCH_CHECK(get, "unidev: ", path, " does not export " UD_ENTRY_POINT "()");
  const UD_Api* api = get();
  TORCH_CHECK(api && api->abi_major == UD_ABI_MAJOR &&
                  api->struct_size >= offsetof(UD_Api, kernel_lookup) + sizeof(void*),
              "unidev: ", path, " has an incompatible UD_Api (need ABI ", UD_ABI_MAJOR, ".x)");
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
  for (int op = 0; op < OP_COUNT; ++op) {
    for (int d = 0; d < kNumDTypes; ++d) {
      if (!(kOpDTypes[op] & (1u << d))) continue;
      UD_KernelFn fn = nullptr;
      err = api->kernel_lookup(kOpName[op], kUdTypes[d], &fn);
      if (err) api->error_destroy(err);
      else p.kernels[op][d] = fn;
    }
    for (int k = kAttrBegin[op]; k < kAttrBegin[op + 1]; ++k) {
      const AttrDef& def = kAttrDefs[k];
      UD_Attr& a = p.defaults[op][k - kAttrBegin[op]];
      a.name = def.name;
      a.type = def.type;
      if (def.type == UD_ATTR_FLOAT) a.value.f = def.f;
      else if (def.type == UD_ATTR_INT) a.value.i = def.i;
      else if (def.type == UD_ATTR_BOOL) a.value.b = static_cast<int32_t>(def.i);
      else if (def.type == UD_ATTR_STRING) a.value.s = def.s;
      else a.value.ints = {reinterpret_cast<const int64_t*>(def.ints), def.n};
    }
  }
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  g_loaded = true;
  return p.device_count;
}

pybind11::dict stats_dict(int dev) {
  check_index(static_cast<c10::DeviceIndex>(dev));
  auto s = g_allocator.getDeviceStats(static_cast<c10::DeviceIndex>(dev));
  pybind11::dict d;
  for (auto [name, st] : {std::pair{"allocated_bytes", &s.allocated_bytes},
                          {"reserved_bytes", &s.reserved_bytes}, {"active_bytes", &s.active_bytes},
                          {"requested_bytes", &s.requested_bytes}, {"allocation", &s.allocation},
                          {"segment", &s.segment}})
    for (auto [key, v] : {std::pair{"current", (*st)[0].current}, {"peak", (*st)[0].peak},
                          {"allocated", (*st)[0].allocated}, {"freed", (*st)[0].freed}})
      d[(std::string(name) + ".all." + key).c_str()] = v;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  return d;
}

}  // namespace

Plugin& plugin() {
  TORCH_CHECK(g_loaded.load(std::memory_order_acquire),
              "unidev: no plugin is loaded behind the PrivateUse1 device");
  return g_plugin;
}
bool loaded() { return g_loaded.load(std::memory_order_relaxed); }

int dtype_index(at::ScalarType t) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kScalarTypes[i] == t) return i;
  return -1;
}
UD_DType ud_dtype(at::ScalarType t) {
  int i = dtype_index(t);
  return i < 0 ? UD_DType{0, 0, 0} : kUdTypes[i];
}

void check(UD_Error* err, const char* what) {
  if (!err) return;
  const UD_Api* api = g_plugin.api;
  int code = api->error_code(err);
  std::string msg = api->error_message(err);
  api->error_destroy(err);
  TORCH_CHECK_WITH(OutOfMemoryError, code != UD_ERR_OUT_OF_MEMORY, "unidev ", g_plugin.torch_name,
                   ": ", what, ": out of device memory: ", msg);
  TORCH_CHECK(false, "unidev ", g_plugin.torch_name, " (plugin ", g_plugin.name, "): ", what, ": ",
              msg);
}

UD_Stream current_stream(c10::DeviceIndex dev) { return stream_at(dev, tls_stream[dev]); }
void synchronize_stream(c10::DeviceIndex dev) {
  check(plugin().api->stream_synchronize(current_stream(dev)), "stream_synchronize");
}
c10::Allocator* allocator() { return &g_allocator; }

void resize_bytes(const c10::Storage& storage, size_t nbytes) {
  auto* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "unidev: trying to resize a storage that is not resizable");
  c10::DeviceIndex dev = storage.device().index();
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
  c10::Device old_dev = guard.exchangeDevice(storage.device());
  c10::DataPtr fresh = g_allocator.allocate(nbytes);
  size_t keep = std::min(nbytes, impl->nbytes());
  if (keep > 0 && impl->data())
    check(plugin().api->memcpy_d2d(current_stream(dev), reinterpret_cast<UD_Handle>(fresh.get()),
                                   reinterpret_cast<UD_Handle>(impl->data()), keep),
          "resize (copy)");
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
  guard.uncheckedSetDevice(old_dev);
}

int64_t count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> g(g_fb_mu);
  return ++g_fallbacks[op];
}

void launch(UD_KernelFn fn, int op, c10::DeviceIndex device, const UD_Tensor* in, int nin,
            const UD_Tensor* out, int nout, const Attrs& attrs) {
  UD_KernelArgs args{sizeof(UD_KernelArgs), device, current_stream(device), in, nin, out, nout,
                     attrs.a, attrs.n};
  check(fn(&args), kOpName[op]);
}

}  // namespace unidev_torch

namespace ut = unidev_torch;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("init", &ut::init, "bind PrivateUse1 to the plugin library at `path`");
  m.def("device_count", [] { return ut::loaded() ? ut::plugin().device_count : 0; });
  m.def("current_device", [] { return int(ut::tls_device); });
  m.def("set_device", [](int d) {
    ut::check_index(static_cast<c10::DeviceIndex>(d));
    ut::tls_device = static_cast<c10::DeviceIndex>(d);
  });
  m.def("synchronize", [](int d) {
    pybind11::gil_scoped_release nogil;
    ut::check(ut::plugin().api->device_synchronize(d), "device_synchronize");
  });
  m.def("memory_stats", &ut::stats_dict);
  m.def("empty_cache", [] { ut::g_allocator.emptyCache({0, 0}); });
  m.def("reset_peak_stats", [](int d) { ut::g_allocator.resetPeakStats(d); });
  m.def("mem_get_info", [](int d) { return ut::g_allocator.getMemoryInfo(d); });
  m.def("manual_seed", [](int d, uint64_t seed) {
    at::Generator g = ut::default_generator(static_cast<c10::DeviceIndex>(d));
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  });
  m.def("initial_seed", [](int d) {
    return ut::default_generator(static_cast<c10::DeviceIndex>(d)).current_seed();
  });
  m.def("fallback_counts", [] {
    std::lock_guard<std::mutex> g(ut::g_fb_mu);
    return ut::g_fallbacks;
  });
  m.def("reset_fallbacks", [] {
    std::lock_guard<std::mutex> g(ut::g_fb_mu);
    ut::g_fallbacks.clear();
  });
  m.def("registered_ops", &ut::registered_ops);
  m.def("set_fallback_mode", &ut::set_fallback_mode);
}
