// loss.cc — SparseSoftmaxCrossEntropyWithLogits composed from log_softmax, nll_loss,
// nll_loss_backward, exp and add; labels are checked on the host so a bad one fails this op.
#include <climits>

#include "call.h"

namespace udtf {
namespace {

void h_sparse_xent(Call& c) {
  Desc x, labels;
  if (!c.device_input(0, &x) || !c.device_input(1, &labels)) return;
  if (x.t.ndim != 2 || labels.t.ndim != 1 || labels.shape[0] != x.shape[0])
    return void(c.fail(TF_INVALID_ARGUMENT, "logits must be [batch, classes], labels [batch]"));
  // int64 labels live in device memory and are read back directly (TF's own copy to a
  // host-memory argument goes through its EventMgr threads, ~100 us a step); int32 ones are in
  // host memory.
  std::vector<int64_t> host;
  if (!c.host_values(1, labels, &host)) return;
  for (int64_t v : host)
    if (v < 0 || v >= x.shape[1])
      return void(c.fail(TF_INVALID_ARGUMENT, "Received a label value of " + std::to_string(v) +
                                                  " which is outside the valid range of [0, " +
                                                  std::to_string(x.shape[1]) + ")"));
  TF_DataType dt = c.out_type();
  TF_Tensor* loss = c.output(0, dt, {x.shape[0]});
  TF_Tensor* back = loss ? c.output(1, dt, {x.shape[0], x.shape[1]}) : nullptr;
  if (!back) return;
  Desc dl = desc(c, loss), db = desc(c, back);
  Desc logp = temp_like(c, x, dt), p = temp_like(c, x, dt), onehot = temp_like(c, x, dt);
  Desc ones = temp_like(c, dl, dt), total = absent(), none = absent();
  if (TF_Tensor* t = c.temp(dt, {})) total = desc(c, t);
  const int64_t no_ignore = INT64_MIN;  // TF has no ignored label: every label must be valid
  Attrs nll = Attrs(UD_OP_NLL_LOSS).s("reduction", "none").i("ignore_index", no_ignore);
  Attrs nllb = Attrs(UD_OP_NLL_LOSS_BACKWARD).s("reduction", "none").i("ignore_index", no_ignore);
  // loss = -log_softmax(x)[label]; backprop = softmax(x) - onehot(label)
  c.run(UD_OP_LOG_SOFTMAX, {&x}, {&logp}) &&
      c.run(UD_OP_NLL_LOSS, {&logp, &labels, &none}, {&dl, &total}, nll) &&
      c.run(UD_OP_FILL, {}, {&ones}, Attrs(UD_OP_FILL).f("value", 1.0)) &&
      c.run(UD_OP_NLL_LOSS_BACKWARD, {&ones, &logp, &labels, &none, &total}, {&onehot}, nllb) &&
      c.run(UD_OP_EXP, {&logp}, {&p}) && c.run(UD_OP_ADD, {&p, &onehot}, {&db});
}

}  // namespace

void register_loss() { handler("sparse_xent", h_sparse_xent, kStageHost); }

}  // namespace udtf
