// reduce.cc — Sum/Mean/Max/Min/Prod, ArgMax/ArgMin and BiasAddGrad as op-set reductions over
// axes read on the host.
#include <algorithm>

#include "call.h"

namespace udtf {
namespace {

bool axes_of(Call& c, const Desc& x, const TF_Tensor* t, std::vector<int64_t>* axes) {
  int nd = x.t.ndim;
  for (int64_t a : host_ints(t)) {
    if (a < -nd || a >= std::max(nd, 1))
      return c.fail(TF_INVALID_ARGUMENT, "axis " + std::to_string(a) + " out of range for rank " +
                                             std::to_string(nd));
    if (nd) axes->push_back((a + nd) % nd);
  }
  std::sort(axes->begin(), axes->end());
  axes->erase(std::unique(axes->begin(), axes->end()), axes->end());
  return true;
}

void reduce(Call& c, bool single) {
  TF_Tensor* x = c.input(0);
  TF_Tensor* ax = x ? c.input(1) : nullptr;
  if (!ax) return;
  Desc dx = desc(c, x);
  std::vector<int64_t> axes;
  if (!axes_of(c, dx, ax, &axes)) return;
  if (single && axes.size() != 1) return void(c.fail(TF_INVALID_ARGUMENT, "expected one axis"));
  reduce_into_output(c, c.k->op->ud, dx, axes, c.k->keep_dims);
}

void h_bias_add_grad(Call& c) {
  Desc g;
  if (!c.device_input(0, &g)) return;
  std::vector<int64_t> axes;
  for (int i = 0; i < g.t.ndim; i++)
    if (i != (c.k->nchw ? 1 : g.t.ndim - 1)) axes.push_back(i);
  reduce_into_output(c, UD_OP_SUM, g, axes, false);
}

}  // namespace

void reduce_into_output(Call& c, int op, const Desc& x, const std::vector<int64_t>& axes,
                        bool keep) {
  std::vector<int64_t> dims;
  for (int i = 0; i < x.t.ndim; i++) {
    bool r = std::binary_search(axes.begin(), axes.end(), i);
    if (!r || keep) dims.push_back(r ? 1 : x.shape[i]);
  }
  TF_Tensor* y = c.output(0, c.out_type(), dims);
  if (!y) return;
  Desc dy = desc(c, y);
  // TF: no axes means no reduction; unidev: empty axes means all
  if (axes.empty()) return void(c.run(UD_OP_COPY, {&x}, {&dy}));
  c.run(op, {&x}, {&dy},
        Attrs(op).ints("axes", axes.data(), int64_t(axes.size())).b("keepdims", keep));
}

void register_reduce() {
  handler("reduce", [](Call& c) { reduce(c, false); });
  handler("argmax", [](Call& c) { reduce(c, true); });
  handler("bias_add_grad", h_bias_add_grad);
}

}  // namespace udtf
