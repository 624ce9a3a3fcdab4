// unidev._C: loads a native plugin through the C contract and calls its table from Python.
//
// The binding is the safety layer between Python and a plugin: it checks the ABI before using the
// table, keeps its own record of every allocation it made so a freed or foreign handle, an
// out-of-range view or a negative stride is refused before the plugin ever sees it, and turns
// every UD_Error into a Python exception from unidev.core.errors.
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unidev/unidev.h>

#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

constexpr int kMaxDims = 16;

// Raise the Python exception for (code, message): unidev.core.errors.from_code builds it.
[[noreturn]] void raise_code(int code, const std::string& message) {
  py::object exc = py::module_::import("unidev.core.errors").attr("from_code")(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

struct DTypeInfo {
  const char* name;
  uint8_t code;
  uint8_t bits;
};
const DTypeInfo kDTypes[] = {
    {"float32", UD_DTYPE_FLOAT, 32}, {"float64", UD_DTYPE_FLOAT, 64},
    {"float16", UD_DTYPE_FLOAT, 16}, {"bfloat16", UD_DTYPE_BFLOAT, 16},
    {"int32", UD_DTYPE_INT, 32},     {"int64", UD_DTYPE_INT, 64},
    {"uint8", UD_DTYPE_UINT, 8},     {"bool", UD_DTYPE_BOOL, 8},
};

UD_DType parse_dtype(const std::string& name, const std::string& where) {
  for (const auto& d : kDTypes)
    if (name == d.name) return UD_DType{d.code, d.bits, 1};
  raise_code(UD_ERR_INVALID_ARGUMENT, where + ": unknown dtype '" + name + "'");
}

// Minimum table size we need: everything up to and including kernel_lookup (ABI 1.0).
constexpr size_t kMinApiSize = offsetof(UD_Api, kernel_lookup) + sizeof(void*);

struct Allocation {
  int32_t device;
  uint64_t size;
};

class Library;

class Kernel {
 public:
  Kernel(std::shared_ptr<Library> lib, std::string op, UD_KernelFn fn)
      : lib_(std::move(lib)), op_(std::move(op)), fn_(fn) {}
  void call(int32_t device, const py::list& inputs, const py::list& outputs, const py::list& attrs,
            uint64_t stream);
  const std::string& op() const { return op_; }

 private:
  std::shared_ptr<Library> lib_;
  std::string op_;
  UD_KernelFn fn_;
};

class Library : public std::enable_shared_from_this<Library> {
 public:
  explicit Library(const std::string& path) : path_(path) {
    dl_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!dl_) {
      const char* err = dlerror();
      raise_load("cannot load plugin library " + path + ": " + (err ? err : "unknown error"));
    }
    auto get = reinterpret_cast<UD_GetApiFn>(dlsym(dl_, UD_ENTRY_POINT));
    if (!get) raise_load(path + " does not export " UD_ENTRY_POINT "(); is it a unidev plugin?");
    api_ = get();
    if (!api_) raise_load(path + ": " UD_ENTRY_POINT "() returned NULL");
    if (api_->abi_major != UD_ABI_MAJOR) {
      raise_abi("plugin " + path + " implements unidev ABI " + std::to_string(api_->abi_major) +
                "." + std::to_string(api_->abi_minor) + " but this unidev speaks ABI " +
                std::to_string(UD_ABI_MAJOR) + "." + std::to_string(UD_ABI_MINOR) +
                "; rebuild the plugin against this unidev (major versions must match)");
    }
    if (api_->struct_size < kMinApiSize) {
      raise_abi("plugin " + path + " has a UD_Api of " + std::to_string(api_->struct_size) +
                " bytes, smaller than ABI " + std::to_string(UD_ABI_MAJOR) + ".0 requires (" +
                std::to_string(kMinApiSize) + ")");
    }
    const void* required[] = {
        (void*)api_->error_code,     (void*)api_->error_message,   (void*)api_->error_destroy,
        (void*)api_->device_count,   (void*)api_->device_properties, (void*)api_->mem_alloc,
        (void*)api_->mem_free,       (void*)api_->memcpy_h2d,      (void*)api_->memcpy_d2h,
        (void*)api_->memcpy_d2d,     (void*)api_->memset,          (void*)api_->stream_create,
        (void*)api_->stream_destroy, (void*)api_->stream_synchronize, (void*)api_->kernel_lookup};
    for (const void* f : required)
      if (!f) raise_abi("plugin " + path + " leaves a required UD_Api function NULL");
    int32_t n = 0;
    const char* reason = nullptr;
    UD_Error* err = api_->device_count(&n, &reason);
    if (err) {
      api_->error_destroy(err);
    } else if (n > 0) {
      UD_DeviceProperties p;
      std::memset(&p, 0, sizeof p);
      p.struct_size = sizeof p;
      err = api_->device_properties(0, &p);
      if (err) api_->error_destroy(err);
      else if (p.host_addressable) dl_type_ = UD_DLPACK_CPU;
    }
  }

  ~Library() {
    // Leave the library mapped: plugin threads or atexit handlers may still run its code, and
    // unloading a library with live threads crashes at exit.
    for (auto& [dev, s] : streams_) api_->stream_destroy(s);
  }

  const UD_Api* api() const { return api_; }
  int32_t dl_device_type() const { return dl_type_; }

  // Turn an error object into a Python exception (freeing it), prefixing `what`.
  void check(UD_Error* err, const std::string& what) const {
    if (!err) return;
    int code = api_->error_code(err);
    std::string msg = api_->error_message(err);
    api_->error_destroy(err);
    raise_code(code, what + ": " + msg);
  }

  py::tuple device_count() {
    int32_t n = 0;
    const char* reason = nullptr;
    check(api_->device_count(&n, &reason), "device_count");
    return py::make_tuple(n, reason ? py::object(py::str(reason)) : py::object(py::none()));
  }

  void check_device(int32_t device, const char* what) {
    int32_t n = 0;
    const char* reason = nullptr;
    check(api_->device_count(&n, &reason), "device_count");
    if (device < 0 || device >= n)
      raise_code(UD_ERR_INVALID_ARGUMENT, std::string(what) + ": device index " +
                                              std::to_string(device) + " out of range; plugin '" +
                                              api_->plugin_name + "' has " + std::to_string(n) +
                                              " device(s)");
  }

  py::dict device_properties(int32_t device) {
    check_device(device, "device_properties");
    UD_DeviceProperties p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    check(api_->device_properties(device, &p), "device_properties");
    py::dict d;
    p.name[sizeof p.name - 1] = 0;
    d["name"] = std::string(p.name);
    d["total_memory"] = p.total_memory;
    d["compute_units"] = p.compute_units;
    d["vector_width"] = p.vector_width;
    d["host_addressable"] = bool(p.host_addressable);
    d["capabilities"] = p.capabilities;
    return d;
  }

  py::tuple memory_info(int32_t device) {
    check_device(device, "memory_info");
    if (!api_->device_memory_info) raise_code(UD_ERR_UNSUPPORTED, "memory_info: not implemented");
    uint64_t free_b = 0, total = 0;
    check(api_->device_memory_info(device, &free_b, &total), "memory_info");
    return py::make_tuple(free_b, total);
  }

  UD_Stream stream(int32_t device) {
    auto it = streams_.find(device);
    if (it != streams_.end()) return it->second;
    check_device(device, "stream");
    UD_Stream s = nullptr;
    check(api_->stream_create(device, &s), "stream_create");
    streams_[device] = s;
    return s;
  }

  // Streams and events reach Python as integers; only those this Library made (and has not
  // destroyed) go back to the plugin, which would otherwise dereference a garbage pointer.
  UD_Stream user_stream(uint64_t s, const char* what, int32_t device = -1) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = user_streams_.find(s);
    if (it == user_streams_.end())
      raise_code(UD_ERR_UNKNOWN_HANDLE, std::string(what) + ": stream " + hex(s) +
                                            " was not made by stream_create (or was destroyed)");
    if (device >= 0 && it->second != device)
      raise_code(UD_ERR_INVALID_ARGUMENT, std::string(what) + ": stream " + hex(s) +
                                              " belongs to device " + std::to_string(it->second) +
                                              ", not " + std::to_string(device));
    return reinterpret_cast<UD_Stream>(s);
  }
  UD_Event user_event(uint64_t e, const char* what) {
    std::lock_guard<std::mutex> g(mu_);
    if (!user_events_.count(e))
      raise_code(UD_ERR_UNKNOWN_HANDLE, std::string(what) + ": event " + hex(e) +
                                            " was not made by event_create (or was destroyed)");
    return reinterpret_cast<UD_Event>(e);
  }

  UD_Stream pick(int32_t device, uint64_t stream) {
    return stream ? user_stream(stream, "stream", device) : this->stream(device);
  }

  uint64_t malloc(int32_t device, uint64_t size, uint64_t stream) {
    UD_Stream s = pick(device, stream);
    UD_Handle h = 0;
    check(api_->mem_alloc(device, s, size, &h), "malloc(" + std::to_string(size) + " bytes)");
    if (h == 0) raise_code(UD_ERR_INTERNAL, "malloc: plugin returned handle 0");
    std::lock_guard<std::mutex> g(mu_);
    allocs_[h] = Allocation{device, size};
    return h;
  }

  void free(int32_t device, uint64_t handle, uint64_t stream) {
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = allocs_.find(handle);
      if (it == allocs_.end())
        raise_code(UD_ERR_UNKNOWN_HANDLE, "free: handle " + hex(handle) +
                                              " is not a live allocation (freed twice?)");
      if (it->second.device != device)
        raise_code(UD_ERR_INVALID_ARGUMENT, "free: handle belongs to device " +
                                                std::to_string(it->second.device) + ", not " +
                                                std::to_string(device));
      allocs_.erase(it);
    }
    check(api_->mem_free(device, pick(device, stream), handle), "free");
  }

  // Validates that [offset, offset + size) lies in the live allocation `handle`.
  Allocation range(const char* what, uint64_t handle, uint64_t offset, uint64_t size) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = allocs_.find(handle);
    if (it == allocs_.end())
      raise_code(UD_ERR_UNKNOWN_HANDLE, std::string(what) + ": handle " + hex(handle) +
                                            " is not a live allocation (freed or foreign)");
    if (offset > it->second.size || size > it->second.size - offset)
      raise_code(UD_ERR_OUT_OF_BOUNDS, std::string(what) + ": bytes [" + std::to_string(offset) +
                                           ", " + std::to_string(offset + size) +
                                           ") exceed the allocation of " +
                                           std::to_string(it->second.size) + " bytes");
    return it->second;
  }

  void copy_h2d(uint64_t handle, uint64_t offset, const py::buffer& src) {
    py::buffer_info info = src.request();
    uint64_t size = uint64_t(info.size) * uint64_t(info.itemsize);
    if (!contiguous(info)) raise_code(UD_ERR_INVALID_ARGUMENT, "copy_h2d: source not contiguous");
    int32_t dev = range("copy_h2d", handle, offset, size).device;
    UD_Stream s = stream(dev);
    {
      py::gil_scoped_release nogil;
      check_nogil(api_->memcpy_h2d(s, handle + offset, info.ptr, size));
      check_nogil(api_->stream_synchronize(s));
    }
    rethrow("copy_h2d");
  }

  void copy_d2h(uint64_t handle, uint64_t offset, const py::buffer& dst) {
    py::buffer_info info = dst.request(true);
    uint64_t size = uint64_t(info.size) * uint64_t(info.itemsize);
    if (!contiguous(info)) raise_code(UD_ERR_INVALID_ARGUMENT, "copy_d2h: target not contiguous");
    int32_t dev = range("copy_d2h", handle, offset, size).device;
    UD_Stream s = stream(dev);
    {
      py::gil_scoped_release nogil;
      check_nogil(api_->memcpy_d2h(s, info.ptr, handle + offset, size));
      check_nogil(api_->stream_synchronize(s));
    }
    rethrow("copy_d2h");
  }

  void copy_d2d(uint64_t dst, uint64_t dst_off, uint64_t src, uint64_t src_off, uint64_t size,
                uint64_t stream) {
    int32_t dev = range("copy_d2d(dst)", dst, dst_off, size).device;
    range("copy_d2d(src)", src, src_off, size);
    check(api_->memcpy_d2d(pick(dev, stream), dst + dst_off, src + src_off, size), "copy_d2d");
  }

  void memset(uint64_t handle, uint64_t offset, uint64_t pattern, uint32_t elem_size,
              uint64_t count, uint64_t stream) {
    if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
      raise_code(UD_ERR_INVALID_ARGUMENT,
                 "memset: elem_size " + std::to_string(elem_size) + ", expected 1, 2, 4 or 8");
    int32_t dev = range("memset", handle, offset, elem_size * count).device;
    check(api_->memset(pick(dev, stream), handle + offset, pattern, elem_size, count), "memset");
  }

  void synchronize(int32_t device) {
    UD_Stream s = stream(device);
    UD_Error* err;
    {
      py::gil_scoped_release nogil;
      err = api_->stream_synchronize(s);
    }
    check(err, "synchronize");
  }

  // streams and events, exposed as integers for the conformance suite
  uint64_t stream_create(int32_t device) {
    check_device(device, "stream_create");
    UD_Stream s = nullptr;
    check(api_->stream_create(device, &s), "stream_create");
    std::lock_guard<std::mutex> g(mu_);
    user_streams_[reinterpret_cast<uint64_t>(s)] = device;
    return reinterpret_cast<uint64_t>(s);
  }
  void stream_destroy(uint64_t s) {
    UD_Stream st = user_stream(s, "stream_destroy");
    {
      std::lock_guard<std::mutex> g(mu_);
      user_streams_.erase(s);
    }
    check(api_->stream_destroy(st), "stream_destroy");
  }
  void stream_synchronize(uint64_t s) {
    UD_Stream st = user_stream(s, "stream_synchronize");
    UD_Error* err;
    {
      py::gil_scoped_release nogil;
      err = api_->stream_synchronize(st);
    }
    check(err, "stream_synchronize");
  }
  bool stream_query(uint64_t s) {
    need(reinterpret_cast<const void*>(api_->stream_query), "stream_query");
    int32_t done = 0;
    check(api_->stream_query(user_stream(s, "stream_query"), &done), "stream_query");
    return done != 0;
  }
  void stream_wait_event(uint64_t s, uint64_t e) {
    need(reinterpret_cast<const void*>(api_->stream_wait_event), "stream_wait_event");
    check(api_->stream_wait_event(user_stream(s, "stream_wait_event"),
                                  user_event(e, "stream_wait_event")),
          "stream_wait_event");
  }
  uint64_t event_create(int32_t device) {
    need(reinterpret_cast<const void*>(api_->event_create), "event_create");
    check_device(device, "event_create");
    UD_Event e = nullptr;
    check(api_->event_create(device, &e), "event_create");
    std::lock_guard<std::mutex> g(mu_);
    user_events_.insert(reinterpret_cast<uint64_t>(e));
    return reinterpret_cast<uint64_t>(e);
  }
  void event_destroy(uint64_t e) {
    need(reinterpret_cast<const void*>(api_->event_destroy), "event_destroy");
    UD_Event ev = user_event(e, "event_destroy");
    {
      std::lock_guard<std::mutex> g(mu_);
      user_events_.erase(e);
    }
    check(api_->event_destroy(ev), "event_destroy");
  }
  void event_record(uint64_t e, uint64_t s) {
    need(reinterpret_cast<const void*>(api_->event_record), "event_record");
    check(api_->event_record(user_event(e, "event_record"), user_stream(s, "event_record")),
          "event_record");
  }
  bool event_query(uint64_t e) {
    need(reinterpret_cast<const void*>(api_->event_query), "event_query");
    int32_t done = 0;
    check(api_->event_query(user_event(e, "event_query"), &done), "event_query");
    return done != 0;
  }
  void event_synchronize(uint64_t e) {
    need(reinterpret_cast<const void*>(api_->event_synchronize), "event_synchronize");
    UD_Event ev = user_event(e, "event_synchronize");
    UD_Error* err;
    {
      py::gil_scoped_release nogil;
      err = api_->event_synchronize(ev);
    }
    check(err, "event_synchronize");
  }

  py::object kernel(const std::string& op, const std::string& dtype) {
    UD_KernelFn fn = nullptr;
    check(api_->kernel_lookup(op.c_str(), parse_dtype(dtype, op), &fn),
          "kernel_lookup(" + op + ", " + dtype + ")");
    if (!fn) return py::none();
    return py::cast(std::make_shared<Kernel>(shared_from_this(), op, fn));
  }

  size_t live_allocations() {
    std::lock_guard<std::mutex> g(mu_);
    return allocs_.size();
  }

  std::string path_;
  std::mutex mu_;
  std::map<uint64_t, Allocation> allocs_;

 private:
  void* dl_ = nullptr;
  const UD_Api* api_ = nullptr;
  int32_t dl_type_ = UD_DLPACK_EXT_DEV;
  std::map<int32_t, UD_Stream> streams_;
  std::map<uint64_t, int32_t> user_streams_;  // made by stream_create: handle -> device
  std::set<uint64_t> user_events_;
  // an error seen while the GIL was released, raised once it is held again
  int pending_code_ = 0;
  std::string pending_msg_;

  void check_nogil(UD_Error* err) {
    if (!err || pending_code_) {
      if (err) api_->error_destroy(err);
      return;
    }
    pending_code_ = api_->error_code(err);
    pending_msg_ = api_->error_message(err);
    api_->error_destroy(err);
  }
  void rethrow(const std::string& what) {
    if (!pending_code_) return;
    int code = pending_code_;
    pending_code_ = 0;
    raise_code(code, what + ": " + pending_msg_);
  }
  void need(const void* fn, const char* what) {
    if (!fn) raise_code(UD_ERR_UNSUPPORTED, std::string(what) + ": not implemented by plugin");
  }
  static bool contiguous(const py::buffer_info& info) {
    py::ssize_t expect = info.itemsize;
    for (py::ssize_t i = info.ndim - 1; i >= 0; --i) {
      if (info.shape[i] != 1 && info.strides[i] != expect) return false;
      expect *= info.shape[i];
    }
    return true;
  }
  [[noreturn]] static void raise_load(const std::string& msg) { raise_code(100, msg); }
  [[noreturn]] static void raise_abi(const std::string& msg) { raise_code(101, msg); }
  static std::string hex(uint64_t h) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)h);
    return buf;
  }
};

