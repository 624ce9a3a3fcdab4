// plugin.cc — the plugin a PluggableDevice serves: resolved through unidev's discovery, checked
// by loader.h's ABI rule, loaded once per process; its streams, and plugin errors as TF statuses.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <unidev/loader.h>

#include "udtf.h"

extern "C" __attribute__((visibility("default"))) const char udtf_device_type[] = UDTF_TYPE;
extern "C" __attribute__((visibility("default"))) int udtf_claimed = 0;

namespace udtf {
namespace {

std::mutex g_mu;
std::vector<UD_Stream> g_streams;

// The plugin's library is what unidev's discovery finds now (`unidev list`'s answer), asked
// through the Python that runs TF: unidev.adapters.tensorflow.resolve.library(). Python's C API
// is looked up at run time, so the adapter links no libpython. Returns "OK <address> <path>",
// "OFF <why>" (switched off by the user) or "ERR <why>".
std::string resolve() {
  using Obj = void*;
  auto sym = [](const char* n) { return dlsym(RTLD_DEFAULT, n); };
  auto initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  auto ensure = reinterpret_cast<int (*)()>(sym("PyGILState_Ensure"));
  auto release = reinterpret_cast<void (*)(int)>(sym("PyGILState_Release"));
  auto import = reinterpret_cast<Obj (*)(const char*)>(sym("PyImport_ImportModule"));
  auto call = reinterpret_cast<Obj (*)(Obj, const char*, const char*, ...)>(
      sym("PyObject_CallMethod"));
  auto utf8 = reinterpret_cast<const char* (*)(Obj)>(sym("PyUnicode_AsUTF8"));
  auto decref = reinterpret_cast<void (*)(Obj)>(sym("Py_DecRef"));
  auto clear = reinterpret_cast<void (*)()>(sym("PyErr_Clear"));
  if (!initialized || !ensure || !release || !import || !call || !utf8 || !decref || !clear ||
      !initialized())
    return "ERR TensorFlow runs outside Python here; the adapter resolves plugins through "
           "unidev's discovery, which needs it";
  int gil = ensure();
  std::string out = "ERR unidev.adapters.tensorflow.resolve is not importable in this Python";
  if (Obj mod = import("unidev.adapters.tensorflow.resolve")) {
    Obj res = call(mod, "library", "ss", UDTF_PLUGIN, UDTF_TYPE);
    const char* text = res ? utf8(res) : nullptr;
    out = text ? text : "ERR unidev's resolver failed";
    if (res) decref(res);
    decref(mod);
  }
  clear();
  release(gil);
  return out;
}

// TF's oneDNN graph and eager rewrites treat every device whose name contains "CPU" as its
// CPU and swap in _Mkl* ops that have no kernels here, so such a type works only without them.
bool onednn_conflict() {
  const char* v = std::getenv("TF_ENABLE_ONEDNN_OPTS");
  bool off = v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0);
  return std::strstr(UDTF_TYPE, "CPU") != nullptr && !off;
}

void load(Plugin& p) {
  if (onednn_conflict()) {
    p.error = "its device type contains 'CPU', which TF's oneDNN rewrites claim; rename the "
              "plugin's tf_type or set TF_ENABLE_ONEDNN_OPTS=0";
    return;
  }
  std::string found = resolve();
  if (found.compare(0, 3, "OK ") != 0) {
    p.off = found.compare(0, 4, "OFF ") == 0;
    p.error = found.substr(found.find(' ') + 1);
    return;
  }
  // "OK <address> <path>": the table discovery's loader (loader.h) validated in this process,
  // so the library is loaded once; checked again here (cheap), or opened if no address came.
  const std::string rest = found.substr(3);
  const size_t gap = rest.find(' ');
  const std::string lib = gap == std::string::npos ? rest : rest.substr(gap + 1);
  auto api = reinterpret_cast<const UD_Api*>(
      uintptr_t(std::strtoull(rest.substr(0, gap).c_str(), nullptr, 10)));
  char why[1024] = {};
  if (!api) {
    UD_Loaded loaded;
    if (ud_loader_open(lib.c_str(), &loaded) != UD_LOAD_OK) {
      p.error = std::string(loaded.error) +
                " (reinstall the plugin, then run `unidev build tensorflow`)";
      return;
    }
    api = loaded.api;
  } else if (ud_loader_check(api, lib.c_str(), why, sizeof why) != UD_LOAD_OK) {
    p.error = why;
    return;
  }
  int32_t n = 0;
  const char* reason = nullptr;
  UD_Error* err = api->device_count(&n, &reason);
  if (err) {
    p.error = std::string("device_count failed: ") + api->error_message(err);
    api->error_destroy(err);
    return;
  }
  if (n <= 0) {
    p.error = reason ? reason : "the plugin reports no devices";
    return;
  }
  p.api = api;
  p.devices = n;
  std::lock_guard<std::mutex> g(g_mu);
  g_streams.assign(n, nullptr);
}

// TF crashes when a second copy of an adapter registers the same platform (the installed one
// plus one on TF_PLUGGABLE_DEVICE_LIBRARY_PATH, say). The first copy loaded claims the type;
// later copies find the claim among the loaded libraries and stand down.
int claimed_elsewhere(dl_phdr_info* info, size_t, void*) {
  void* h = info->dlpi_name && *info->dlpi_name ? dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD)
                                                : nullptr;
  if (!h) return 0;
  auto* type = static_cast<const char*>(dlsym(h, "udtf_device_type"));
  auto* claimed = static_cast<const int*>(dlsym(h, "udtf_claimed"));
  int hit = type && claimed && claimed != &udtf_claimed && *claimed &&
            std::strcmp(type, UDTF_TYPE) == 0;
  dlclose(h);
  return hit;
}

}  // namespace

