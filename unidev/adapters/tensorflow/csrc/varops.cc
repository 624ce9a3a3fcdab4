// varops.cc — device kernels for the resource-variable updates that TF's own kernels perform with
// host code on the device buffer (AssignAdd/AssignSubVariableOp, ResourceApplyGradientDescent),
// and same-shape AddV2/Sub/Mul without the C kernel API's per-tensor wrappers.
// Built against TF's C++ headers (so tied to one TF version) and loaded by the PluggableDevice,
// which passes the plugin's table and kernels. Like TF's own updates, an update writes the
// variable's buffer in place unless another tensor shares it (then a fresh buffer is swapped in).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bridge.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/core/common_runtime/device.h"
#include "tensorflow/core/common_runtime/dma_helper.h"
#include "tensorflow/core/common_runtime/pluggable_device/pluggable_device_context.h"
#include "tensorflow/core/framework/kernel_def.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"

namespace tensorflow {
namespace {

// ops.h's dtype id of the TF dtypes these kernels serve, -1 for others.
int dtype_id(DataType t) {
  switch (t) {
    case DT_FLOAT: return UD_DT_FLOAT32;
    case DT_DOUBLE: return UD_DT_FLOAT64;
    case DT_INT32: return UD_DT_INT32;
    case DT_INT64: return UD_DT_INT64;
    default: return -1;
  }
}

struct View {
  UD_Tensor t{};
  int64_t shape[16], strides[16];
  View(const Tensor& x, int device) {
    t.handle = reinterpret_cast<UD_Handle>(x.data());
    t.device = {UD_DLPACK_EXT_DEV, device};
    t.ndim = x.dims();
    t.dtype = ud_dtype_of(dtype_id(x.dtype()));
    int64_t s = 1;
    for (int i = t.ndim - 1; i >= 0; i--) {
      shape[i] = x.dim_size(i);
      strides[i] = s;
      s *= shape[i];
    }
    t.shape = shape;
    t.strides = strides;
  }
};

const UdtfBridge* g_bridge = nullptr;

// A plugin error as a status (OK for none), freed.
absl::Status status_of(const UdtfBridge* b, const std::string& name, UD_Error* e) {
  if (!e) return absl::OkStatus();
  const UD_Api* api = b->api;
  std::string msg = name + " on " + b->device_type + ": " + api->error_message(e);
  auto code = static_cast<absl::StatusCode>(b->tf_code(api->error_code(e)));
  api->error_destroy(e);
  return absl::Status(code, msg);
}

// A plugin error as the kernel's status; true if there was none.
bool succeeded(OpKernelContext* ctx, const UdtfBridge* b, const std::string& name, UD_Error* e) {
  absl::Status s = status_of(b, name, e);
  if (!s.ok()) ctx->SetStatus(s);
  return s.ok();
}

// Host <-> device copies on the calling thread. TF's PluggableDeviceContext completes each copy
// through its EventMgr: an event that a polling thread finds done, a callback another thread
// runs, a waiter woken by that one (~100 us a copy on 2 cores: a Keras step's loss). The device
// has one in-order stream, so a copy enqueued on it follows the work that produced its source;
// waiting for the stream is all that is left (TF frees or reads the host tensor after `done`).
class DirectCopies : public PluggableDeviceContext {
 public:
  DirectCopies(const PluggableDeviceContext& base, int32_t device)
      : PluggableDeviceContext(base.stream_id(), base.stream(), base.host_to_device_stream(),
                               base.device_to_host_stream(), {base.device_to_device_stream(0)}),
        device_(device) {}