// A tensor from Python: (handle, byte_offset, dtype, shape, strides).
struct TensorArg {
  UD_Tensor t;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};

void fill_tensor(Library& lib, int32_t device, const std::string& where, const py::handle& obj,
                 TensorArg& out) {
  std::memset(&out.t, 0, sizeof out.t);
  if (obj.is_none()) {
    out.t.ndim = -1;
    return;
  }
  auto tup = obj.cast<py::tuple>();
  if (tup.size() != 5)
    raise_code(UD_ERR_INVALID_ARGUMENT,
               where + ": expected (handle, byte_offset, dtype, shape, strides)");
  uint64_t handle = tup[0].cast<uint64_t>();
  int64_t offset = tup[1].cast<int64_t>();
  UD_DType dt = parse_dtype(tup[2].cast<std::string>(), where);
  auto shape = tup[3].cast<std::vector<int64_t>>();
  auto strides = tup[4].cast<std::vector<int64_t>>();
  if (shape.size() != strides.size())
    raise_code(UD_ERR_INVALID_ARGUMENT, where + ": shape has " + std::to_string(shape.size()) +
                                            " dims but strides has " +
                                            std::to_string(strides.size()));
  if (shape.size() > size_t(kMaxDims))
    raise_code(UD_ERR_INVALID_ARGUMENT, where + ": " + std::to_string(shape.size()) +
                                            " dims, at most " + std::to_string(kMaxDims));
  if (offset < 0)
    raise_code(UD_ERR_INVALID_ARGUMENT,
               where + ": byte_offset " + std::to_string(offset) + ", expected >= 0");
  // extent in elements, with overflow checks: the last reachable element + 1
  const int64_t item = dt.bits / 8;
  unsigned __int128 last = 0;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      raise_code(UD_ERR_INVALID_ARGUMENT, where + ": shape[" + std::to_string(i) + "] = " +
                                              std::to_string(shape[i]) + ", expected >= 0");
    if (strides[i] < 0)
      raise_code(UD_ERR_INVALID_ARGUMENT,
                 where + ": strides[" + std::to_string(i) + "] = " + std::to_string(strides[i]) +
                     ", expected >= 0 (negative strides are not part of the contract)");
    if (shape[i] == 0) empty = true;
    else last += (unsigned __int128)(shape[i] - 1) * (unsigned __int128)strides[i];
    out.shape[i] = shape[i];
    out.strides[i] = strides[i];
  }
  unsigned __int128 extent = empty ? 0 : (last + 1) * item;
  if (extent > ((unsigned __int128)1 << 62))
    raise_code(UD_ERR_INVALID_ARGUMENT, where + ": view extent overflows");
  Allocation a = lib.range(where.c_str(), handle, uint64_t(offset), uint64_t(extent));
  if (a.device != device)
    raise_code(UD_ERR_INVALID_ARGUMENT, where + ": tensor is on device " +
                                            std::to_string(a.device) + ", the call is on " +
                                            std::to_string(device));
  out.t.handle = handle;
  out.t.device = UD_DeviceRef{lib.dl_device_type(), device};
  out.t.ndim = int32_t(shape.size());
  out.t.dtype = dt;
  out.t.shape = out.shape;
  out.t.strides = out.strides;
  out.t.byte_offset = uint64_t(offset);
}

