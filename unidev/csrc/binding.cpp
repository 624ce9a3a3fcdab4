// unidev._C: loads a native plugin through the C contract and calls its table from Python.
//
// The binding is the safety layer between Python and a plugin: it loads the table through
// loader.h (the one ABI rule, shared with the adapters; the library is never unloaded), keeps its own record of every allocation it made so a freed or foreign handle, an
// out-of-range view or a negative stride is refused before the plugin ever sees it, and turns
// every UD_Error into a Python exception from unidev.core.errors.
//
// Stream order: each allocation remembers the stream that last used it (0: the binding's default
// stream of its device). Work on another stream first waits for that point (an event, or a host
// synchronize when the plugin has no events), copies to and from the host run on it, and the
// free is enqueued on it, so an allocation is never read, written or released out of order.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unidev/loader.h>
#include <unidev/ops.h>

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

std::string show(const py::handle& o) {
  try {
    return py::repr(o).cast<std::string>();
  } catch (...) {
    return "<unprintable>";
  }
}

// Arguments from Python, converted with an error that names the call, the argument, the value
// and what was expected (pybind11's own casts say "incompatible function arguments" or "'?'").
// Messages are built only on failure: these run for every tensor of every kernel call.
[[noreturn]] void bad_arg(const py::handle& o, const std::string& where, const char* arg, long idx,
                          const std::string& expected) {
  std::string name = where + ": " + arg + (idx >= 0 ? "[" + std::to_string(idx) + "]" : "");
  raise_code(UD_ERR_INVALID_ARGUMENT, name + " = " + show(o) + " (" +
                                          std::string(Py_TYPE(o.ptr())->tp_name) + "), expected " +
                                          expected);
}

py::object as_index(const py::handle& o, const std::string& where, const char* arg, long idx) {
  if (PyBool_Check(o.ptr()) || (!PyLong_Check(o.ptr()) && !PyIndex_Check(o.ptr())))
    bad_arg(o, where, arg, idx, "an integer");
  PyObject* r = PyNumber_Index(o.ptr());
  if (!r) {
    PyErr_Clear();
    bad_arg(o, where, arg, idx, "an integer");
  }
  return py::reinterpret_steal<py::object>(r);
}

