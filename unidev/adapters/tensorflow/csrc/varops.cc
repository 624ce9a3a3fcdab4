// varops.cc — device kernels for the resource-variable updates that TF's own kernels perform with
// host code on the device buffer (AssignAdd/AssignSubVariableOp, ResourceApplyGradientDescent),
// and same-shape AddV2/Sub/Mul without the C kernel API's per-tensor wrappers.
// Built against TF's C++ headers (so tied to one TF version) and loaded by the PluggableDevice,
// which passes the plugin's table and kernels. Like TF's own updates, an update writes the
// variable's buffer in place unless another tensor shares it (then a fresh buffer is swapped in).
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "bridge.h"
#include "tensorflow/c/kernels.h"
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

// A plugin error as the kernel's status; true if there was none.
bool succeeded(OpKernelContext* ctx, const UdtfBridge* b, const std::string& name, UD_Error* e) {
  if (!e) return true;
  const UD_Api* api = b->api;
  std::string msg = name + " on " + b->device_type + ": " + api->error_message(e);
  auto code = static_cast<absl::StatusCode>(b->tf_code(api->error_code(e)));
  api->error_destroy(e);
  ctx->SetStatus(absl::Status(code, msg));
  return false;
}

class VariableUpdate : public OpKernel {
 public:
  // sign: +1 AssignAdd, -1 AssignSub and ApplyGradientDescent (whose value input is 2, alpha 1)
  VariableUpdate(OpKernelConstruction* c, const UdtfBridge* b, int sign, bool apply)
      : OpKernel(c), bridge_(b), sign_(sign), apply_(apply) {}

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

struct Factory : kernel_factory::OpKernelFactory {
  explicit Factory(std::function<OpKernel*(OpKernelConstruction*)> f) : make(std::move(f)) {}
  OpKernel* Create(OpKernelConstruction* c) override { return make(c); }
  std::function<OpKernel*(OpKernelConstruction*)> make;
};

}  // namespace
}  // namespace tensorflow

extern "C" __attribute__((visibility("default"))) int udtf_register_variable_ops(
    const UdtfBridge* bridge, char* error, size_t error_size) {
  using namespace tensorflow;
  if (!bridge || bridge->struct_size < sizeof(UdtfBridge)) {
    std::snprintf(error, error_size, "bridge struct too small");
    return 0;
  }
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
  return n;
}
