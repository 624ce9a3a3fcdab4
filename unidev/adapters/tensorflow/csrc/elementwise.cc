// elementwise.cc — unary and broadcasting binary ops, the gradients composed from them, copies of
// host constants, Cast and BiasAdd. Outputs reuse input 0's buffer when TF hands it over.
#include <algorithm>

#include "call.h"

namespace udtf {
namespace {

void h_unary(Call& c) {
  TF_Tensor* x = c.input(0);
  Desc dx = x ? desc(c, x) : absent();
  bool rowwise = c.k->op->ud == UD_OP_SOFTMAX || c.k->op->ud == UD_OP_LOG_SOFTMAX;  // never in place
  TF_Tensor* y = x ? c.output(0, c.out_type(), dx.shape, dx.t.ndim, rowwise ? -1 : 0) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(c.k->op->ud, {&dx}, {&dy});
}

// eager tf.constant: TF's own kernel would take the input in device memory, copied through
// TF's EventMgr (a callback on another thread per copy); here the host input is copied directly.
void h_eager_const(Call& c) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* y = x ? c.output(0, TF_TensorType(x), dims_of(x)) : nullptr;
  if (y) c.upload(y, x);
}

void h_forward(Call& c) {
  if (TF_Tensor* x = c.input(0)) TF_SetOutput(c.ctx, 0, x, c.st);
}

void like(Call& c, double value) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* y = x ? c.output(0, TF_TensorType(x), dims_of(x)) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  if (value == 0) c.run(UD_OP_ZERO, {}, {&dy});
  else c.run(UD_OP_FILL, {}, {&dy}, Attrs(UD_OP_FILL).f("value", value));
}

// Inputs 0..n-1 broadcast together; the output gets the broadcast shape, in the buffer of input
// `reuse` if TF hands it over (an elementwise op may write its first input; conformance checks it).
bool broadcast_inputs(Call& c, int n, Desc* ds, Desc* out, int reuse = -1) {
  static thread_local std::vector<int64_t> shape;
  for (int i = 0; i < n; i++)
    if (!c.device_input(i, &ds[i])) return false;
  if (!broadcast_shape(c, {&ds[0], &ds[n > 1 ? 1 : 0], &ds[n - 1]}, &shape)) return false;
  for (int i = 0; i < n; i++)
    if (ds[i].t.ndim != int(shape.size()) || !std::equal(shape.begin(), shape.end(), ds[i].shape))
      ds[i] = broadcast(ds[i], shape);
  TF_DataType dt = c.out_type();
  TF_Tensor* y = c.output(0, dt, shape.data(), int(shape.size()), reuse);
  if (y)
    *out = contiguous(reinterpret_cast<UD_Handle>(TF_TensorData(y)), dt, shape.data(),
                      int(shape.size()), c.sp->device);
  if (y && reuse >= 0 && ds[reuse].t.handle == out->t.handle) ds[reuse] = *out;  // exact alias
  return y != nullptr;
}

void binary(Call& c, bool reversed) {
  Desc in[2], out;
  if (broadcast_inputs(c, 2, in, &out, reversed ? 1 : 0))
    c.run(c.k->op->ud, {&in[reversed], &in[!reversed]}, {&out});
}

// A device scalar holding `value`, broadcast to `like`'s shape.
Desc constant(Call& c, double value, const Desc& like) {
  TF_Tensor* t = c.temp(c.out_type(), {});
  if (!t) return absent();
  Desc d = desc(c, t);
  c.run(UD_OP_FILL, {}, {&d}, Attrs(UD_OP_FILL).f("value", value));
  return broadcast(d, dims_of(like));
}

void h_squared_difference(Call& c) {
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc t = temp_like(c, out, c.out_type());
  if (c.run(UD_OP_SUB, {&in[0], &in[1]}, {&t})) c.run(UD_OP_SQUARE, {&t}, {&out});
}

void h_rsqrt_grad(Call& c) {  // dy * -0.5 * y^3
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc a = temp_like(c, out, c.out_type()), b = temp_like(c, out, c.out_type());
  Desc k = constant(c, -0.5, out);
  c.run(UD_OP_MUL, {&in[0], &in[0]}, {&a}) && c.run(UD_OP_MUL, {&a, &in[0]}, {&b}) &&
      c.run(UD_OP_MUL, {&b, &in[1]}, {&a}) && c.run(UD_OP_MUL, {&a, &k}, {&out});
}

void h_sqrt_grad(Call& c) {  // dy * 0.5 / y
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc a = temp_like(c, out, c.out_type()), k = constant(c, 0.5, out);
  c.run(UD_OP_DIV, {&in[1], &in[0]}, {&a}) && c.run(UD_OP_MUL, {&a, &k}, {&out});
}

void h_div_no_nan(Call& c) {
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out)) return;
  Desc q = temp_like(c, out, c.out_type()), zero = constant(c, 0.0, out);
  Desc m = temp_like(c, out, TF_BOOL);
  c.run(UD_OP_DIV, {&in[0], &in[1]}, {&q}) && c.run(UD_OP_EQ, {&in[1], &zero}, {&m}) &&
      c.run(UD_OP_WHERE, {&zero, &q, &m}, {&out});
}