int64_t to_int(const py::handle& o, const std::string& where, const char* arg, int64_t lo,
               int64_t hi, long idx = -1) {
  if (PyLong_CheckExact(o.ptr())) {  // the common case: no conversion object
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
    if (!overflow && v >= lo && v <= hi) return v;
  }
  py::object i = as_index(o, where, arg, idx);
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow || v < lo || v > hi)
    bad_arg(o, where, arg, idx,
            "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}
uint64_t to_u64(const py::handle& o, const std::string& where, const char* arg) {
  py::object i = as_index(o, where, arg, -1);
  unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    bad_arg(o, where, arg, -1, "an integer in [0, 18446744073709551615]");
  }
  return v;
}
int64_t to_i64(const py::handle& o, const std::string& where, const char* arg, long idx = -1) {
  return to_int(o, where, arg, INT64_MIN, INT64_MAX, idx);
}
int32_t to_i32(const py::handle& o, const std::string& where, const char* arg) {
  return int32_t(to_int(o, where, arg, INT32_MIN, INT32_MAX));
}
uint32_t to_u32(const py::handle& o, const std::string& where, const char* arg) {
  return uint32_t(to_int(o, where, arg, 0, UINT32_MAX));
}
std::vector<int64_t> to_i64s(const py::handle& o, const std::string& where, const char* arg) {
  if (!PyList_Check(o.ptr()) && !PyTuple_Check(o.ptr()))
    bad_arg(o, where, arg, -1, "a list or tuple of integers");
  auto seq = py::reinterpret_borrow<py::sequence>(o);
  std::vector<int64_t> v(seq.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = to_i64(seq[i], where, arg, long(i));
  return v;
}
std::string to_str(const py::handle& o, const std::string& where, const char* arg) {
  if (!PyUnicode_Check(o.ptr())) bad_arg(o, where, arg, -1, "a str");
  return o.cast<std::string>();
}
double to_f64(const py::handle& o, const std::string& where, const char* arg) {
  double v = PyFloat_AsDouble(o.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    bad_arg(o, where, arg, -1, "a float");
  }
  return v;
}
bool to_bool(const py::handle& o, const std::string& where, const char* arg) {
  if (PyBool_Check(o.ptr())) return o.ptr() == Py_True;
  int64_t v = to_int(o, where, arg, 0, 1);
  return v != 0;
}

UD_DType parse_dtype(const std::string& name, const std::string& where) {
  const int id = ud_dtype_from_name(name.c_str());
  if (id < 0) raise_code(UD_ERR_INVALID_ARGUMENT, where + ": unknown dtype '" + name + "'");
  return ud_dtype_of(id);
}

struct Allocation {
  int32_t device;
  uint64_t size;
  uint64_t stream;  // the stream that last used it; 0 = the binding's default stream
};

class Library;

class Kernel {
 public:
  Kernel(std::shared_ptr<Library> lib, std::string op, UD_KernelFn fn)
      : lib_(std::move(lib)), op_(std::move(op)), fn_(fn) {}
  void call(const py::object& device, const py::object& inputs, const py::object& outputs,
            const py::object& attrs, const py::object& stream);
  const std::string& op() const { return op_; }

 private:
  std::shared_ptr<Library> lib_;
  std::string op_;
  UD_KernelFn fn_;
};

class Library : public std::enable_shared_from_this<Library> {
 public:
  explicit Library(const std::string& path) : path_(path) {
    UD_Loaded loaded;
    const int rc = ud_loader_open(path.c_str(), &loaded);
    if (rc == UD_LOAD_ABI_MISMATCH) raise_abi(loaded.error);
    if (rc != UD_LOAD_OK) raise_load(loaded.error);
    api_ = loaded.api;
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
    for (auto& [dev, e] : order_events_)
      if (e) api_->event_destroy(e);
    for (auto& [dev, lanes] : copy_lanes_)
      for (CopyLane& l : lanes) {
        api_->event_destroy(l.ready);
        api_->stream_destroy(l.stream);
      }
    for (auto& [dev, s] : streams_) api_->stream_destroy(s);
  }

  const UD_Api* api() const { return api_; }
  int32_t dl_device_type() const { return dl_type_; }
  bool has_mem_device() const { return UD_API_HAS(api_, mem_device); }

  // The plugin's answer as is: the contract obliges it to refuse any handle it did not allocate,
  // and the adapters' allocations, which this binding never saw, are as valid as its own.
  int32_t mem_device(uint64_t handle) {
    if (!has_mem_device())
      raise_code(UD_ERR_UNSUPPORTED, "mem_device: plugin '" + std::string(api_->plugin_name) +
                                         "' implements ABI " + std::to_string(api_->abi_major) +
                                         "." + std::to_string(api_->abi_minor) +
                                         " without mem_device (added in 1.1)");
    int32_t device = -1;
    check(api_->mem_device(handle, &device), "mem_device(" + hex(handle) + ")");
    return device;
  }

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

  UD_Stream pick(int32_t device, uint64_t stream, const char* what = "stream") {
    return stream ? user_stream(stream, what, device) : this->stream(device);
  }

  // Makes work enqueued on `to` from now on run after everything enqueued on `from` so far
  // (both on `device`; 0 is the default stream), by an event.
  void order(int32_t device, uint64_t from, uint64_t to) {
    if (from == to) return;
    UD_Stream sf = pick(device, from), st = pick(device, to);
    UD_Event& e = order_events_[device];
    if (!e) check(api_->event_create(device, &e), "stream order: event_create");
    check(api_->event_record(e, sf), "stream order: event_record");
    check(api_->stream_wait_event(st, e), "stream order: stream_wait_event");
  }

  // Orders the next use of allocation `handle` on `stream` after its previous use.
  void use(uint64_t handle, uint64_t stream) {
    uint64_t last;
    int32_t dev;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = allocs_.find(handle);
      if (it == allocs_.end() || it->second.stream == stream) return;
      last = it->second.stream;
      dev = it->second.device;
    }
    order(dev, last, stream);
    std::lock_guard<std::mutex> g(mu_);
    auto it = allocs_.find(handle);
    if (it != allocs_.end()) it->second.stream = stream;
  }

  uint64_t alloc_stream(uint64_t handle) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = allocs_.find(handle);
    return it == allocs_.end() ? 0 : it->second.stream;
  }

  uint64_t malloc(int32_t device, uint64_t size, uint64_t stream) {
    UD_Stream s = pick(device, stream);
    UD_Handle h = 0;
    check(api_->mem_alloc(device, s, size, &h), "malloc(" + std::to_string(size) + " bytes)");
    if (h == 0) raise_code(UD_ERR_INTERNAL, "malloc: plugin returned handle 0");
    std::lock_guard<std::mutex> g(mu_);
    allocs_[h] = Allocation{device, size, stream};
    return h;
  }

  // `stream` 0: free on the stream that last used the allocation; another stream first waits
  // for that use.
  void free(int32_t device, uint64_t handle, uint64_t stream) {
    uint64_t on;
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
      on = it->second.stream;
    }
    if (stream) {
      user_stream(stream, "free", device);
      order(device, on, stream);
      on = stream;
    }
    UD_Stream s = pick(device, on);
    {
      std::lock_guard<std::mutex> g(mu_);
      allocs_.erase(handle);
    }
    check(api_->mem_free(device, s, handle), "free");
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

  // Host copies run on the stream that last used the allocation and wait for it.
  void copy_h2d(uint64_t handle, uint64_t offset, const py::buffer& src) {
    py::buffer_info info = src.request();
    uint64_t size = uint64_t(info.size) * uint64_t(info.itemsize);
    if (!contiguous(info)) raise_code(UD_ERR_INVALID_ARGUMENT, "copy_h2d: source not contiguous");
    Allocation a = range("copy_h2d", handle, offset, size);
    CopyLane lane = take_lane(a);
    Pending failed{api_};
    {
      py::gil_scoped_release nogil;
      failed.check(lane.enter(api_));
      failed.check(api_->memcpy_h2d(lane.stream, handle + offset, info.ptr, size));
      failed.check(api_->stream_synchronize(lane.stream));
    }
    give_lane(a.device, lane);
    failed.rethrow("copy_h2d");
  }

  void copy_d2h(uint64_t handle, uint64_t offset, const py::buffer& dst) {
    py::buffer_info info = dst.request(true);
    uint64_t size = uint64_t(info.size) * uint64_t(info.itemsize);
    if (!contiguous(info)) raise_code(UD_ERR_INVALID_ARGUMENT, "copy_d2h: target not contiguous");
    Allocation a = range("copy_d2h", handle, offset, size);
    CopyLane lane = take_lane(a);
    Pending failed{api_};
    {
      py::gil_scoped_release nogil;
      failed.check(lane.enter(api_));
      failed.check(api_->memcpy_d2h(lane.stream, info.ptr, handle + offset, size));
      failed.check(api_->stream_synchronize(lane.stream));
    }
    give_lane(a.device, lane);
    failed.rethrow("copy_d2h");
  }

  void copy_d2d(uint64_t dst, uint64_t dst_off, uint64_t src, uint64_t src_off, uint64_t size,
                uint64_t stream) {
    int32_t dev = range("copy_d2d(dst)", dst, dst_off, size).device;
    if (range("copy_d2d(src)", src, src_off, size).device != dev)
      raise_code(UD_ERR_INVALID_ARGUMENT, "copy_d2d: src and dst are on different devices");
    UD_Stream s = pick(dev, stream);
    use(dst, stream);
    use(src, stream);
    check(api_->memcpy_d2d(s, dst + dst_off, src + src_off, size), "copy_d2d");
  }

  void memset(uint64_t handle, uint64_t offset, uint64_t pattern, uint32_t elem_size,
              uint64_t count, uint64_t stream) {
    if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
      raise_code(UD_ERR_INVALID_ARGUMENT,
                 "memset: elem_size " + std::to_string(elem_size) + ", expected 1, 2, 4 or 8");
    if (count > (uint64_t(1) << 62) / elem_size)
      raise_code(UD_ERR_INVALID_ARGUMENT, "memset: count " + std::to_string(count) +
                                              " elements of " + std::to_string(elem_size) +
                                              " bytes overflows");
    int32_t dev = range("memset", handle, offset, elem_size * count).device;
    UD_Stream s = pick(dev, stream);
    use(handle, stream);
    check(api_->memset(s, handle + offset, pattern, elem_size, count), "memset");
  }

  // Waits for the last use of allocation `handle` (DLPack export hands its memory to the host).
  void synchronize_allocation(uint64_t handle) {
    Allocation a = range("synchronize_allocation", handle, 0, 0);
    UD_Stream s = pick(a.device, a.stream);
    UD_Error* err;
    {
      py::gil_scoped_release nogil;
      err = api_->stream_synchronize(s);
    }
    check(err, "synchronize_allocation");
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
  // The plugin waits for the stream's work; allocations it used last go back to the default
  // stream, so their free and reads need no stream that no longer exists.
  void stream_destroy(uint64_t s) {
    UD_Stream st = user_stream(s, "stream_destroy");
    {
      std::lock_guard<std::mutex> g(mu_);
      user_streams_.erase(s);
      for (auto& [h, a] : allocs_)
        if (a.stream == s) a.stream = 0;
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
    int32_t done = 0;
    check(api_->stream_query(user_stream(s, "stream_query"), &done), "stream_query");
    return done != 0;
  }
  void stream_wait_event(uint64_t s, uint64_t e) {
    check(api_->stream_wait_event(user_stream(s, "stream_wait_event"),
                                  user_event(e, "stream_wait_event")),
          "stream_wait_event");
  }
  uint64_t event_create(int32_t device) {
    check_device(device, "event_create");
    UD_Event e = nullptr;
    check(api_->event_create(device, &e), "event_create");
    std::lock_guard<std::mutex> g(mu_);
    user_events_.insert(reinterpret_cast<uint64_t>(e));
    return reinterpret_cast<uint64_t>(e);
  }
  void event_destroy(uint64_t e) {
    UD_Event ev = user_event(e, "event_destroy");
    {
      std::lock_guard<std::mutex> g(mu_);
      user_events_.erase(e);
    }
    check(api_->event_destroy(ev), "event_destroy");
  }
  void event_record(uint64_t e, uint64_t s) {
    check(api_->event_record(user_event(e, "event_record"), user_stream(s, "event_record")),
          "event_record");
  }
  bool event_query(uint64_t e) {
    int32_t done = 0;
    check(api_->event_query(user_event(e, "event_query"), &done), "event_query");
    return done != 0;
  }
  void event_synchronize(uint64_t e) {
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

  // ABI 1.2: a kernel specialized for these attributes; None when the plugin has no
  // kernel_compile (1.0/1.1 tables, or NULL) or no specialization for them.
  bool has_kernel_compile() const { return UD_API_HAS(api_, kernel_compile); }
  py::object kernel_compile(const std::string& op, const std::string& dtype,
                            const py::object& attrs);

  size_t live_allocations() {
    std::lock_guard<std::mutex> g(mu_);
    return allocs_.size();
  }

  std::string path_;
  std::mutex mu_;
  std::map<uint64_t, Allocation> allocs_;

 private:
  const UD_Api* api_ = nullptr;
  int32_t dl_type_ = UD_DLPACK_EXT_DEV;
  std::map<int32_t, UD_Stream> streams_;
  std::map<int32_t, UD_Event> order_events_;  // one per device, re-recorded by order()
  std::map<uint64_t, int32_t> user_streams_;  // made by stream_create: handle -> device
  std::set<uint64_t> user_events_;
  // The first error seen while the GIL was released, raised once it is held again. One per call,
  // on the caller's stack: a member would let another thread's copy take or drop this one.
  // Host copies run on a copy lane of their own (a stream taken from a per-device pool, ordered
  // after the allocation's stream by an event) and synchronize only that lane: a copy then
  // reports its own failure (a read of poisoned bytes included), never one of other work on the
  // allocation's stream or of another thread's copy.
  struct CopyLane {
    UD_Stream stream = nullptr;
    UD_Event ready = nullptr;
    UD_Stream after = nullptr;
    UD_Error* enter(const UD_Api* api) const {
      if (UD_Error* e = api->event_record(ready, after)) return e;
      return api->stream_wait_event(stream, ready);
    }
  };
  std::map<int32_t, std::vector<CopyLane>> copy_lanes_;  // idle lanes, under mu_

  CopyLane take_lane(const Allocation& a) {
    CopyLane lane;
    UD_Stream after = pick(a.device, a.stream);
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& idle = copy_lanes_[a.device];
      if (!idle.empty()) {
        lane = idle.back();
        idle.pop_back();
      }
    }
    if (!lane.stream) {
      check(api_->stream_create(a.device, &lane.stream), "copy lane: stream_create");
      if (UD_Error* e = api_->event_create(a.device, &lane.ready)) {
        api_->stream_destroy(lane.stream);
        check(e, "copy lane: event_create");
      }
    }
    lane.after = after;
    return lane;
  }
  void give_lane(int32_t device, const CopyLane& lane) {
    std::lock_guard<std::mutex> g(mu_);
    copy_lanes_[device].push_back(lane);
  }

  struct Pending {
    const UD_Api* api;
    int code = 0;
    std::string msg;
    void check(UD_Error* err) {
      if (!err) return;
      if (!code) {
        code = api->error_code(err);
        msg = api->error_message(err);
      }
      api->error_destroy(err);
    }
    void rethrow(const std::string& what) const {
      if (code) raise_code(code, what + ": " + msg);
    }
  };
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
  uint64_t last_stream;  // the stream that used the allocation before this call
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
  if (!PyTuple_Check(obj.ptr()) || PyTuple_GET_SIZE(obj.ptr()) != 5)
    raise_code(UD_ERR_INVALID_ARGUMENT, where + " = " + show(obj) +
                                            ", expected (handle, byte_offset, dtype, shape, "
                                            "strides) or None");
  auto tup = py::reinterpret_borrow<py::tuple>(obj);
  uint64_t handle = to_u64(tup[0], where, "handle");
  int64_t offset = to_i64(tup[1], where, "byte_offset");
  UD_DType dt = parse_dtype(to_str(tup[2], where, "dtype"), where);
  auto shape = to_i64s(tup[3], where, "shape");
  auto strides = to_i64s(tup[4], where, "strides");
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
  out.last_stream = a.stream;
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

void parse_attrs(const std::string& op_, const py::list& attrs, std::vector<AttrArg>& at);
std::vector<UD_Attr> attr_views(std::vector<AttrArg>& at);

void Kernel::call(const py::object& device_obj, const py::object& inputs_obj,
                  const py::object& outputs_obj, const py::object& attrs_obj,
                  const py::object& stream_obj) {
  Library& lib = *lib_;
  int32_t device = to_i32(device_obj, op_, "device");
  uint64_t stream = to_u64(stream_obj, op_, "stream");
  for (auto [o, name] : {std::pair{&inputs_obj, "inputs"}, std::pair{&outputs_obj, "outputs"},
                         std::pair{&attrs_obj, "attrs"}})
    if (!PyList_Check(o->ptr())) bad_arg(*o, op_, name, -1, "a list");
  auto inputs = py::reinterpret_borrow<py::list>(inputs_obj);
  auto outputs = py::reinterpret_borrow<py::list>(outputs_obj);
  auto attrs = py::reinterpret_borrow<py::list>(attrs_obj);
  UD_Stream ustream = lib.pick(device, stream, op_.c_str());
  std::vector<TensorArg> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < in.size(); ++i)
    fill_tensor(lib, device, op_ + ": input " + std::to_string(i), inputs[i], in[i]);
  for (size_t i = 0; i < out.size(); ++i) {
    if (outputs[i].is_none())
      raise_code(UD_ERR_INVALID_ARGUMENT, op_ + ": output " + std::to_string(i) + " is None");
    fill_tensor(lib, device, op_ + ": output " + std::to_string(i), outputs[i], out[i]);
  }
  std::vector<AttrArg> at;
  parse_attrs(op_, attrs, at);
  // every operand's previous use (on whichever stream) comes before this kernel
  for (auto* group : {&in, &out})
    for (auto& t : *group)
      if (t.t.ndim >= 0 && t.last_stream != stream) lib.use(t.t.handle, stream);
  // pointers into the vectors only once they no longer move
  std::vector<UD_Tensor> tin, tout;
  for (auto& t : in) tin.push_back(t.t);
  for (auto& t : out) tout.push_back(t.t);
  std::vector<UD_Attr> tattr = attr_views(at);
  UD_KernelArgs args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.device = device;
  args.stream = ustream;
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

// (name, type, value) tuples -> attributes; strings and ints live in `at`.
void parse_attrs(const std::string& op_, const py::list& attrs, std::vector<AttrArg>& at) {
  at.resize(attrs.size());
  for (size_t i = 0; i < at.size(); ++i) {
    if (!PyTuple_Check(attrs[i].ptr()) || PyTuple_GET_SIZE(attrs[i].ptr()) != 3)
      raise_code(UD_ERR_INVALID_ARGUMENT, op_ + ": attrs[" + std::to_string(i) + "] = " +
                                              show(attrs[i]) + ", expected (name, type, value)");
    auto tup = py::reinterpret_borrow<py::tuple>(attrs[i]);
    AttrArg& a = at[i];
    a.name = to_str(tup[0], op_, "attribute name");
    std::string type = to_str(tup[1], op_, "attribute type");
    a.a.name = a.name.c_str();
    py::handle v = tup[2];
    if (type == "int" && PyLong_CheckExact(v.ptr())) {  // fast paths: no message strings
      int overflow = 0;
      a.a.type = UD_ATTR_INT;
      a.a.value.i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
      if (!overflow) continue;
    } else if (type == "float" && PyFloat_CheckExact(v.ptr())) {
      a.a.type = UD_ATTR_FLOAT;
      a.a.value.f = PyFloat_AS_DOUBLE(v.ptr());
      continue;
    }
    std::string an = "attribute '" + a.name + "'";
    if (type == "int") {
      a.a.type = UD_ATTR_INT;
      a.a.value.i = to_i64(v, op_, an.c_str());
    } else if (type == "float") {
      a.a.type = UD_ATTR_FLOAT;
      a.a.value.f = to_f64(v, op_, an.c_str());
    } else if (type == "bool") {
      a.a.type = UD_ATTR_BOOL;
      a.a.value.b = to_bool(v, op_, an.c_str()) ? 1 : 0;
    } else if (type == "str") {
      a.a.type = UD_ATTR_STRING;
      a.str = to_str(v, op_, an.c_str());
    } else if (type == "ints") {
      a.a.type = UD_ATTR_INTS;
      a.ints = to_i64s(v, op_, an.c_str());
    } else {
      raise_code(UD_ERR_INVALID_ARGUMENT, op_ + ": attribute '" + a.name + "' has type '" + type +
                                              "', expected int, float, bool, str or ints");
    }
  }
}

// The UD_Attr array over `at` (valid while `at` lives and does not move).
std::vector<UD_Attr> attr_views(std::vector<AttrArg>& at) {
  std::vector<UD_Attr> tattr;
  tattr.reserve(at.size());
  for (auto& a : at) {
    if (a.a.type == UD_ATTR_STRING) a.a.value.s = a.str.c_str();
    if (a.a.type == UD_ATTR_INTS) {
      a.a.value.ints.data = a.ints.data();
      a.a.value.ints.len = int64_t(a.ints.size());
    }
    a.a.name = a.name.c_str();
    tattr.push_back(a.a);
  }
  return tattr;
}

py::object Library::kernel_compile(const std::string& op, const std::string& dtype,
                                   const py::object& attrs_obj) {
  if (!PyList_Check(attrs_obj.ptr())) bad_arg(attrs_obj, op, "attrs", -1, "a list");
  if (!has_kernel_compile()) return py::none();
  std::vector<AttrArg> at;
  parse_attrs(op, py::reinterpret_borrow<py::list>(attrs_obj), at);
  std::vector<UD_Attr> tattr = attr_views(at);
  UD_DType dt = parse_dtype(dtype, op);
  UD_KernelFn fn = nullptr;
  UD_Error* err;
  {
    py::gil_scoped_release nogil;  // a plugin may run a compiler here
    err = api_->kernel_compile(op.c_str(), dt, tattr.data(), int32_t(tattr.size()), &fn);
  }
  check(err, "kernel_compile(" + op + ", " + dtype + ")");
  if (!fn) return py::none();
  return py::cast(std::make_shared<Kernel>(shared_from_this(), op, fn));
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

#include "plan.cpp"  // unidev._C.Plan: the graph plan executor (register_plan)

PYBIND11_MODULE(_C, m) {
  m.doc() = "unidev native binding: loads plugins through the C contract (unidev.h)";
  m.attr("ABI_MAJOR") = UD_ABI_MAJOR;
  m.attr("ABI_MINOR") = UD_ABI_MINOR;
  // the table sizes unidev.h defines per ABI version (the conformance suite checks its mirror)
  m.attr("API_SIZE_1_0") = size_t(UD_API_SIZE_1_0);
  m.attr("API_SIZE_1_1") = size_t(UD_API_SIZE_1_1);
  m.attr("API_SIZE_1_2") = size_t(UD_API_SIZE_1_2);
  m.attr("API_SIZE") = sizeof(UD_Api);
  py::dict offsets;
  py::list required;
#define UD_OFFSET_(f) offsets[#f] = offsetof(UD_Api, f);
#define UD_REQUIRED_(f) required.append(#f);
  UD_OFFSET_(struct_size) UD_OFFSET_(abi_major) UD_OFFSET_(abi_minor) UD_OFFSET_(plugin_name)
  UD_OFFSET_(plugin_version) UD_API_1_0_FUNCTIONS(UD_OFFSET_) UD_OFFSET_(mem_device)
  UD_OFFSET_(kernel_compile)
  UD_API_1_0_FUNCTIONS(UD_REQUIRED_)
#undef UD_OFFSET_
#undef UD_REQUIRED_
  m.attr("API_OFFSETS") = offsets;                      // every UD_Api field's offsetof
  m.attr("API_1_0_FUNCTIONS") = py::tuple(required);  // what loader.h requires

  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel")
      .def_property_readonly("op", &Kernel::op)
      .def("__call__", &Kernel::call, py::arg("device"), py::arg("inputs"), py::arg("outputs"),
           py::arg("attrs"), py::arg("stream") = 0);

  py::class_<Library, std::shared_ptr<Library>>(m, "Library")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", [](const Library& l) { return l.path_; })
      .def_property_readonly("library", [](const Library& l) { return l.path_; })
      .def_property_readonly("name", [](const Library& l) { return std::string(l.api()->plugin_name ? l.api()->plugin_name : ""); })
      .def_property_readonly("version", [](const Library& l) { return std::string(l.api()->plugin_version ? l.api()->plugin_version : ""); })
      .def_property_readonly("abi", [](const Library& l) { return py::make_tuple(l.api()->abi_major, l.api()->abi_minor); })
      .def_property_readonly("api_address", [](const Library& l) { return reinterpret_cast<uint64_t>(l.api()); })
      .def_property_readonly("struct_size", [](const Library& l) { return l.api()->struct_size; })
      .def_property_readonly("has_mem_device", &Library::has_mem_device)
      .def("mem_device", [](Library& l, const py::object& h) {
             return l.mem_device(to_u64(h, "mem_device", "handle"));
           }, py::arg("handle"))
      .def("device_count", &Library::device_count)
      .def("device_properties", [](Library& l, const py::object& d) {
             return l.device_properties(to_i32(d, "device_properties", "device"));
           }, py::arg("device"))
      .def("memory_info", [](Library& l, const py::object& d) {
             return l.memory_info(to_i32(d, "memory_info", "device"));
           }, py::arg("device"))
      .def("malloc", [](Library& l, const py::object& d, const py::object& n,
                        const py::object& s) {
             return l.malloc(to_i32(d, "malloc", "device"), to_u64(n, "malloc", "size"),
                             to_u64(s, "malloc", "stream"));
           }, py::arg("device"), py::arg("size"), py::arg("stream") = 0)
      .def("free", [](Library& l, const py::object& d, const py::object& h, const py::object& s) {
             l.free(to_i32(d, "free", "device"), to_u64(h, "free", "handle"),
                    to_u64(s, "free", "stream"));
           }, py::arg("device"), py::arg("handle"), py::arg("stream") = 0)
      .def("copy_h2d", [](Library& l, const py::object& h, const py::object& off,
                          const py::buffer& src) {
             l.copy_h2d(to_u64(h, "copy_h2d", "handle"), to_u64(off, "copy_h2d", "offset"), src);
           }, py::arg("handle"), py::arg("offset"), py::arg("src"))
      .def("copy_d2h", [](Library& l, const py::object& h, const py::object& off,
                          const py::buffer& dst) {
             l.copy_d2h(to_u64(h, "copy_d2h", "handle"), to_u64(off, "copy_d2h", "offset"), dst);
           }, py::arg("handle"), py::arg("offset"), py::arg("dst"))
      .def("copy_d2d", [](Library& l, const py::object& dst, const py::object& doff,
                          const py::object& src, const py::object& soff, const py::object& n,
                          const py::object& s) {
             l.copy_d2d(to_u64(dst, "copy_d2d", "dst"), to_u64(doff, "copy_d2d", "dst_offset"),
                        to_u64(src, "copy_d2d", "src"), to_u64(soff, "copy_d2d", "src_offset"),
                        to_u64(n, "copy_d2d", "size"), to_u64(s, "copy_d2d", "stream"));
           }, py::arg("dst"), py::arg("dst_offset"), py::arg("src"), py::arg("src_offset"),
           py::arg("size"), py::arg("stream") = 0)
      .def("memset", [](Library& l, const py::object& h, const py::object& off,
                        const py::object& pattern, const py::object& elem, const py::object& n,
                        const py::object& s) {
             l.memset(to_u64(h, "memset", "handle"), to_u64(off, "memset", "offset"),
                      to_u64(pattern, "memset", "pattern"), to_u32(elem, "memset", "elem_size"),
                      to_u64(n, "memset", "count"), to_u64(s, "memset", "stream"));
           }, py::arg("handle"), py::arg("offset"), py::arg("pattern"), py::arg("elem_size"),
           py::arg("count"), py::arg("stream") = 0)
      .def("synchronize", [](Library& l, const py::object& d) {
             l.synchronize(to_i32(d, "synchronize", "device"));
           }, py::arg("device"))
      .def("check_stream", [](Library& l, const py::object& d, const py::object& s,
                              const std::string& what) {
             l.pick(to_i32(d, what, "device"), to_u64(s, what, "stream"), what.c_str());
           }, py::arg("device"), py::arg("stream"), py::arg("what") = "stream")
      .def("synchronize_allocation", [](Library& l, const py::object& h) {
             l.synchronize_allocation(to_u64(h, "synchronize_allocation", "handle"));
           }, py::arg("handle"))
      .def("stream_create", [](Library& l, const py::object& d) {
             return l.stream_create(to_i32(d, "stream_create", "device"));
           }, py::arg("device"))
      .def("stream_destroy", [](Library& l, const py::object& s) {
             l.stream_destroy(to_u64(s, "stream_destroy", "stream"));
           }, py::arg("stream"))
      .def("stream_synchronize", [](Library& l, const py::object& s) {
             l.stream_synchronize(to_u64(s, "stream_synchronize", "stream"));
           }, py::arg("stream"))
      .def("stream_query", [](Library& l, const py::object& s) {
             return l.stream_query(to_u64(s, "stream_query", "stream"));
           }, py::arg("stream"))
      .def("stream_wait_event", [](Library& l, const py::object& s, const py::object& e) {
             l.stream_wait_event(to_u64(s, "stream_wait_event", "stream"),
                                 to_u64(e, "stream_wait_event", "event"));
           }, py::arg("stream"), py::arg("event"))
      .def("event_create", [](Library& l, const py::object& d) {
             return l.event_create(to_i32(d, "event_create", "device"));
           }, py::arg("device"))
      .def("event_destroy", [](Library& l, const py::object& e) {
             l.event_destroy(to_u64(e, "event_destroy", "event"));
           }, py::arg("event"))
      .def("event_record", [](Library& l, const py::object& e, const py::object& s) {
             l.event_record(to_u64(e, "event_record", "event"),
                            to_u64(s, "event_record", "stream"));
           }, py::arg("event"), py::arg("stream"))
      .def("event_query", [](Library& l, const py::object& e) {
             return l.event_query(to_u64(e, "event_query", "event"));
           }, py::arg("event"))
      .def("event_synchronize", [](Library& l, const py::object& e) {
             l.event_synchronize(to_u64(e, "event_synchronize", "event"));
           }, py::arg("event"))
      .def("kernel", [](Library& l, const py::object& op, const py::object& dt) {
             return l.kernel(to_str(op, "kernel", "op"), to_str(dt, "kernel", "dtype"));
           }, py::arg("op"), py::arg("dtype"))
      .def_property_readonly("has_kernel_compile", &Library::has_kernel_compile)
      .def("kernel_compile", [](Library& l, const py::object& op, const py::object& dt,
                                const py::object& attrs) {
             return l.kernel_compile(to_str(op, "kernel_compile", "op"),
                                     to_str(dt, "kernel_compile", "dtype"), attrs);
           }, py::arg("op"), py::arg("dtype"), py::arg("attrs"))
      .def("live_allocations", &Library::live_allocations);

  m.def("make_dlpack", &make_dlpack, py::arg("data"), py::arg("device_type"),
        py::arg("device_id"), py::arg("dtype"), py::arg("shape"), py::arg("strides"),
        py::arg("byte_offset"), py::arg("owner"));
  register_plan(m);
}
