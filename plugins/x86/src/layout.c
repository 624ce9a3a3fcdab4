/* layout.c — tensor layouts (issue 24) and the plugin's debug counters.
 *
 * A layout is a stride pattern. A 4-d [N, C, H, W] tensor is "nchw" with dense row-major
 * strides (C*H*W, H*W, W, 1) and "nhwc" (channels-last) with (H*W*C, 1, W*C, C); the
 * layout-sensitive kernels (conv, pooling, batch norm) run both natively and write their output
 * in its own strides. Other strides are copied to a dense buffer first (or from one, for an
 * output), and every such copy is counted in "layout_copies". */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "x86.h"

/* Dims of extent 1 may carry any stride (torch gives them several): they do not count. */
static int dense_in_order(const UD_Tensor* t, const int* order) {
  int64_t step = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    const int d = order[i];
    if (t->shape[d] != 1 && t->strides[d] != step) return 0;
    step *= t->shape[d];
  }
  return 1;
}

int ud_x86_layout4(const UD_Tensor* t) {
  static const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
  if (t->ndim != 4) return UD_X86_OTHER;
  if (dense_in_order(t, nchw)) return UD_X86_NCHW;
  return dense_in_order(t, nhwc) ? UD_X86_NHWC : UD_X86_OTHER;
}

static atomic_llong g_counters[UD_X86_NUM_COUNTERS];
static const char* const g_counter_names[UD_X86_NUM_COUNTERS] = {
    "layout_copies", "program_compiles", "program_disk_hits", "program_rebuilds", "program_no_jit"};

void ud_x86_count(int counter) { atomic_fetch_add(&g_counters[counter], 1); }

/* Exported (exports.map) for unidev_x86.debug_counters(): the counter's value, -1 if unknown. */
UD_EXPORT int64_t ud_x86_debug_counter(const char* name) {
  for (int i = 0; name && i < UD_X86_NUM_COUNTERS; i++)
    if (strcmp(name, g_counter_names[i]) == 0) return atomic_load(&g_counters[i]);
  return -1;
}

UD_EXPORT const char* ud_x86_debug_counter_name(int i) {
  return i >= 0 && i < UD_X86_NUM_COUNTERS ? g_counter_names[i] : NULL;
}

/* The dense copy of a tensor in `layout` (strides and buffer owned by s). */
int ud_x86_stage(const UD_Tensor* t, int layout, int copy_in, UD_X86Staged* s) {
  memset(s, 0, sizeof *s);
  s->orig = t;
  s->t = *t;
  if (ud_x86_layout4(t) == layout || ud_kit_numel(t) == 0) return 1;
  const int64_t n = t->shape[0], c = t->shape[1], h = t->shape[2], w = t->shape[3];
  const int64_t st[2][4] = {{c * h * w, h * w, w, 1}, {h * w * c, 1, w * c, c}};
  memcpy(s->strides, st[layout == UD_X86_NHWC], sizeof s->strides[0] * 4);
  s->buf = malloc((size_t)(n * c * h * w) * (size_t)ud_kit_itemsize(t->dtype));
  if (!s->buf) return 0;
  s->t.handle = (UD_Handle)(uintptr_t)s->buf;
  s->t.byte_offset = 0;
  s->t.strides = s->strides;
  s->copied = 1;
  ud_x86_count(UD_X86_LAYOUT_COPIES);
  if (copy_in) {
    const UD_Tensor* views[2] = {&s->t, t};
    ud_x86_map(NULL, 2, views, NULL);
  }
  return 1;
}

void ud_x86_unstage(UD_X86Staged* s, int copy_out) {
  if (s->copied && copy_out) {
    const UD_Tensor* views[2] = {s->orig, &s->t};
    ud_x86_map(NULL, 2, views, NULL);
  }
  free(s->buf);
  s->buf = NULL;
}