  void CopyCPUTensorToDevice(const Tensor* cpu, Device* device, Tensor* out, StatusCallback done,
                             bool sync_dst_compute) const override {
    if (!direct(*cpu, *out))
      return PluggableDeviceContext::CopyCPUTensorToDevice(cpu, device, out, std::move(done),
                                                           sync_dst_compute);
    done(copy(DMAHelper::base(out), DMAHelper::base(cpu), cpu->TotalBytes(), true));
  }
  void CopyDeviceTensorToCPU(const Tensor* t, absl::string_view name, Device* device, Tensor* cpu,
                             StatusCallback done) override {
    if (!direct(*t, *cpu))
      return PluggableDeviceContext::CopyDeviceTensorToCPU(t, name, device, cpu, std::move(done));
    done(copy(DMAHelper::base(cpu), DMAHelper::base(t), t->TotalBytes(), false));
  }

 private:
  // TF's own path refuses these with its messages (strings, variants, mismatched sizes).
  static bool direct(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.TotalBytes() == b.TotalBytes() && DMAHelper::CanUseDMA(&a);
  }
  absl::Status copy(void* dst, const void* src, size_t n, bool h2d) const {
    if (n == 0) return absl::OkStatus();
    const UD_Api* api = g_bridge->api;
    UD_Stream s = g_bridge->stream(device_);
    if (!s) return errors::Internal("no stream for device ", device_);
    UD_Error* e = h2d ? api->memcpy_h2d(s, reinterpret_cast<UD_Handle>(dst), src, n)
                      : api->memcpy_d2h(s, dst, reinterpret_cast<UD_Handle>(src), n);
    return status_of(g_bridge, h2d ? "memcpy_h2d" : "memcpy_d2h",
                     e ? e : api->stream_synchronize(s));
  }
  int32_t device_;
};

// Gives `device` (a PluggableDevice of this adapter's type) DirectCopies, once: the device's
// context is read through its accelerator info at each copy and each kernel, so a copy of that
// info naming the new context replaces it everywhere (the old one stays valid, never freed).
void adopt(DeviceBase* device, const std::string& type) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const auto* info = device ? device->tensorflow_accelerator_device_info() : nullptr;
  if (!g_bridge || !info || type != g_bridge->device_type ||
      dynamic_cast<DirectCopies*>(info->default_context))
    return;
  auto* base = dynamic_cast<PluggableDeviceContext*>(info->default_context);
  if (!base) return;
  auto* mine = new DeviceBase::AcceleratorDeviceInfo(*info);
  mine->default_context = new DirectCopies(*base, info->gpu_id);
  device->set_tensorflow_accelerator_device_info(mine);
}

class VariableUpdate : public OpKernel {
 public:
  // sign: +1 AssignAdd, -1 AssignSub and ApplyGradientDescent (whose value input is 2, alpha 1)
  VariableUpdate(OpKernelConstruction* c, const UdtfBridge* b, int sign, bool apply)
      : OpKernel(c), bridge_(b), sign_(sign), apply_(apply) {
    adopt(c->device(), c->device_type().type_string());
  }

  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<Var> var;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &var));
    const Tensor& value = ctx->input(apply_ ? 2 : 1);
    double alpha = 1.0;
    if (apply_) {
      const Tensor& a = ctx->input(1);
      OP_REQUIRES(ctx, a.NumElements() == 1, errors::InvalidArgument("alpha must be a scalar"));
      alpha = a.dtype() == DT_FLOAT ? a.flat<float>()(0) : a.flat<double>()(0);
    }
    TF_Status* st = TF_NewStatus();
    SP_Stream sp = TF_GetStream(reinterpret_cast<TF_OpKernelContext*>(ctx), st);
    absl::Status s = TF_GetCode(st) == TF_OK
                         ? absl::OkStatus()
                         : errors::Internal("no device stream: ", TF_Message(st));
    TF_DeleteStatus(st);
    OP_REQUIRES_OK(ctx, s);
    mutex_lock ml(*var->mu());
    Tensor* cur = var->tensor();
    // Messages name dtypes and shapes only: a Tensor's DebugString reads its values, and the host
    // must never dereference device memory (on AURORA it segfaults).
    OP_REQUIRES(ctx, var->is_initialized && cur->IsInitialized(),
                errors::FailedPrecondition(name(), ": the variable is not initialized"));
    OP_REQUIRES(ctx, cur->dtype() == value.dtype() && cur->shape() == value.shape(),
                errors::InvalidArgument(
                    name(), ": cannot update a variable of dtype ", DataTypeString(cur->dtype()),
                    " and shape ", cur->shape().DebugString(), " with a value of dtype ",
                    DataTypeString(value.dtype()), " and shape ", value.shape().DebugString(),
                    "; dtypes and shapes must be equal"));
    int di = dtype_id(cur->dtype());
    UD_KernelFn fn = di < 0 ? nullptr : (sign_ > 0 ? bridge_->add[di] : bridge_->sub[di]);
    OP_REQUIRES(ctx, fn, errors::Unimplemented(name(), ": the plugin has no kernel for ",
                                               DataTypeString(cur->dtype())));
    // In place when no reader shares the buffer, as TF's own updates do (an elementwise kernel
    // may write its first input); a fresh buffer costs the step an allocation and the traffic.
    const bool shared = var->copy_on_read_mode.load() || !cur->RefCountIsOne();
    Tensor out = *cur;
    if (shared) OP_REQUIRES_OK(ctx, ctx->allocate_temp(cur->dtype(), cur->shape(), &out));
    if (out.NumElements() == 0) return;
    View x(*cur, sp->device), y(value, sp->device), o(out, sp->device);
    UD_Attr attr{"alpha", UD_ATTR_FLOAT, {}};
    attr.value.f = alpha;
    UD_Tensor ins[2] = {x.t, y.t};
    UD_KernelArgs args{sizeof(UD_KernelArgs), sp->device, sp->stream, ins, 2, &o.t, 1, &attr, 1};
    if (succeeded(ctx, bridge_, name(), fn(&args))) *cur = out;
  }

 private:
  const UdtfBridge* bridge_;
  int sign_;
  bool apply_;
};

