// matmul.cc — MatMul and BatchMatMulV2/V3: transposes as swapped strides, batch dimensions
// broadcast as stride-0 views, one op-set matmul.
#include <utility>

#include "call.h"

namespace udtf {
namespace {

void h_matmul(Call& c) {
  Desc a, b;
  if (!c.device_input(0, &a) || !c.device_input(1, &b)) return;
  if (a.t.ndim < 2 || b.t.ndim < 2)
    return void(c.fail(TF_INVALID_ARGUMENT, "inputs must be at least 2-D"));
  for (auto [d, t] : {std::pair<Desc*, bool>{&a, c.k->ta}, {&b, c.k->tb}})
    if (t) {
      std::swap(d->shape[d->t.ndim - 1], d->shape[d->t.ndim - 2]);
      std::swap(d->strides[d->t.ndim - 1], d->strides[d->t.ndim - 2]);
    }
  int64_t m = a.shape[a.t.ndim - 2], k = a.shape[a.t.ndim - 1], n = b.shape[b.t.ndim - 1];
  if (b.shape[b.t.ndim - 2] != k)
    return void(c.fail(TF_INVALID_ARGUMENT, "matrix size-incompatible: inner dimensions " +
                                                std::to_string(k) + " and " +
                                                std::to_string(b.shape[b.t.ndim - 2])));
  Desc ba = a, bb = b;  // batch dims only, for broadcasting
  ba.t.ndim -= 2;
  bb.t.ndim -= 2;
  std::vector<int64_t> dims;
  if (!broadcast_shape(c, {&ba, &bb}, &dims)) return;
  Desc va = broadcast(ba, dims), vb = broadcast(bb, dims);
  int nd = va.t.ndim = vb.t.ndim = int32_t(dims.size()) + 2;
  va.shape[nd - 2] = m, va.shape[nd - 1] = k, vb.shape[nd - 2] = k, vb.shape[nd - 1] = n;
  va.strides[nd - 2] = a.strides[a.t.ndim - 2], va.strides[nd - 1] = a.strides[a.t.ndim - 1];
  vb.strides[nd - 2] = b.strides[b.t.ndim - 2], vb.strides[nd - 1] = b.strides[b.t.ndim - 1];
  dims.push_back(m);
  dims.push_back(n);
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dy = desc(c, y);
  if (k == 0) c.run(UD_OP_ZERO, {}, {&dy});
  else c.run(UD_OP_MATMUL, {&va, &vb}, {&dy});
}

}  // namespace

void register_matmul() { handler("matmul", h_matmul); }

}  // namespace udtf
