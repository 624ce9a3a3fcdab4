// shape.cc — BroadcastTo, Fill, Tile and Transpose as strided views copied by the op set's copy.
#include "call.h"

namespace udtf {
namespace {

void copy_to_new_output(Call& c, const Desc& view) {
  if (view.t.ndim > kMaxDims) return void(c.fail(TF_INVALID_ARGUMENT, "rank above 16"));
  TF_Tensor* y = c.output(0, c.out_type(), dims_of(view));
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(UD_OP_COPY, {&view}, {&dy});
}

void h_broadcast_to(Call& c) {
  Desc x;
  std::vector<int64_t> shape, check;
  if (!c.device_input(0, &x) || !c.shape_arg(1, "shape", &shape)) return;
  Desc target = contiguous(0, TF_FLOAT, shape.data(), int(shape.size()), 0);
  if (!broadcast_shape(c, {&x, &target}, &check)) return;
  if (check != shape)
    return void(c.fail(TF_INVALID_ARGUMENT, "input is not broadcastable to the requested shape"));
  copy_to_new_output(c, broadcast(x, shape));
}

void h_fill(Call& c) {
  std::vector<int64_t> dims;
  Desc v;
  if (!c.shape_arg(0, "dims", &dims) || !c.device_input(1, &v)) return;
  if (v.t.ndim != 0) return void(c.fail(TF_INVALID_ARGUMENT, "value must be a scalar"));
  copy_to_new_output(c, broadcast(v, dims));
}

void h_tile(Call& c) {
  Desc x;
  std::vector<int64_t> m, dims;
  if (!c.device_input(0, &x) || !c.shape_arg(1, "multiples", &m)) return;
  if (int(m.size()) != x.t.ndim || 2 * x.t.ndim > kMaxDims)
    return void(c.fail(TF_INVALID_ARGUMENT, "multiples needs one entry per dimension (rank <= 8)"));
  // Output viewed as [m0, d0, m1, d1, ...]: the input repeats with stride 0 over each m_i.
  Desc src = x;
  src.t.ndim = 2 * x.t.ndim;
  for (int i = 0; i < x.t.ndim; i++) {
    src.shape[2 * i] = m[i], src.strides[2 * i] = 0;
    src.shape[2 * i + 1] = x.shape[i], src.strides[2 * i + 1] = x.strides[i];
    dims.push_back(0);
    if (__builtin_mul_overflow(m[i], x.shape[i], &dims.back()))
      return void(c.fail(TF_INVALID_ARGUMENT, "multiples overflow the result's dimensions"));
  }
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dst = contiguous(reinterpret_cast<UD_Handle>(TF_TensorData(y)), c.out_type(), src.shape,
                        src.t.ndim, c.sp->device);
  c.run(UD_OP_COPY, {&src}, {&dst});
}

void h_transpose(Call& c) {
  Desc x;
  TF_Tensor* pt = c.device_input(0, &x) ? c.input(1) : nullptr;
  if (!pt) return;
  std::vector<int64_t> p = host_ints(pt);
  std::vector<int> perm(p.begin(), p.end()), seen(x.t.ndim, 0);
  bool valid = int(p.size()) == x.t.ndim;
  for (int v : perm) valid = valid && v >= 0 && v < x.t.ndim && !seen[v]++;
  if (!valid) return void(c.fail(TF_INVALID_ARGUMENT, "perm is not a permutation of the dims"));
  copy_to_new_output(c, x.permuted(perm.data()));
}

}  // namespace

void register_shape() {
  handler("broadcast_to", h_broadcast_to);
  handler("fill", h_fill);
  handler("tile", h_tile);
  handler("transpose", h_transpose);
}

}  // namespace udtf