void h_select(Call& c) {
  Desc in[3], out;
  if (broadcast_inputs(c, 3, in, &out)) c.run(UD_OP_WHERE, {&in[1], &in[2], &in[0]}, {&out});
}

void h_add_n(Call& c) {
  int n = TF_NumInputs(c.ctx);
  Desc x0, x1;
  if (!c.device_input(0, &x0)) return;
  TF_Tensor* y = c.output(0, c.out_type(), dims_of(x0));
  if (!y) return;
  Desc out = desc(c, y);
  if (n == 1) return void(c.run(UD_OP_COPY, {&x0}, {&out}));
  // Partial sums alternate between two temporaries: kernels never write an input.
  Desc acc[2] = {temp_like(c, out, c.out_type()),
                 n > 2 ? temp_like(c, out, c.out_type()) : absent()};
  const Desc* sum = &x0;
  for (int i = 1; i < n && c.ok(); i++) {
    if (!c.device_input(i, &x1)) return;
    Desc* dst = i == n - 1 ? &out : &acc[i % 2];
    c.run(UD_OP_ADD, {sum, &x1}, {dst});
    sum = dst;
  }
}

// min(relu(x), 6): the minimum writes its first input in place (allowed for elementwise ops).
void h_relu6(Call& c) {
  Desc x, y;
  if (!broadcast_inputs(c, 1, &x, &y, 0)) return;
  Desc six = constant(c, 6.0, y);
  c.run(UD_OP_RELU, {&x}, {&y}) && c.run(UD_OP_MINIMUM, {&y, &six}, {&y});
}

// grad where 0 < x < 6: threshold_backward on x, then on -x at -6 (a nan x passes the gradient,
// as threshold_backward specifies, where TF's CPU gives 0).
void h_relu6_grad(Call& c) {
  Desc in[2], out;
  if (!broadcast_inputs(c, 2, in, &out, 0)) return;
  Desc neg = temp_like(c, out, c.out_type());
  c.run(UD_OP_NEG, {&in[1]}, {&neg}) && c.run(UD_OP_THRESHOLD_BACKWARD, {&in[0], &in[1]}, {&out}) &&
      c.run(UD_OP_THRESHOLD_BACKWARD, {&out, &neg}, {&out},
            Attrs(UD_OP_THRESHOLD_BACKWARD).f("threshold", -6.0));
}

void h_cast(Call& c) {
  Desc x;
  TF_Tensor* y = c.device_input(0, &x) ? c.output(0, c.k->dst, dims_of(x)) : nullptr;
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(UD_OP_CAST, {&x}, {&dy}, Attrs(UD_OP_CAST).s("dtype", ud_dtype_id_name(dtype_id(c.k->dst))));
}

void h_bias_add(Call& c) {
  Desc x, bias;
  if (!c.device_input(0, &x) || !c.device_input(1, &bias)) return;
  int ch = c.k->nchw ? 1 : x.t.ndim - 1;
  if (x.t.ndim < 2 || bias.t.ndim != 1 || bias.shape[0] != x.shape[ch])
    return void(c.fail(TF_INVALID_ARGUMENT, "bias must be 1-D and match value's channels"));
  Desc b = broadcast(bias, dims_of(x));
  for (int i = 0; i < x.t.ndim; i++) b.strides[i] = i == ch ? 1 : 0;
  TF_Tensor* y = c.output(0, c.out_type(), x.shape, x.t.ndim, 0);  // in place when TF allows
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(UD_OP_ADD, {&x, &b}, {&dy});
}

// Selu (elu with selu's constants) and EluGrad (elu's backward from elu's output y): TF fixes
// the attributes. SeluGrad is not served: at y == 0 TF gives grad * scale, elu_backward does not.
void h_elu(Call& c, bool selu) {
  Desc in[2], out;
  int op = c.k->op->ud, n = op == UD_OP_ELU ? 1 : 2;
  Attrs at(op);
  if (selu) at.f("alpha", 1.6732632423543772).f("scale", 1.0507009873554805);
  if (op == UD_OP_ELU_BACKWARD) at.b("is_result", true);
  if (!broadcast_inputs(c, n, in, &out)) return;
  if (n == 1) c.run(op, {&in[0]}, {&out}, at);
  else c.run(op, {&in[0], &in[1]}, {&out}, at);
}

}  // namespace

void register_elementwise() {
  handler("elu", [](Call& c) { h_elu(c, false); });
  handler("selu", [](Call& c) { h_elu(c, true); });
  handler("unary", h_unary);
  handler("eager_const", h_eager_const);
  handler("forward", h_forward);
  handler("zeros_like", [](Call& c) { like(c, 0.0); });
  handler("ones_like", [](Call& c) { like(c, 1.0); });
  handler("binary", [](Call& c) { binary(c, false); });
  handler("binary_rev", [](Call& c) { binary(c, true); });
  handler("squared_difference", h_squared_difference);
  handler("rsqrt_grad", h_rsqrt_grad);
  handler("sqrt_grad", h_sqrt_grad);
  handler("div_no_nan", h_div_no_nan);
  handler("select", h_select);
  handler("add_n", h_add_n);
  handler("cast", h_cast, kStageHost);
  handler("bias_add", h_bias_add);
  handler("relu6", h_relu6);
  handler("relu6_grad", h_relu6_grad);
}

}  // namespace udtf