// An attribute from Python: (name, type, value) with type in int/float/bool/str/ints.
struct AttrArg {
  UD_Attr a;
  std::string name, str;
  std::vector<int64_t> ints;
};

void Kernel::call(int32_t device, const py::list& inputs, const py::list& outputs,
                  const py::list& attrs, uint64_t stream) {
  Library& lib = *lib_;
  std::vector<TensorArg> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < in.size(); ++i)
    fill_tensor(lib, device, op_ + ": input " + std::to_string(i), inputs[i], in[i]);
  for (size_t i = 0; i < out.size(); ++i) {
    if (outputs[i].is_none())
      raise_code(UD_ERR_INVALID_ARGUMENT, op_ + ": output " + std::to_string(i) + " is None");
    fill_tensor(lib, device, op_ + ": output " + std::to_string(i), outputs[i], out[i]);
  }
  std::vector<AttrArg> at(attrs.size());
  for (size_t i = 0; i < at.size(); ++i) {
    auto tup = attrs[i].cast<py::tuple>();
    AttrArg& a = at[i];
    a.name = tup[0].cast<std::string>();
    std::string type = tup[1].cast<std::string>();
    a.a.name = a.name.c_str();
    if (type == "int") {
      a.a.type = UD_ATTR_INT;
      a.a.value.i = tup[2].cast<int64_t>();
    } else if (type == "float") {
      a.a.type = UD_ATTR_FLOAT;
      a.a.value.f = tup[2].cast<double>();
    } else if (type == "bool") {
      a.a.type = UD_ATTR_BOOL;
      a.a.value.b = tup[2].cast<bool>() ? 1 : 0;
    } else if (type == "str") {
      a.a.type = UD_ATTR_STRING;
      a.str = tup[2].cast<std::string>();
    } else if (type == "ints") {
      a.a.type = UD_ATTR_INTS;
      a.ints = tup[2].cast<std::vector<int64_t>>();
    } else {
      raise_code(UD_ERR_INVALID_ARGUMENT, op_ + ": attribute '" + a.name + "' has type '" + type +
                                              "', expected int, float, bool, str or ints");
    }
  }
  // pointers into the vectors only once they no longer move
  std::vector<UD_Tensor> tin, tout;
  std::vector<UD_Attr> tattr;
  for (auto& t : in) tin.push_back(t.t);
  for (auto& t : out) tout.push_back(t.t);
  for (auto& a : at) {
    if (a.a.type == UD_ATTR_STRING) a.a.value.s = a.str.c_str();
    if (a.a.type == UD_ATTR_INTS) {
      a.a.value.ints.data = a.ints.data();
      a.a.value.ints.len = int64_t(a.ints.size());
    }
    a.a.name = a.name.c_str();
    tattr.push_back(a.a);
  }
  UD_KernelArgs args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.device = device;
  args.stream = lib.pick(device, stream);
  args.inputs = tin.data();
  args.num_inputs = int32_t(tin.size());
  args.outputs = tout.data();
  args.num_outputs = int32_t(tout.size());
  args.attrs = tattr.data();
  args.num_attrs = int32_t(tattr.size());
  UD_Error* err;
  {
    py::gil_scoped_release nogil;
    err = fn_(&args);
  }
  lib.check(err, op_);
}