const char* platform_name() {
  // A duplicate registers an inert platform under a name of its own (letters from its address).
  static const std::string name = [] {
    if (!duplicate()) return std::string(UDTF_TYPE);
    std::string n = "UNIDEV_DUPLICATE_" UDTF_TYPE "_";
    for (uintptr_t a = reinterpret_cast<uintptr_t>(&udtf_claimed) >> 4; a; a /= 26)
      n += char('A' + a % 26);
    return n;
  }();
  return name.c_str();
}

bool duplicate() {
  static const bool dup = [] {
    if (dl_iterate_phdr(claimed_elsewhere, nullptr)) return true;
    udtf_claimed = 1;
    return false;
  }();
  return dup;
}

Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    if (duplicate()) {
      p.error = "another copy of this adapter is already loaded";
      std::fprintf(stderr, "unidev: ignoring a second TensorFlow adapter for %s\n", UDTF_TYPE);
      return;
    }
    load(p);
    if (p.devices == 0 && !p.off)
      std::fprintf(stderr, "unidev: TensorFlow device %s is disabled: %s\n", UDTF_TYPE,
                   p.error.c_str());
  });
  return p;
}

bool check(UD_Error* err, TF_Status* status, const std::string& what) {
  if (!err) return true;
  const UD_Api* api = plugin().api;
  std::string msg = what + " on " UDTF_TYPE ": " + api->error_message(err);
  TF_SetStatus(status, tf_code(api->error_code(err)), msg.c_str());
  api->error_destroy(err);
  return false;
}

UD_Stream device_stream(int32_t device, TF_Status* status) {
  Plugin& p = plugin();
  if (device < 0 || device >= p.devices) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "unidev: device index out of range");
    return nullptr;
  }
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_streams[device]) {
    UD_Stream s = nullptr;
    if (!check(p.api->stream_create(device, &s), status, "stream_create")) return nullptr;
    g_streams[device] = s;
  }
  return g_streams[device];
}

}  // namespace udtf