// AddV2, Sub and Mul of two operands of one shape, as C++ kernels: TF's C kernel API wraps every
// input and output in a TF_Tensor, a third of a tiny eager op's kernel time. Other shapes
// (broadcasts) go to the PluggableDevice's own C kernel of the op.
class SameShape : public OpKernel {
 public:
  SameShape(OpKernelConstruction* c, const UdtfBridge* b, const UD_KernelFn* fns, bool alpha)
      : OpKernel(c), bridge_(b), fns_(fns), alpha_(alpha),
        general_(b->create(c, type_string().c_str())) {}
  ~SameShape() override {
    if (general_) bridge_->destroy(general_);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor &x = ctx->input(0), &y = ctx->input(1);
    if (x.shape() != y.shape() || x.dims() > 16) {  // View holds 16 dims
      OP_REQUIRES(ctx, general_, errors::Unimplemented(name(), ": no kernel for these shapes"));
      return bridge_->compute(general_, ctx);
    }
    SP_Stream sp = stream_.load(std::memory_order_relaxed);
    if (!sp) {
      TF_Status* st = TF_NewStatus();
      sp = TF_GetStream(reinterpret_cast<TF_OpKernelContext*>(ctx), st);
      bool ok = TF_GetCode(st) == TF_OK;
      TF_DeleteStatus(st);
      OP_REQUIRES(ctx, ok, errors::Internal(name(), ": no device stream"));
      stream_.store(sp, std::memory_order_relaxed);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output({0}, 0, x.shape(), &out));
    if (out->NumElements() == 0) return;
    View vx(x, sp->device), vy(y, sp->device), vo(*out, sp->device);
    UD_Attr attr{"alpha", UD_ATTR_FLOAT, {}};
    attr.value.f = 1.0;
    UD_Tensor ins[2] = {vx.t, vy.t};
    UD_KernelArgs args{sizeof(UD_KernelArgs), sp->device, sp->stream, ins, 2, &vo.t, 1, &attr,
                       alpha_ ? 1 : 0};
    succeeded(ctx, bridge_, name(), fns_[dtype_id(x.dtype())](&args));
  }

