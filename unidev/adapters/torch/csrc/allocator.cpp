// allocator.cpp — the caching c10::DeviceAllocator over the plugin's stream-ordered malloc
// (blocks reused per device, stream and rounded size; recordStream honoured), storage growth for
// resize_, and the pinned host allocator behind pin_memory() and is_pinned().
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>

#include "unidev_torch.h"

namespace unidev_torch {
namespace {

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
    count_live(b, true);
    return {reinterpret_cast<void*>(b->handle), b, &free_block,
            c10::Device(c10::DeviceType::PrivateUse1, dev)};
  }

  void release(Block* b) {
    for (UD_Stream s : b->used_on)
      if (s != b->stream) check(plugin().api->stream_synchronize(s), "free (recorded stream)");
    b->used_on.clear();
    std::lock_guard<std::mutex> g(mu_);
    count_live(b, false);
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
    if (!loaded()) return;
    for (int d = 0; d < plugin().device_count; ++d) release_cached(static_cast<c10::DeviceIndex>(d));
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
    check(plugin().api->device_memory_info(dev, &free_b, &total), "device_memory_info");
    return {free_b, total};
  }

 private:
  // a live block's statistics: one allocation, its bytes, the bytes asked for (mu_ held)
  void count_live(const Block* b, bool up) {
    auto& st = stats_[b->device];
    for (auto [s, n] : {std::pair{&st.allocation, size_t{1}}, {&st.active, size_t{1}},
                        {&st.allocated_bytes, b->size}, {&st.active_bytes, b->size},
                        {&st.requested_bytes, b->requested}})
      up ? (*s)[0].increase(n) : (*s)[0].decrease(n);
  }

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
        TORCH_CHECK_WITH(OutOfMemoryError, false, "unidev ", plugin().torch_name, ":",
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

}  // namespace

c10::Allocator* allocator() { return &g_allocator; }
c10::DeviceAllocator* device_allocator() { return &g_allocator; }
c10::Allocator* pinned_allocator() { return &g_pinned; }
bool is_pinned(const void* p) { return p && g_pinned.contains(p); }

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

}  // namespace unidev_torch
