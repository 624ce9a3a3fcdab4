// guard.cpp — torch's device guard for PrivateUse1: the current device and stream per thread,
// torch stream ids mapped to the plugin's streams (created on first use), torch's events as the
// plugin's events.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <mutex>

#include "unidev_torch.h"

namespace unidev_torch {
thread_local c10::DeviceIndex tls_device = 0;
namespace {

constexpr int kMaxStreams = 32;  // per device; getNewStream reuses them round-robin beyond that
std::mutex g_stream_mu;          // stream creation
std::atomic<UD_Stream> g_streams[kMaxDevices][kMaxStreams];
std::atomic<int> g_num_streams[kMaxDevices];
thread_local std::array<int64_t, kMaxDevices> tls_stream{};

int64_t new_stream_id(c10::DeviceIndex dev) {
  int n = g_num_streams[dev].fetch_add(1);
  int64_t id = 1 + n % (kMaxStreams - 1);
  stream_at(dev, id);
  return id;
}

UD_Stream ud_stream(const c10::Stream& s) { return stream_at(s.device_index(), s.id()); }

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
    ud_stream(s);
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
    if (!*e) {
      UD_Event ev = nullptr;
      check(plugin().api->event_create(s.device_index(), &ev), "event_create");
      *e = ev;
    }
    check(plugin().api->event_record(static_cast<UD_Event>(*e), ud_stream(s)), "event_record");
  }
  void block(void* e, const c10::Stream& s) const override {
    if (!e) return;
    check(plugin().api->stream_wait_event(ud_stream(s), static_cast<UD_Event>(e)),
          "stream_wait_event");
  }
  bool queryEvent(void* e) const override {
    if (!e) return true;
    int32_t done = 0;
    check(plugin().api->event_query(static_cast<UD_Event>(e), &done), "event_query");
    return done != 0;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return loaded() ? static_cast<c10::DeviceIndex>(plugin().device_count) : 0;
  }
  c10::DeviceCapability getDeviceCapability(c10::Device) const override { return {}; }
  bool queryStream(const c10::Stream& s) const override {
    int32_t done = 0;
    check(plugin().api->stream_query(ud_stream(s), &done), "stream_query");
    return done != 0;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check(plugin().api->stream_synchronize(ud_stream(s)), "stream_synchronize");
  }
  void synchronizeEvent(void* e) const override {
    if (e) check(plugin().api->event_synchronize(static_cast<UD_Event>(e)), "event_synchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    check(plugin().api->device_synchronize(d), "device_synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr& p, const c10::Stream& s) const override {
    device_allocator()->recordStream(p, s);
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK_VALUE(a && b, "unidev: elapsed_time needs two recorded events");
    double ms = 0;
    check(plugin().api->event_elapsed(static_cast<UD_Event>(a), static_cast<UD_Event>(b), &ms),
          "event_elapsed");
    return ms;
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

}  // namespace

UD_Stream stream_at(c10::DeviceIndex dev, int64_t id) {
  TORCH_CHECK_VALUE(dev >= 0 && dev < kMaxDevices && id >= 0 && id < kMaxStreams,
                    "unidev: invalid stream ", id, " on device ", int(dev));
  UD_Stream s = g_streams[dev][id].load(std::memory_order_acquire);
  if (s) return s;
  std::lock_guard<std::mutex> g(g_stream_mu);
  check_index(dev);
  s = g_streams[dev][id].load();
  if (!s) {
    check(plugin().api->stream_create(dev, &s), "stream_create");
    g_streams[dev][id].store(s, std::memory_order_release);
  }
  return s;
}

UD_Stream current_stream(c10::DeviceIndex dev) { return stream_at(dev, tls_stream[dev]); }

void synchronize_stream(c10::DeviceIndex dev) {
  check(plugin().api->stream_synchronize(current_stream(dev)), "stream_synchronize");
}

}  // namespace unidev_torch
