// hooks.cpp — torch's PrivateUse1 hooks: availability, device counts and the current device,
// generators, pinned memory, storage growth; registered once a plugin is bound (loader.cpp).
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "unidev_torch.h"

namespace unidev_torch {

const at::Generator& default_generator(c10::DeviceIndex d);  // generator.cpp
at::Generator new_generator(c10::DeviceIndex d);

namespace {

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return loaded() && plugin().device_count > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  c10::Device getDeviceFromPtr(void*) const override {  // handles are opaque: the current one
    return {c10::DeviceType::PrivateUse1, tls_device};
  }
  bool isPinnedPtr(const void* p) const override { return is_pinned(p); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(plugin().device_count);
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

}  // namespace

void register_hooks() { at::RegisterPrivateUse1HooksInterface(new Hooks()); }

}  // namespace unidev_torch
