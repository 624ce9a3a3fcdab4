// bridge.h — what the PluggableDevice hands its C++ variable-op library (varops.cc).
#pragma once

#include <unidev/ops.h>

#include <cstddef>

// An SP_Stream is a view of the device's one in-order unidev stream: TF's compute, copy and
// device-to-device streams all run in order on it, so allocations, copies and kernels never race.
struct SP_Stream_st {
  UD_Stream stream;
  int32_t device;
};
struct SP_Event_st {
  UD_Event event;
};

// Kernels indexed by ops.h's dtype id (UD_DT_*).
struct UdtfBridge {
  size_t struct_size;
  const char* device_type;
  const UD_Api* api;
  UD_KernelFn add[UD_DT_COUNT];
  UD_KernelFn sub[UD_DT_COUNT];
  UD_KernelFn mul[UD_DT_COUNT];
  // The PluggableDevice's C kernel of TF op `tf_op` (nullptr if it has none), made from and run
  // on TF's OpKernelConstruction / OpKernelContext (what the C API's handles point to).
  void* (*create)(void* construction, const char* tf_op);
  void (*compute)(void* kernel, void* context);
  void (*destroy)(void* kernel);
  // The TF_Code of a plugin error code: the adapter's one table (device.cc).
  int (*tf_code)(int32_t ud_error_code);
  // Device `device`'s one in-order stream (every SP_Stream of it is a view of this one).
  UD_Stream (*stream)(int32_t device);
};

// Exported by the variable-op library: registers its kernels for bridge->device_type.
// Returns the number registered; writes a message into `error` on failure.
typedef int (*UdtfRegisterVarOpsFn)(const UdtfBridge* bridge, char* error, size_t error_size);
#define UDTF_VAROPS_ENTRY "udtf_register_variable_ops"
// Also exported: called with every new kernel's OpKernelConstruction (C kernels included), so a
// device's copies are direct (varops.cc) before its first tensor is read back.
typedef void (*UdtfAdoptDeviceFn)(void* construction);
#define UDTF_VAROPS_ADOPT "udtf_adopt_device"
