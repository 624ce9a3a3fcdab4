// conv.cc — Conv2D, DepthwiseConv2dNative and their input/filter gradients on the op set's NCHW
// convolutions: NHWC tensors and HWIO filters as permuted views (no copies); asymmetric SAME
// padding (conv2d pads symmetrically) pads the input or takes the padded gradient's interior.
#include "window.h"

namespace udtf {
namespace {

// Where TF CPU's refusal is only a limit of its CPU kernels (NCHW, dilated gradients), the device
// computes, as TF's GPU kernels do. `unsupported`: TF CPU's code for a batch or depth entry.
bool check_conv_attrs(Call& c, TF_Code unsupported) {
  const Kern* k = c.k;
  int cd = k->nchw ? 1 : 3, h = k->nchw ? 2 : 1;
  const std::vector<int64_t>&s = k->strides, &d = k->dilations;
  if (s.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window strides field must specify 4 dimensions");
  if (d.size() != 4)
    return c.fail(TF_INVALID_ARGUMENT, "Sliding window dilations field must specify 4 dimensions");
  if (s[0] != 1 || s[cd] != 1)
    return c.fail(unsupported, "strides " + list_str(s) + ": the batch and depth entries must "
                               "be 1 (strides there are not supported)");
  if (s[h] < 1 || s[h + 1] < 1)
    return c.fail(TF_INVALID_ARGUMENT, "strides " + list_str(s) + ": row and column strides "
                                       "should be larger than 0");
  if (d[0] != 1 || d[cd] != 1)
    return c.fail(unsupported, "dilations " + list_str(d) + ": the batch and depth entries must "
                               "be 1 (dilations there are not supported)");
  if (d[h] < 1 || d[h + 1] < 1)
    return c.fail(TF_INVALID_ARGUMENT, "dilations " + list_str(d) + ": dilated rates should be "
                                       "larger than 0");
  return check_padding(c, cd);
}

// x zero-padded (asymmetrically) into a temporary of the kernel's layout. The op set's conv2d
// pads symmetrically, so this is the one copy left on TF's layout path (stride-2 SAME convs).
Desc padded(Call& c, const Desc& x, const Window& w) {
  int64_t s[4] = {x.shape[0], x.shape[1], x.shape[2] + w.before[0] + w.after[0],
                  x.shape[3] + w.before[1] + w.after[1]};
  Desc out = layout_temp(c, c.out_type(), s);
  int64_t pads[8] = {0, 0, 0, 0, w.before[0], w.after[0], w.before[1], w.after[1]};
  c.run(UD_OP_PAD_CONSTANT, {&x}, {&out}, Attrs(UD_OP_PAD_CONSTANT).ints("pads", pads, 8));
  return out;
}

// Convolution attributes; `pad` null means the input comes pre-padded.
Attrs conv_attrs(int op, Window& w, const int64_t* pad, int64_t groups) {
  static const int64_t zero[2] = {0, 0};
  return Attrs(op).ints("stride", w.stride, 2).ints("padding", pad ? pad : zero, 2)
      .ints("dilation", w.dilation, 2).i("groups", groups);
}

// The input depth a multiple of the filter's, out_backprop the shape the forward gives.
bool conv_shapes(Call& c, const Desc& x, const Desc& f, const Desc& grad, Window* w) {
  int64_t ks[2] = {f.shape[2], f.shape[3]};
  if (f.shape[1] < 1 || x.shape[1] % f.shape[1])
    return c.fail(TF_INVALID_ARGUMENT, "input depth " + std::to_string(x.shape[1]) +
                                           " must be evenly divisible by filter depth " +
                                           std::to_string(f.shape[1]));
  return window(c, x.shape, ks, w) &&
         (grad.t.ndim < 0 ||
          expect_shape(c, "out_backprop", grad,
                       layout_dims(c.k, x.shape[0], f.shape[0], w->out[0], w->out[1])));
}

// A TF filter as the op set's weight: Conv2D's HWIO [R,S,C,K] as OIHW; a depthwise filter
// [R,S,C,M] as [C*M,1,R,S] (output channel c*M+m is group c's m-th: conv2d with groups = C).
Desc weight_view(const Desc& f, bool depthwise) {
  if (!depthwise) return f.permuted(kHwioAsOihw);
  Desc w = f;
  w.shape[0] = f.shape[2] * f.shape[3], w.strides[0] = f.strides[3];
  w.shape[1] = 1, w.strides[1] = w.shape[0];
  w.shape[2] = f.shape[0], w.strides[2] = f.strides[0];
  w.shape[3] = f.shape[1], w.strides[3] = f.strides[1];
  return w;
}

// A depthwise filter's input depth (its dim 2) must be the input's.
bool depthwise_depth(Call& c, bool depthwise, const Desc& x, const Desc& f) {
  return !depthwise || x.shape[1] == f.shape[2] ||
         c.fail(TF_INVALID_ARGUMENT, "input and filter must have the same depth: " +
                                         std::to_string(x.shape[1]) + " vs " +
                                         std::to_string(f.shape[2]));
}

void conv2d(Call& c, bool dw) {
  Desc xin, fin;
  if (!c.device_input(0, &xin) || !c.device_input(1, &fin)) return;
  if (!check_conv_attrs(c, TF_UNIMPLEMENTED)) return;
  if (xin.t.ndim != 4 || fin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input and filter must be 4-D"));
  Desc x = nchw(c.k, xin), f = weight_view(fin, dw), none = absent();
  Window w;
  if (!depthwise_depth(c, dw, x, fin) || !conv_shapes(c, x, f, none, &w)) return;
  TF_Tensor* y = c.output(0, c.out_type(), layout_dims(c.k, x.shape[0], f.shape[0], w.out[0],
                                                      w.out[1]));
  if (!y) return;
  Desc dy = nchw(c.k, desc(c, y)), src = symmetric(w) ? x : padded(c, x, w);
  c.run(UD_OP_CONV2D, {&src, &f, &none}, {&dy},
        conv_attrs(UD_OP_CONV2D, w, symmetric(w) ? w.before : nullptr, x.shape[1] / f.shape[1]));
}

void conv2d_bi(Call& c, bool dw) {
  std::vector<int64_t> xdims;
  Desc fin, gin;
  if (!c.shape_arg(0, "input_sizes", &xdims) || !c.device_input(1, &fin) ||
      !c.device_input(2, &gin) || !check_conv_attrs(c, TF_UNIMPLEMENTED))
    return;
  if (xdims.size() != 4 || fin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input_sizes, filter and out_backprop must be 4-D"));
  Desc f = weight_view(fin, dw), xs = nchw(c.k, contiguous(0, c.out_type(), xdims.data(), 4, 0));
  Window w;
  if (!depthwise_depth(c, dw, xs, fin) || !conv_shapes(c, xs, f, gin, &w)) return;
  TF_Tensor* gx = c.output(0, c.out_type(), xdims);
  if (!gx) return;
  Desc dx = nchw(c.k, desc(c, gx)), g = nchw(c.k, gin);
  int64_t groups = dx.shape[1] / f.shape[1];
  int64_t shape[4] = {dx.shape[0], dx.shape[1], dx.shape[2], dx.shape[3]};
  if (symmetric(w))
    return void(c.run(UD_OP_CONV2D_BACKWARD_INPUT, {&g, &f}, {&dx},
                      conv_attrs(UD_OP_CONV2D_BACKWARD_INPUT, w, w.before, groups)
                          .ints("input_shape", shape, 4)));
  // Asymmetric padding: the gradient of the padded input, then its interior.
  shape[2] += w.before[0] + w.after[0];
  shape[3] += w.before[1] + w.after[1];
  Desc gp = layout_temp(c, c.out_type(), shape), inner = gp;
  if (!c.run(UD_OP_CONV2D_BACKWARD_INPUT, {&g, &f}, {&gp},
             conv_attrs(UD_OP_CONV2D_BACKWARD_INPUT, w, nullptr, groups)
                 .ints("input_shape", shape, 4)))
    return;
  for (int i = 0; i < 4; i++) inner.shape[i] = dx.shape[i];
  inner.t.byte_offset = uint64_t(w.before[0] * gp.strides[2] + w.before[1] * gp.strides[3]) *
                        TF_DataTypeSize(c.out_type());
  c.run(UD_OP_COPY, {&inner}, {&dx});
}

void conv2d_bf(Call& c, bool dw) {
  Desc xin, gin;
  std::vector<int64_t> fdims;
  // TF CPU's Conv2DBackpropFilter reports batch/depth strides as invalid arguments
  if (!c.device_input(0, &xin) || !c.shape_arg(1, "filter_sizes", &fdims) ||
      !c.device_input(2, &gin) || !check_conv_attrs(c, TF_INVALID_ARGUMENT))
    return;
  if (fdims.size() != 4 || xin.t.ndim != 4 || gin.t.ndim != 4)
    return void(c.fail(TF_INVALID_ARGUMENT, "input, filter_sizes and out_backprop must be 4-D"));
  Desc x = nchw(c.k, xin), g = nchw(c.k, gin);
  Desc fs = contiguous(0, c.out_type(), fdims.data(), 4, 0);
  Window w;
  if (!depthwise_depth(c, dw, x, fs) || !conv_shapes(c, x, weight_view(fs, dw), gin, &w)) return;
  TF_Tensor* gf = c.output(0, c.out_type(), fdims);
  if (!gf) return;
  Desc df = weight_view(desc(c, gf), dw);
  int64_t groups = x.shape[1] / df.shape[1];
  int64_t wshape[4] = {df.shape[0], df.shape[1], df.shape[2], df.shape[3]};
  Desc src = symmetric(w) ? x : padded(c, x, w);
  c.run(UD_OP_CONV2D_BACKWARD_WEIGHT, {&g, &src}, {&df},
        conv_attrs(UD_OP_CONV2D_BACKWARD_WEIGHT, w, symmetric(w) ? w.before : nullptr, groups)
            .ints("weight_shape", wshape, 4));
}

}  // namespace

void register_conv() {
  handler("conv2d", [](Call& c) { conv2d(c, false); });
  handler("conv2d_bi", [](Call& c) { conv2d_bi(c, false); });
  handler("conv2d_bf", [](Call& c) { conv2d_bf(c, false); });
  handler("dwconv2d", [](Call& c) { conv2d(c, true); });
  handler("dwconv2d_bi", [](Call& c) { conv2d_bi(c, true); });
  handler("dwconv2d_bf", [](Call& c) { conv2d_bf(c, true); });
}

}  // namespace udtf
