// pool.cc — MaxPool/AvgPool and their gradients on the op set's NCHW pooling; asymmetric SAME
// padding becomes padding=before with ceil_mode where that gives TF's output size.
#include <algorithm>

#include "window.h"

namespace udtf {
namespace {

// `depth`: the input's channels. TF's rules for pooling over the depth dimension are TF's own
// (MaxPool's depthwise pooling runs only on TF's CPU, as on its GPU: refused here).
bool check_pool_attrs(Call& c, int64_t depth) {
  const Kern* k = c.k;
  int cd = k->nchw ? 1 : 3, h = k->nchw ? 2 : 1, op = k->op->ud;
  const std::vector<int64_t>&ks = k->ksize, &s = k->strides;
  if (ks.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window ksize field must specify 4 dimensions");
  if (s.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window stride field must specify 4 dimensions");
  if (ks[0] != 1 || s[0] != 1)
    return c.fail(TF_UNIMPLEMENTED, "ksize " + list_str(ks) + ", strides " + list_str(s) +
                                        ": pooling is not yet supported on the batch dimension");
  for (int i = 0; i < 4; i++) {
    if (ks[i] < 1)
      return c.fail(TF_INVALID_ARGUMENT, "ksize " + list_str(ks) + ": every entry must be > 0");
    if (s[i] < 1)
      return c.fail(TF_INVALID_ARGUMENT, "strides " + list_str(s) + ": every entry must be > 0");
  }
  bool spatial = ks[h] != 1 || ks[h + 1] != 1;
  if (op == UD_OP_MAX_POOL2D_BACKWARD && (ks[cd] != 1 || s[cd] != 1))
    return c.fail(TF_UNIMPLEMENTED, "MaxPoolingGrad is not yet supported on the depth dimension");
  if (op == UD_OP_AVG_POOL2D_BACKWARD && ks[cd] != 1)
    return c.fail(TF_UNIMPLEMENTED, "non-spatial pooling (ksize " + list_str(ks) +
                                        ") is not yet supported");
  if (ks[cd] != 1) {
    if (spatial)
      return c.fail(TF_UNIMPLEMENTED, "ksize " + list_str(ks) + ": pooling supports exactly one "
                                      "of pooling across depth or across width/height");
    if (depth % ks[cd])
      return c.fail(TF_UNIMPLEMENTED, "depthwise pooling requires the depth window to evenly "
                                      "divide the input depth " + std::to_string(depth));
    if (s[cd] != ks[cd])
      return c.fail(TF_UNIMPLEMENTED, "depthwise pooling requires the depth window to equal "
                                      "the depth stride");
    return c.fail(TF_UNIMPLEMENTED, op == UD_OP_AVG_POOL2D
                                        ? "non-spatial pooling is not yet supported"
                                        : "depthwise max pooling is only implemented by TF's CPU");
  }
  if (!check_padding(c, cd)) return false;
  const std::vector<int64_t>& p = k->explicit_pads;
  for (int i = h; i < h + 2 && k->padding == "EXPLICIT"; i++)
    if (p[2 * i] >= ks[i] || p[2 * i + 1] >= ks[i])
      return c.fail(TF_INVALID_ARGUMENT, "explicit_paddings " + list_str(k->explicit_pads) +
                                             ": padding must be smaller than the window size");
  return true;
}

// Pool attributes; asymmetric SAME padding becomes padding=before with ceil_mode when that
// gives TF's output size (padded cells never count: max pads -inf, avg excludes padding).
bool pool_attrs(Call& c, int op, const Desc& x, Window* w, Attrs* a, int64_t* buf) {
  int h = c.k->nchw ? 2 : 1;
  if (!check_pool_attrs(c, x.shape[1])) return false;
  int64_t ks[2] = {c.k->ksize[h], c.k->ksize[h + 1]};
  if (!window(c, x.shape, ks, w)) return false;
  bool ceil = !symmetric(*w);
  for (int i = 0; i < 2; i++) {
    int64_t in = x.shape[2 + i], p = w->before[i], s = w->stride[i];
    int64_t out = ceil ? (in + 2 * p - ks[i] + s - 1) / s + 1 : (in + 2 * p - ks[i]) / s + 1;
    if (ceil && (out - 1) * s >= in + p) out--;
    if (out != w->out[i]) return c.fail(TF_UNIMPLEMENTED, "this asymmetric SAME padding");
  }
  buf[0] = ks[0], buf[1] = ks[1], buf[2] = w->stride[0], buf[3] = w->stride[1];
  buf[4] = w->before[0], buf[5] = w->before[1];
  a->ints("kernel_size", buf, 2).ints("stride", buf + 2, 2).ints("padding", buf + 4, 2)
      .b("ceil_mode", ceil);
  if (op == UD_OP_AVG_POOL2D || op == UD_OP_AVG_POOL2D_BACKWARD) a->b("count_include_pad", false);
  return true;
}

void h_pool(Call& c) {
  Desc xin;
  if (!c.device_input(0, &xin)) return;
  if (xin.t.ndim != 4) return void(c.fail(TF_INVALID_ARGUMENT, "input must be 4-D"));
  Desc x = nchw(c.k, xin);
  Window w;
  Attrs a(c.k->op->ud);
  int64_t buf[6];
  if (!pool_attrs(c, c.k->op->ud, x, &w, &a, buf)) return;
  TF_Tensor* y = c.output(0, c.out_type(), layout_dims(c.k, x.shape[0], x.shape[1], w.out[0],
                                                      w.out[1]));
  if (!y) return;
  Desc dy = nchw(c.k, desc(c, y));
  if (c.k->op->ud == UD_OP_AVG_POOL2D) return void(c.run(UD_OP_AVG_POOL2D, {&x}, {&dy}, a));
  Desc idx = layout_temp(c, TF_INT64, dy.shape);
  c.run(UD_OP_MAX_POOL2D, {&x}, {&dy, &idx}, a);
}

void h_max_pool_grad(Call& c) {
  Desc xin, gin;
  if (!c.device_input(0, &xin) || !c.device_input(2, &gin)) return;
  if (xin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input and grad must be 4-D"));
  Desc x = nchw(c.k, xin), g = nchw(c.k, gin);
  Window w;
  Attrs a(UD_OP_MAX_POOL2D);
  int64_t buf[6];
  if (!pool_attrs(c, UD_OP_MAX_POOL2D, x, &w, &a, buf)) return;
  std::vector<int64_t> out = layout_dims(c.k, x.shape[0], x.shape[1], w.out[0], w.out[1]);
  TF_Tensor* y0 = c.input(1);
  if (!y0 || !expect_shape(c, "orig_output", desc(c, y0), out) ||
      !expect_shape(c, "grad", gin, out))
    return;
  TF_Tensor* gx = c.output(0, c.out_type(), dims_of(xin));
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx));
  // TF passes no argmax: recompute it with the forward kernel.
  Desc y = layout_temp(c, c.out_type(), g.shape), idx = layout_temp(c, TF_INT64, g.shape);
  Attrs b(UD_OP_MAX_POOL2D_BACKWARD);
  std::copy(a.a, a.a + a.n, b.a);
  c.run(UD_OP_MAX_POOL2D, {&x}, {&y, &idx}, a) &&
      c.run(UD_OP_MAX_POOL2D_BACKWARD, {&g, &x, &idx}, {&dx}, b);
}

void h_avg_pool_grad(Call& c) {
  std::vector<int64_t> xdims;
  Desc gin;
  if (!c.shape_arg(0, "orig_input_shape", &xdims) || !c.device_input(1, &gin)) return;
  if (xdims.size() != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "orig_input_shape and grad must be 4-D"));
  Desc x = nchw(c.k, contiguous(0, c.out_type(), xdims.data(), 4, 0)), g = nchw(c.k, gin);
  Window w;
  Attrs a(UD_OP_AVG_POOL2D_BACKWARD);
  int64_t buf[6];
  if (!pool_attrs(c, UD_OP_AVG_POOL2D_BACKWARD, x, &w, &a, buf) ||
      !expect_shape(c, "grad", gin, layout_dims(c.k, x.shape[0], x.shape[1], w.out[0], w.out[1])))
    return;
  TF_Tensor* gx = c.output(0, c.out_type(), xdims);
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx));
  // The op set's backward takes x only for its shape: a stride-0 view of grad stands in for it.
  x = dx;
  x.t.handle = g.t.handle;
  x.t.byte_offset = g.t.byte_offset;
  for (int i = 0; i < 4; i++) x.strides[i] = 0;
  c.run(UD_OP_AVG_POOL2D_BACKWARD, {&g, &x}, {&dx}, a);
}

}  // namespace

void register_pool() {
  handler("pool", h_pool);
  handler("max_pool_grad", h_max_pool_grad);
  handler("avg_pool_grad", h_avg_pool_grad);
}

}  // namespace udtf
