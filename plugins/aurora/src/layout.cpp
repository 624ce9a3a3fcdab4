// layout.cpp — which layout a layout-sensitive call computes in, and the plugin's debug counters.
#include <atomic>

#include "strided.h"

namespace aurora {

namespace {

std::atomic<int64_t> g_layout_copies{0};

}  // namespace

Layout choose_layout(const UD_KernelArgs* a, std::initializer_list<int> ins, std::initializer_list<int> outs) {
  const UD_Tensor* ts[8];
  int n = 0;
  for (int i : ins)
    if (i >= 0 && i < a->num_inputs && a->inputs[i].ndim >= 0) ts[n++] = &a->inputs[i];
  for (int i : outs)
    if (i >= 0 && i < a->num_outputs && a->outputs[i].ndim >= 0) ts[n++] = &a->outputs[i];
  int votes[2] = {0, 0};  // an empty tensor or one with both layouts (C = 1, H = W = 1) votes twice
  bool fits[8][2];
  for (int i = 0; i < n; i++)
    for (int l = 0; l < 2; l++) {
      fits[i][l] = ud_kit_numel(ts[i]) == 0 || has_layout(ts[i]->ndim, ts[i]->shape, ts[i]->strides, Layout(l));
      votes[l] += fits[i][l];
    }
  const Layout l = votes[kNHWC] > votes[kNCHW] ? kNHWC : kNCHW;
  int copies = 0;
  for (int i = 0; i < n; i++) copies += !fits[i][l];
  // counted when the call is made (the device copies later, on the stream): a reader needs no sync
  if (copies) g_layout_copies.fetch_add(copies, std::memory_order_relaxed);
  return l;
}

}  // namespace aurora

// Read by the plugin's Python module through ctypes (unidev_debug_counters): the value of the
// counter `name` since the library was loaded, -1 for a name it does not keep.
extern "C" __attribute__((visibility("default"))) int64_t ud_aurora_debug_counter(const char* name) {
  if (name && !strcmp(name, "layout_copies")) return aurora::g_layout_copies.load(std::memory_order_relaxed);
  return -1;
}