 private:
  const UdtfBridge* bridge_;
  const UD_KernelFn* fns_;
  bool alpha_;
  void* general_;
  std::atomic<SP_Stream> stream_{nullptr};
};

// int32 shape arithmetic (TF's rule: int32 lives in host memory) as TF's own CPU kernel, with
// every argument in host memory, as TF's GPU registers it. Without one, the op runs on the CPU
// device, and a Keras step (StridedSlice and Prod of a batch size) becomes a function of two
// partitions, whose Send/Recv pairs and second executor cost every step thread hand-offs.
class OnHost : public OpKernel {
 public:
  explicit OnHost(OpKernelConstruction* c) : OpKernel(c) {
    adopt(c->device(), c->device_type().type_string());
    absl::Status s;
    cpu_ = CreateOpKernel(DeviceType(DEVICE_CPU), c->device(),
                          c->device()->GetAllocator(AllocatorAttributes()), def(),
                          c->graph_def_version(), &s);
    OP_REQUIRES_OK(c, s);
    OP_REQUIRES(c, cpu_ && !cpu_->AsAsync(),
                errors::Unimplemented(name(), ": TF's CPU kernel is asynchronous"));
  }
  void Compute(OpKernelContext* ctx) override { cpu_->Compute(ctx); }
  bool IsExpensive() override { return false; }

 private:
  std::unique_ptr<OpKernel> cpu_;
};

// The ops of int32 shape arithmetic that TF gives no DEVICE_DEFAULT int32 kernel (Shape, Range,
// ConcatV2, AddV2, ... have one), seen in Keras steps and TF's gradients.
constexpr const char* kHostInt32[] = {"StridedSlice", "StridedSliceGrad", "Pack", "Prod", "Sum",
                                      "Cumsum", "Transpose", "Tile", "BroadcastTo", "GatherV2",
                                      "Select", "SelectV2", "TruncateDiv"};

struct Factory : kernel_factory::OpKernelFactory {
  explicit Factory(std::function<OpKernel*(OpKernelConstruction*)> f) : make(std::move(f)) {}
  OpKernel* Create(OpKernelConstruction* c) override { return make(c); }
  std::function<OpKernel*(OpKernelConstruction*)> make;
};

}  // namespace
}  // namespace tensorflow

namespace tensorflow {
namespace {

// One kernel per CPU kernel of each kHostInt32 op whose data type (the op's first type attribute)
// may be int32: the same constraints, the data type int32, every argument in host memory.
int register_host_int32(const char* device_type) {
  int n = 0;
  for (const char* op : kHostInt32) {
    const OpDef* def = nullptr;
    if (!OpRegistry::Global()->LookUpOpDef(op, &def).ok()) continue;
    std::string data;
    for (const auto& a : def->attr())
      if (a.type() == "type" && data.empty()) data = a.name();
    const KernelList kernels = GetRegisteredKernelsForOp(op);
    for (const KernelDef& k : kernels.kernel()) {
      if (k.device_type() != DEVICE_CPU || !k.label().empty()) continue;
      KernelDefBuilder b(op);
      b.Device(device_type);
      bool int32 = false;
      for (const auto& c : k.constraint()) {
        std::vector<DataType> allowed;
        for (int t : c.allowed_values().list().type()) allowed.push_back(DataType(t));
        if (c.name() == data) {
          int32 = std::find(allowed.begin(), allowed.end(), DT_INT32) != allowed.end();
          allowed = {DT_INT32};
        }
        b.TypeConstraint(c.name().c_str(), allowed);
      }
      // every type attribute constrained (opdef.cc's rule): those TF's CPU kernel leaves open
      // to the values the op allows; one allowing any type leaves the op on the CPU device
      for (const auto& a : def->attr()) {
        bool open = a.type() == "type" && std::none_of(
            k.constraint().begin(), k.constraint().end(),
            [&](const KernelDef::AttrConstraint& c) { return c.name() == a.name(); });
        std::vector<DataType> allowed;
        for (int t : a.allowed_values().list().type()) allowed.push_back(DataType(t));
        if (open && allowed.empty()) int32 = false;
        if (open) b.TypeConstraint(a.name().c_str(), allowed);
      }
      if (!int32) continue;
      for (const auto& a : def->input_arg()) b.HostMemory(a.name().c_str());
      for (const auto& a : def->output_arg()) b.HostMemory(a.name().c_str());
      kernel_factory::OpKernelRegistrar reg(
          b.Build(), "UnidevOnHost",
          std::make_unique<Factory>([](OpKernelConstruction* c) { return new OnHost(c); }));
      n++;
    }
  }
  return n;
}

}  // namespace
}  // namespace tensorflow