// ---- DLPack export ----------------------------------------------------------------------------

struct DLManagedTensor {
  UD_Tensor dl_tensor;  // same layout as DLTensor
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

struct Managed {
  DLManagedTensor m;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
  PyObject* owner;
};

void managed_deleter(DLManagedTensor* self) {
  auto* m = reinterpret_cast<Managed*>(self->manager_ctx);
  PyGILState_STATE st = PyGILState_Ensure();
  Py_XDECREF(m->owner);
  PyGILState_Release(st);
  delete m;
}

void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {  // never consumed
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

py::object make_dlpack(uint64_t data, int32_t device_type, int32_t device_id,
                       const std::string& dtype, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides, uint64_t byte_offset,
                       py::object owner) {
  if (shape.size() != strides.size() || shape.size() > size_t(kMaxDims))
    raise_code(UD_ERR_INVALID_ARGUMENT, "__dlpack__: bad shape/strides");
  auto* m = new Managed();
  m->m.dl_tensor.handle = data;
  m->m.dl_tensor.device = UD_DeviceRef{device_type, device_id};
  m->m.dl_tensor.ndim = int32_t(shape.size());
  m->m.dl_tensor.dtype = parse_dtype(dtype, "__dlpack__");
  for (size_t i = 0; i < shape.size(); ++i) {
    m->shape[i] = shape[i];
    m->strides[i] = strides[i];
  }
  m->m.dl_tensor.shape = m->shape;
  m->m.dl_tensor.strides = m->strides;
  m->m.dl_tensor.byte_offset = byte_offset;
  m->m.manager_ctx = m;
  m->m.deleter = managed_deleter;
  m->owner = owner.release().ptr();
  PyObject* cap = PyCapsule_New(&m->m, "dltensor", capsule_destructor);
  if (!cap) {
    managed_deleter(&m->m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "unidev native binding: loads plugins through the C contract (unidev.h)";
  m.attr("ABI_MAJOR") = UD_ABI_MAJOR;
  m.attr("ABI_MINOR") = UD_ABI_MINOR;

  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def_property_readonly("op", &Kernel::op)
      .def("__call__", &Kernel::call, py::arg("device"), py::arg("inputs"), py::arg("outputs"),
           py::arg("attrs"), py::arg("stream") = 0);

  py::class_<Library, std::shared_ptr<Library>>(m, "Library")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const Library& l) { return l.path_; })
      .def_property_readonly("name", [](const Library& l) { return std::string(l.api()->plugin_name ? l.api()->plugin_name : ""); })
      .def_property_readonly("version", [](const Library& l) { return std::string(l.api()->plugin_version ? l.api()->plugin_version : ""); })
      .def_property_readonly("abi", [](const Library& l) { return py::make_tuple(l.api()->abi_major, l.api()->abi_minor); })
      .def_property_readonly("api_address", [](const Library& l) { return reinterpret_cast<uint64_t>(l.api()); })
      .def("device_count", &Library::device_count)
      .def("device_properties", &Library::device_properties, py::arg("device"))
      .def("memory_info", &Library::memory_info, py::arg("device"))
      .def("malloc", &Library::malloc, py::arg("device"), py::arg("size"), py::arg("stream") = 0)
      .def("free", &Library::free, py::arg("device"), py::arg("handle"), py::arg("stream") = 0)
      .def("copy_h2d", &Library::copy_h2d, py::arg("handle"), py::arg("offset"), py::arg("src"))
      .def("copy_d2h", &Library::copy_d2h, py::arg("handle"), py::arg("offset"), py::arg("dst"))
      .def("copy_d2d", &Library::copy_d2d, py::arg("dst"), py::arg("dst_offset"), py::arg("src"),
           py::arg("src_offset"), py::arg("size"), py::arg("stream") = 0)
      .def("memset", &Library::memset, py::arg("handle"), py::arg("offset"), py::arg("pattern"),
           py::arg("elem_size"), py::arg("count"), py::arg("stream") = 0)
      .def("synchronize", &Library::synchronize, py::arg("device"))
      .def("stream_create", &Library::stream_create, py::arg("device"))
      .def("stream_destroy", &Library::stream_destroy)
      .def("stream_synchronize", &Library::stream_synchronize)
      .def("stream_query", &Library::stream_query)
      .def("stream_wait_event", &Library::stream_wait_event)
      .def("event_create", &Library::event_create, py::arg("device"))
      .def("event_destroy", &Library::event_destroy)
      .def("event_record", &Library::event_record)
      .def("event_query", &Library::event_query)
      .def("event_synchronize", &Library::event_synchronize)
      .def("kernel", &Library::kernel, py::arg("op"), py::arg("dtype"))
      .def("live_allocations", &Library::live_allocations);

  m.def("make_dlpack", &make_dlpack, py::arg("data"), py::arg("device_type"),
        py::arg("device_id"), py::arg("dtype"), py::arg("shape"), py::arg("strides"),
        py::arg("byte_offset"), py::arg("owner"));
}
