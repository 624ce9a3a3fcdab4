// register.cc — TF_InitKernel: the plugin's kernels looked up once, every handler family
// registered, then one TF kernel per (TF op, dtype) the plugin can serve.
#include "call.h"

extern "C" __attribute__((visibility("default"))) void TF_InitKernel() {
  static bool done = false;  // TF may call it once as an op library and once as a device
  const UD_Api* api = udtf::plugin().api;
  if (!api || done) return;  // a rejected plugin has no devices and gets no kernels
  done = true;
  udtf::lookup_kernels(api);
  udtf::register_elementwise();
  udtf::register_reduce();
  udtf::register_matmul();
  udtf::register_shape();
  udtf::register_loss();
  udtf::register_conv();
  udtf::register_pool();
  udtf::register_norm();
  udtf::register_kernels();
  udtf::register_variable_ops(api);
}