extern "C" __attribute__((visibility("default"))) void udtf_adopt_device(void* construction) {
  auto* c = static_cast<tensorflow::OpKernelConstruction*>(construction);
  tensorflow::adopt(c->device(), c->device_type().type_string());
}

extern "C" __attribute__((visibility("default"))) int udtf_register_variable_ops(
    const UdtfBridge* bridge, char* error, size_t error_size) {
  using namespace tensorflow;
  if (!bridge || bridge->struct_size < sizeof(UdtfBridge)) {
    std::snprintf(error, error_size, "bridge struct too small");
    return 0;
  }
  g_bridge = bridge;
  struct Op {
    const char* name;
    const char* type_attr;
    int sign;
    bool apply;
  } ops[] = {{"AssignAddVariableOp", "dtype", 1, false},
             {"AssignSubVariableOp", "dtype", -1, false},
             {"ResourceApplyGradientDescent", "T", -1, true}};
  const DataType types[] = {DT_FLOAT, DT_DOUBLE, DT_INT64};  // int32 lives in host memory
  int n = 0;
  for (const Op& op : ops)
    for (int i = 0; i < 3; i++) {
      const int d = dtype_id(types[i]);
      if (op.apply && i > 1) continue;  // the descent op is for floats only
      if (!(op.sign > 0 ? bridge->add[d] : bridge->sub[d])) continue;
      KernelDefBuilder b(op.name);
      b.Device(bridge->device_type).TypeConstraint(op.type_attr, types[i]);
      b.HostMemory(op.apply ? "var" : "resource");
      if (op.apply) b.HostMemory("alpha");
      // The registrar keeps the definition and the factory for the life of the process.
      auto make = [=](OpKernelConstruction* c) {
        return new VariableUpdate(c, bridge, op.sign, op.apply);
      };
      kernel_factory::OpKernelRegistrar reg(b.Build(), "UnidevVariableUpdate",
                                            std::make_unique<Factory>(make));
      n++;
    }
  // Above the C kernels of these ops (priority 0), which they fall back on for other shapes.
  const struct {
    const char* name;
    const UD_KernelFn* fns;
    bool alpha;
  } same_shape[] = {{"AddV2", bridge->add, true}, {"Sub", bridge->sub, true},
                    {"Mul", bridge->mul, false}};
  for (const auto& op : same_shape)
    for (int i = 0; i < 2 && bridge->create; i++) {
      if (!op.fns[dtype_id(types[i])]) continue;
      KernelDefBuilder b(op.name);
      b.Device(bridge->device_type).TypeConstraint("T", types[i]).Priority(1);
      auto make = [=](OpKernelConstruction* c) {
        return new SameShape(c, bridge, op.fns, op.alpha);
      };
      kernel_factory::OpKernelRegistrar reg(b.Build(), "UnidevSameShape",
                                            std::make_unique<Factory>(make));
      n++;
    }
  return n + register_host_int32(bridge->device_type);
}
