// unidev._C.Plan: the native plan runtime (unidev/graph/native/ud_plan.c) bound to a Library.
//
// Included by binding.cpp after its anonymous namespace (it uses Library, fill_tensor and the
// error helpers there); ud_plan.c is its own translation unit (ud_plan_runtime.cpp). Bound
// tensors go through fill_tensor, so a freed, foreign or too-small allocation is refused before
// the plan sees it, and through Library::use, so a run on a stream is ordered after each
// operand's previous use, as for a single kernel call.
#include "../graph/native/ud_plan.h"

namespace {

// Raises the runtime's status; its message is cut at 1024 bytes, maybe inside a UTF-8 sequence.
[[noreturn]] void raise_status(int32_t rc, const UD_PlanStatus& st) {
  PyObject* u = PyUnicode_DecodeUTF8(st.message, Py_ssize_t(std::strlen(st.message)), "replace");
  if (!u) throw py::error_already_set();
  raise_code(rc, py::reinterpret_steal<py::str>(u).cast<std::string>());
}

class NativePlan {
 public:
  NativePlan(std::shared_ptr<Library> lib, int32_t device, const py::bytes& data)
      : lib_(std::move(lib)), device_(device) {
    std::string_view bytes = data;
    UD_PlanStatus st;
    int32_t rc;
    {
      py::gil_scoped_release nogil;
      rc = ud_plan_create(lib_->api(), device, bytes.data(), bytes.size(), &plan_, &st);
    }
    if (rc != UD_OK) raise_status(rc, st);
    lib_->stream(device);  // the default stream exists before any run uses it
  }
  ~NativePlan() {
    py::gil_scoped_release nogil;
    ud_plan_destroy(plan_);
  }
  NativePlan(const NativePlan&) = delete;
  NativePlan& operator=(const NativePlan&) = delete;

  void run(const py::object& inputs_obj, const py::object& outputs_obj,
           const py::object& stream_obj) {
    const std::string where = std::string("plan '") + ud_plan_key(plan_) + "'";
    uint64_t stream = to_u64(stream_obj, where, "stream");
    for (auto [o, name] : {std::pair{&inputs_obj, "inputs"}, std::pair{&outputs_obj, "outputs"}})
      if (!PyList_Check(o->ptr()) && !PyTuple_Check(o->ptr()))
        bad_arg(*o, where, name, -1, "a list of (handle, byte_offset, dtype, shape, strides)");
    auto inputs = py::reinterpret_borrow<py::sequence>(inputs_obj);
    auto outputs = py::reinterpret_borrow<py::sequence>(outputs_obj);
    if (inputs.size() != size_t(ud_plan_num_inputs(plan_)) ||
        outputs.size() != size_t(ud_plan_num_outputs(plan_)))
      raise_code(UD_ERR_INVALID_ARGUMENT,
                 where + ": takes " + std::to_string(ud_plan_num_inputs(plan_)) + " inputs and " +
                     std::to_string(ud_plan_num_outputs(plan_)) + " outputs, got " +
                     std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
    UD_Stream s = lib_->pick(device_, stream, where.c_str());
    std::vector<TensorArg> in(inputs.size()), out(outputs.size());
    for (size_t i = 0; i < in.size(); ++i)
      fill_tensor(*lib_, device_, where + ": input " + std::to_string(i), inputs[i], in[i]);
    for (size_t i = 0; i < out.size(); ++i)
      fill_tensor(*lib_, device_, where + ": output " + std::to_string(i), outputs[i], out[i]);
    for (auto* group : {&in, &out})
      for (auto& t : *group)
        if (t.t.ndim >= 0 && t.last_stream != stream) lib_->use(t.t.handle, stream);
    std::vector<UD_Tensor> tin, tout;
    for (auto& t : in) tin.push_back(t.t);
    for (auto& t : out) tout.push_back(t.t);
    UD_PlanStatus st;
    int32_t rc;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> g(mu_);  // the plan's step descriptors are patched per run
      rc = ud_plan_run(plan_, s, tin.data(), int32_t(tin.size()), tout.data(),
                       int32_t(tout.size()), &st);
    }
    if (rc != UD_OK) raise_status(rc, st);
  }

  py::list io(bool outputs) const {
    py::list l;
    const int32_t n = outputs ? ud_plan_num_outputs(plan_) : ud_plan_num_inputs(plan_);
    for (int32_t k = 0; k < n; ++k) {
      UD_Tensor t;
      uint64_t nbytes = 0;
      if (outputs) ud_plan_output(plan_, k, &t, &nbytes);
      else ud_plan_input(plan_, k, &t, &nbytes);
      py::tuple shape(t.ndim), strides(t.ndim);
      for (int32_t i = 0; i < t.ndim; ++i) {
        shape[i] = t.shape[i];
        strides[i] = t.strides[i];
      }
      l.append(py::make_tuple(std::string(ud_dtype_name(t.dtype)), shape, strides, nbytes));
    }
    return l;
  }

  py::list steps() const {
    py::list l;
    for (int32_t i = 0; i < ud_plan_num_steps(plan_); ++i)
      l.append(py::make_tuple(std::string(ud_plan_step_node(plan_, i)),
                              std::string(ud_plan_step_op(plan_, i))));
    return l;
  }

  void set_profiling(bool on) {
    UD_PlanStatus st;
    std::lock_guard<std::mutex> g(mu_);
    if (int32_t rc = ud_plan_set_profiling(plan_, on ? 1 : 0, &st)) raise_status(rc, st);
  }

  std::vector<double> step_times() {
    std::vector<double> ms(size_t(ud_plan_num_steps(plan_)) + 1);
    UD_PlanStatus st;
    int32_t rc;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> g(mu_);
      rc = ud_plan_step_times(plan_, ms.data(), int32_t(ms.size()), &st);
    }
    if (rc != UD_OK) raise_status(rc, st);
    ms.pop_back();
    return ms;
  }

  int32_t num_compiled() const { return ud_plan_num_compiled(plan_); }
  std::string key() const { return ud_plan_key(plan_); }

 private:
  std::shared_ptr<Library> lib_;  // the plugin outlives the plan's device memory
  int32_t device_;
  UD_Plan* plan_ = nullptr;
  std::mutex mu_;
};

void register_plan(py::module_& m) {
  py::class_<NativePlan, std::shared_ptr<NativePlan>>(m, "Plan")
      .def(py::init([](const std::shared_ptr<Library>& lib, const py::object& device,
                       const py::bytes& data) {
             return std::make_shared<NativePlan>(lib, to_i32(device, "Plan", "device"), data);
           }), py::arg("library"), py::arg("device"), py::arg("data"))
      .def("run", &NativePlan::run, py::arg("inputs"), py::arg("outputs"), py::arg("stream") = 0)
      .def_property_readonly("inputs", [](const NativePlan& p) { return p.io(false); })
      .def_property_readonly("outputs", [](const NativePlan& p) { return p.io(true); })
      .def_property_readonly("steps", &NativePlan::steps)
      .def_property_readonly("num_compiled", &NativePlan::num_compiled)
      .def_property_readonly("key", &NativePlan::key)
      .def("set_profiling", &NativePlan::set_profiling, py::arg("on"))
      .def("step_times", &NativePlan::step_times);
}

}  // namespace
