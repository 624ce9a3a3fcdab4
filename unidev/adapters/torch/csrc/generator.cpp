// generator.cpp — torch's per-device default generators for PrivateUse1. Random ops fall back to
// CPU kernels; these keep torch's seeding API (manual_seed, initial_seed, get_rng_state) per device.
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "unidev_torch.h"

namespace unidev_torch {
namespace {

struct Generator : at::CPUGeneratorImpl {
  explicit Generator(c10::DeviceIndex d) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, d);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex d) {
  static std::vector<at::Generator> gens = [] {
    std::vector<at::Generator> v;
    for (int i = 0; i < plugin().device_count; ++i)
      v.push_back(at::make_generator<Generator>(static_cast<c10::DeviceIndex>(i)));
    return v;
  }();
  if (d < 0) d = tls_device;
  check_index(d);
  return gens[d];
}

at::Generator new_generator(c10::DeviceIndex d) {
  return at::make_generator<Generator>(d < 0 ? tls_device : d);
}

void manual_seed(c10::DeviceIndex d, uint64_t seed) {
  at::Generator g = default_generator(d);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
}

uint64_t initial_seed(c10::DeviceIndex d) { return default_generator(d).current_seed(); }

}  // namespace unidev_torch
