// shape.cc — BroadcastTo, Fill, Tile and Transpose as strided views copied by the op set's copy;
// Pad as the op set's pad_constant (any layout: it pads TF's own dimensions).
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

void h_pad(Call& c) {
  Desc x;
  TF_Tensor* pt = c.device_input(0, &x) ? c.input(1) : nullptr;
  if (!pt) return;
  if (TF_NumDims(pt) != 2 || TF_Dim(pt, 0) != x.t.ndim || TF_Dim(pt, 1) != 2)
    return void(c.fail(TF_INVALID_ARGUMENT, "paddings must be a matrix with 2 columns and one row "
                                            "per input dimension (" + std::to_string(x.t.ndim) +
                                            ")"));
  std::vector<int64_t> pads = host_ints(pt), dims = dims_of(x);
  for (int i = 0; i < x.t.ndim; i++) {
    if (pads[2 * i] < 0 || pads[2 * i + 1] < 0)
      return void(c.fail(TF_INVALID_ARGUMENT, "paddings must be non-negative: " +
                                              std::to_string(pads[2 * i]) + " " +
                                              std::to_string(pads[2 * i + 1])));
    dims[i] += pads[2 * i] + pads[2 * i + 1];
  }
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dy = desc(c, y);
  c.run(UD_OP_PAD_CONSTANT, {&x}, {&dy},
        Attrs(UD_OP_PAD_CONSTANT).ints("pads", pads.data(), int64_t(pads.size())));
}

// A window of x (begin, size; size -1 = to the end) copied out.
void h_slice(Call& c) {
  Desc x;
  TF_Tensor* bt = c.device_input(0, &x) ? c.input(1) : nullptr;
  TF_Tensor* st = bt ? c.input(2) : nullptr;
  if (!st) return;
  std::vector<int64_t> begin = host_ints(bt), size = host_ints(st);
  if (TF_NumDims(bt) != 1 || TF_NumDims(st) != 1 || int(begin.size()) != x.t.ndim ||
      int(size.size()) != x.t.ndim)
    return void(c.fail(TF_INVALID_ARGUMENT, "begin and size must be 1-D with one entry per input "
                                            "dimension (" + std::to_string(x.t.ndim) + ")"));
  Desc view = x;
  int64_t offset = 0;
  for (int i = 0; i < x.t.ndim; i++) {
    int64_t b = begin[i], n = size[i] == -1 ? x.shape[i] - b : size[i];
    if (b < 0 || n < 0 || b + n > x.shape[i])
      return void(c.fail(TF_INVALID_ARGUMENT, "Expected begin[" + std::to_string(i) + "] = " +
                                              std::to_string(b) + " and size = " +
                                              std::to_string(size[i]) + " within dimension " +
                                              std::to_string(x.shape[i])));
    view.shape[i] = n;
    offset += b * x.strides[i];
  }
  view.t.byte_offset += uint64_t(offset) * TF_DataTypeSize(c.out_type());
  copy_to_new_output(c, view);
}

}  // namespace

void register_shape() {
  handler("slice", h_slice);
  handler("pad", h_pad);
  handler("broadcast_to", h_broadcast_to);
  handler("fill", h_fill);
  handler("tile", h_tile);
  handler("transpose", h_transpose);
}

}  // namespace udtf
