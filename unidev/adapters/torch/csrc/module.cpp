// module.cpp — the extension's Python functions (device_module.py and unidev.torch call them).
// The only file that includes pybind11: plain pybind11, not torch/extension.h, which alone costs
// about 40 s of compile time; c10 errors reach Python through torch's exception translation.
#include <c10/core/CachingDeviceAllocator.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "unidev_torch.h"

namespace ut = unidev_torch;
namespace unidev_torch {  // aten/nn.cpp: this thread's conv algorithms (unidev.torch.swap_conv2d)
void set_conv_algorithms(const std::string& fwd, const std::string& gx, const std::string& gw);
}
namespace py = pybind11;

namespace {

c10::DeviceIndex index(int d) {
  ut::check_index(static_cast<c10::DeviceIndex>(d));
  return static_cast<c10::DeviceIndex>(d);
}

py::dict stats_dict(int dev) {
  auto s = ut::device_allocator()->getDeviceStats(index(dev));
  py::dict d;
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

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("init", &ut::init, "bind PrivateUse1 to the plugin table at address `api`",
        py::arg("api"), py::arg("path"), py::arg("torch_name"));
  m.def("device_count", [] { return ut::loaded() ? ut::plugin().device_count : 0; });
  m.def("current_device", [] { return int(ut::tls_device); });
  m.def("set_device", [](int d) { ut::tls_device = index(d); });
  m.def("synchronize", [](int d) {
    py::gil_scoped_release nogil;
    ut::check(ut::plugin().api->device_synchronize(index(d)), "device_synchronize");
  });
  m.def("memory_stats", &stats_dict);
  m.def("empty_cache", [] { ut::device_allocator()->emptyCache({0, 0}); });
  m.def("reset_peak_stats", [](int d) { ut::device_allocator()->resetPeakStats(index(d)); });
  m.def("mem_get_info", [](int d) { return ut::device_allocator()->getMemoryInfo(index(d)); });
  m.def("manual_seed", [](int d, uint64_t seed) { ut::manual_seed(index(d), seed); });
  m.def("initial_seed", [](int d) { return ut::initial_seed(index(d)); });
  m.def("fallback_counts", &ut::fallback_counts);
  m.def("reset_fallbacks", &ut::reset_fallbacks);
  m.def("registered_ops", &ut::registered_ops);
  m.def("op_counts", &ut::op_counts);
  m.def("reset_op_counts", &ut::reset_op_counts);
  m.def("set_fallback_mode", &ut::set_fallback_mode);
  m.def("set_conv_algorithms", &ut::set_conv_algorithms, "this thread's conv2d, grad_x, grad_w "
        "algorithms for the next calls (\"\": the op's default)");
}
