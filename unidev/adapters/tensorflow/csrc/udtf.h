// udtf.h — what the PluggableDevice's translation units share: the loaded plugin and its streams.
#pragma once

#include <unidev/unidev.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#include "bridge.h"


namespace udtf {

struct Plugin {
  const UD_Api* api = nullptr;
  int32_t devices = 0;
  std::string error;  // why the plugin is not used (devices == 0)
  bool off = false;   // the user switched it off (UNIDEV_PLUGINS, ...): say nothing
  std::atomic<int64_t> in_use{0}, peak{0}, allocs{0}, largest{0};
};

Plugin& plugin();
// True in a second copy of the same adapter loaded into one process (it then stays inert).
bool duplicate();
// The platform's name: UDTF_TYPE, or an inert name of its own in a duplicate.
const char* platform_name();
// The device's shared stream, created on first use; nullptr with `status` set on failure.
UD_Stream device_stream(int32_t device, TF_Status* status);
// Moves a plugin error into `status` ("<what>: <message>") and frees it; false if there was one.
bool check(UD_Error* err, TF_Status* status, const std::string& what);
// The TF_Code of a plugin error code (generated from unidev/contract/errors.py; kernel.cc).
TF_Code tf_code(UD_ErrorCode code);
// Why a kernel for TF op `op` with type constraints (attr, TF_DataType) and host-memory
// arguments `host` contradicts the op's definition in the running TF; empty if it does not.
std::string opdef_mismatch(const char* op, const std::vector<std::pair<const char*, int>>& types,
                           const std::vector<const char*>& host);

}  // namespace udtf

// Compiled in by build.py: the TF device type and the name of the plugin this adapter serves
// (its library is found through discovery when TF loads the adapter).
#ifndef UDTF_TYPE
#error "UDTF_TYPE must be defined (the plugin's tf_type)"
#endif
#ifndef UDTF_PLUGIN
#error "UDTF_PLUGIN must be defined (the plugin's name)"
#endif
