// varops.cc — device kernels for the resource-variable updates that TF's own kernels perform with
// host code on the device buffer (AssignAdd/AssignSubVariableOp, ResourceApplyGradientDescent).
// Built against TF's C++ headers (so tied to one TF version) and loaded by the PluggableDevice,
// which passes the plugin's table and kernels. Each update writes a fresh buffer and swaps it
// into the variable, like TF's copy-on-write, so no kernel ever writes one of its inputs.
#include <cstdio>
#include <memory>

#include "bridge.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"

namespace tensorflow {
namespace {

int dtype_index(DataType t) {
  switch (t) {
    case DT_FLOAT: return 0;
    case DT_DOUBLE: return 1;
    case DT_INT32: return 2;
    case DT_INT64: return 3;
    default: return -1;
  }
}

const UD_DType kTypes[4] = {
    {UD_DTYPE_FLOAT, 32, 1}, {UD_DTYPE_FLOAT, 64, 1}, {UD_DTYPE_INT, 32, 1}, {UD_DTYPE_INT, 64, 1}};

struct View {
  UD_Tensor t{};
  int64_t shape[16], strides[16];
  View(const Tensor& x, int device) {
    t.handle = reinterpret_cast<UD_Handle>(x.data());
    t.device = {UD_DLPACK_EXT_DEV, device};
    t.ndim = x.dims();
    t.dtype = kTypes[dtype_index(x.dtype())];
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
    OP_REQUIRES(ctx, cur->dtype() == value.dtype() && cur->shape() == value.shape(),
                errors::InvalidArgument(name(), ": variable ", cur->DebugString(),
                                        " and value ", value.DebugString(),
                                        " must have the same dtype and shape"));
    int di = dtype_index(cur->dtype());
    UD_KernelFn fn = di < 0 ? nullptr : (sign_ > 0 ? bridge_->add[di] : bridge_->sub[di]);
    OP_REQUIRES(ctx, fn, errors::Unimplemented(name(), ": the plugin has no kernel for ",
                                               DataTypeString(cur->dtype())));
    Tensor out;
    OP_REQUIRES_OK(ctx, ctx->allocate_temp(cur->dtype(), cur->shape(), &out));
    if (out.NumElements() == 0) return;
    View x(*cur, sp->device), y(value, sp->device), o(out, sp->device);
    UD_Attr attr{"alpha", UD_ATTR_FLOAT, {}};
    attr.value.f = alpha;
    UD_Tensor ins[2] = {x.t, y.t};
    UD_KernelArgs args{sizeof(UD_KernelArgs), sp->device, sp->stream, ins, 2, &o.t, 1, &attr, 1};
    if (UD_Error* e = fn(&args)) {
      const UD_Api* api = bridge_->api;
      std::string msg = name() + " on " + bridge_->device_type + ": " + api->error_message(e);
      bool oom = api->error_code(e) == UD_ERR_OUT_OF_MEMORY;
      api->error_destroy(e);
      ctx->SetStatus(oom ? errors::ResourceExhausted(msg) : errors::Internal(msg));
      return;
    }
    *cur = out;
  }

 private:
  const UdtfBridge* bridge_;
  int sign_;
  bool apply_;
};

struct Factory : kernel_factory::OpKernelFactory {
  Factory(const UdtfBridge* b, int sign, bool apply) : b(b), sign(sign), apply(apply) {}
  OpKernel* Create(OpKernelConstruction* c) override {
    return new VariableUpdate(c, b, sign, apply);
  }
  const UdtfBridge* b;
  int sign;
  bool apply;
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
  const DataType types[4] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  int n = 0;
  for (const Op& op : ops)
    for (int d = 0; d < 4; d++) {
      // int32 lives in host memory and the descent op is for floats only.
      if (d == 2 || (op.apply && d > 1)) continue;
      if (!(op.sign > 0 ? bridge->add[d] : bridge->sub[d])) continue;
      KernelDefBuilder b(op.name);
      b.Device(bridge->device_type).TypeConstraint(op.type_attr, types[d]);
      b.HostMemory(op.apply ? "var" : "resource");
      if (op.apply) b.HostMemory("alpha");
      // The registrar keeps the definition and the factory for the life of the process.
      kernel_factory::OpKernelRegistrar reg(b.Build(), "UnidevVariableUpdate",
                                            std::make_unique<Factory>(bridge, op.sign, op.apply));
      n++;
    }
  return n;
}
