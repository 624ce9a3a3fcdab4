// conv.cpp — the three conv2d kernels: argument checks against the op set, the choice of
// algorithm, and the packing of strided views into the dense buffers the algorithms take.
// Channels-last activations (strides (H*W*C, 1, W*C, C), src/layout.c) go to "onednn",
// "im2col" and (depthwise) "direct" as they are, and auto sends them there (oneDNN for
// float32); other "direct" and "winograd" take NCHW, so they, and any other strides, get a copy
// counted in layout_copies.
//
// The `algorithm` attribute: "onednn", "direct", "im2col", "winograd" or "auto". What "auto"
// picks (from benchmarks/run.py on the ResNet-18 layers, batch 8, 2 threads; Winograd's 16
// GEMMs run on oneDNN's sgemm, single-threaded inside its parallel loop — OpenBLAS called from
// two threads at once measured anywhere from 0.5x to 1.3x):
//   depthwise (one input channel per group): "direct" (ISPC loops on NCHW planes, no reorders)
//     except for float32 input planes of <= 32x32, where oneDNN's channel-blocked kernels keep
//     all lanes busy (our row loops fill 14 of 16 lanes at 14x14, 7 of 8 at 7x7, and pay a
//     fixed cost per plane): forward always, grad_x when strided, grad_w for kernels <= 3x3
//     (oneDNN's 5x5 grad_w measured 3-12x slower than direct). Measured single-threaded on
//     MobileNetV3 / EfficientNet layers, batch 8-32;
//   float32 with oneDNN built in:
//     "winograd" for 3x3 / stride 1 / dilation 1 layers with >= 128 channels per group on both
//       sides and outputs of >= 28x28 (y, grad_x) or >= 14x14 (grad_w): 1.15-1.45x oneDNN in
//       isolation (y at 14x14 ties, 7x7 is 2.5x slower). It needs 2.25x fewer multiplies, but
//       its transforms are memory-bound: at 64 channels (64x56x56) the full benchmark measured
//       it anywhere from 0.3x to 1.3x oneDNN between runs on this shared machine, so auto
//       leaves those layers to oneDNN (1.0-1.05x torch in every run);
//     "im2col" for grad_x when the input has fewer than 16 channels per group or the kernel is
//       1x1 with stride > 1: oneDNN's backward-data kernels measured 1.2-3x slower there;
//     "onednn" for everything else;
//   otherwise (float64, or a build without oneDNN such as arm64): "winograd" when it applies
//     and both per-group channel counts are >= 16; "direct" when a per-group GEMM would be thin
//     (c/groups * r * s < 16 or k/groups < 4, e.g. depthwise); "im2col" for the rest.
#include <memory>

#include "conv_algos.h"
#include "dense_common.h"  // and x86.h
#ifdef UD_DENSE_ONEDNN
#include "conv_onednn.h"
#endif

namespace ud_dense {
namespace {

enum class Algo { automatic, onednn, direct, im2col, winograd };
const char* const kAlgoNames[] = {"auto", "onednn", "direct", "im2col", "winograd"};

struct ConvCall {
  const char* op;
  ConvDir dir;
  ConvShape p{};
  Algo algo = Algo::automatic;
  const UD_Tensor *in0 = nullptr, *in1 = nullptr, *bias = nullptr, *out = nullptr;
  const UD_Tensor* residual = nullptr;  // conv2d_bias_act: y = act(conv + bias + residual)
  int act = UD_ACT_NONE;
};

UD_Error* read_ints(const char* op, const UD_Attr& a, int64_t n, int64_t min, int64_t* v) {
  UD_KIT_REQUIRE(a.value.ints.len == n, UD_ERR_INVALID_ARGUMENT,
                 "%s: attribute '%s' has %lld values, expected %lld", op, a.name,
                 ll(a.value.ints.len), ll(n));
  for (int64_t i = 0; i < n; i++) {
    v[i] = a.value.ints.data[i];
    UD_KIT_REQUIRE(v[i] >= min, UD_ERR_INVALID_ARGUMENT,
                   "%s: attribute '%s' has %lld at %lld, expected values >= %lld", op, a.name,
                   ll(v[i]), ll(i), ll(min));
  }
  return nullptr;
}

// Per direction: the op and the positions (ops.h) of what conv_kernel reads. The backwards take
// the shape of their output (grad_x or grad_w) as their leading attribute.
struct ConvOp {
  int op, in0, in1, shape, stride, padding, dilation, groups, algorithm;
};
#define UD_CONV_OP(K, IN0, IN1, SHAPE)                                                     \
  {UD_OP_##K, UD_IN_##K##_##IN0, UD_IN_##K##_##IN1, SHAPE, UD_ATTR_##K##_STRIDE,           \
   UD_ATTR_##K##_PADDING, UD_ATTR_##K##_DILATION, UD_ATTR_##K##_GROUPS, UD_ATTR_##K##_ALGORITHM}
const ConvOp kOps[4] = {
    UD_CONV_OP(CONV2D, X, WEIGHT, -1),
    UD_CONV_OP(CONV2D_BACKWARD_INPUT, GRAD_Y, WEIGHT, UD_ATTR_CONV2D_BACKWARD_INPUT_INPUT_SHAPE),
    UD_CONV_OP(CONV2D_BACKWARD_WEIGHT, GRAD_Y, X, UD_ATTR_CONV2D_BACKWARD_WEIGHT_WEIGHT_SHAPE),
    UD_CONV_OP(CONV2D_BIAS_ACT, X, WEIGHT, -1)};
UD_X86_SAME_POS(UD_IN_CONV2D_BIAS, UD_IN_CONV2D_BIAS_ACT_BIAS);

// stride, padding, dilation, groups, algorithm
UD_Error* read_attrs(ConvCall* c, const ConvOp& k, const UD_Attr* at) {
  ConvShape& p = c->p;
  int64_t* fields[3][2] = {{&p.sh, &p.sw}, {&p.ph, &p.pw}, {&p.dh, &p.dw}};
  const int pos[3] = {k.stride, k.padding, k.dilation};
  for (int i = 0; i < 3; i++) {  // stride >= 1, padding >= 0, dilation >= 1
    int64_t v[2] = {0, 0};
    UD_KIT_TRY(read_ints(c->op, at[pos[i]], 2, i == 1 ? 0 : 1, v));
    *fields[i][0] = v[0], *fields[i][1] = v[1];
  }
  p.g = at[k.groups].value.i;
  UD_KIT_REQUIRE(p.g >= 1, UD_ERR_INVALID_ARGUMENT,
                 "%s: attribute 'groups' is %lld, expected >= 1", c->op, ll(p.g));
  const char* algo = at[k.algorithm].value.s;
  for (int i = 0; i < 5; i++)
    if (std::strcmp(algo, kAlgoNames[i]) == 0) {
      c->algo = Algo(i);
      return nullptr;
    }
  return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute 'algorithm' is '%s', expected one "
                      "of auto, onednn, direct, im2col, winograd", c->op, algo);
}

// Fills the problem from x's shape [n, c, h, w] and the weight's [k, c/g, r, s].
UD_Error* read_shape(const char* op, const int64_t* xs, const int64_t* ws, ConvShape* p) {
  p->n = xs[0], p->c = xs[1], p->h = xs[2], p->w = xs[3], p->k = ws[0], p->r = ws[2], p->s = ws[3];
  UD_KIT_REQUIRE(p->c % p->g == 0 && p->k % p->g == 0 && ws[1] == p->c / p->g,
                 UD_ERR_INVALID_ARGUMENT,
                 "%s: x has %lld channels, weight is [%lld, %lld, ..], groups = %lld; expected "
                 "channel counts divisible by groups and weight.shape[1] == %lld", op, ll(p->c),
                 ll(p->k), ll(ws[1]), ll(p->g), ll(p->c / p->g));
  const int64_t eh = p->h + 2 * p->ph - p->dh * (p->r - 1) - 1;
  const int64_t ew = p->w + 2 * p->pw - p->dw * (p->s - 1) - 1;
  UD_KIT_REQUIRE(p->r >= 1 && p->s >= 1 && eh >= 0 && ew >= 0, UD_ERR_INVALID_ARGUMENT,
                 "%s: kernel %lldx%lld (dilated %lldx%lld) is empty or larger than the padded "
                 "input %lldx%lld", op, ll(p->r), ll(p->s), ll(p->dh * (p->r - 1) + 1),
                 ll(p->dw * (p->s - 1) + 1), ll(p->h + 2 * p->ph), ll(p->w + 2 * p->pw));
  p->oh = eh / p->sh + 1, p->ow = ew / p->sw + 1;
  return nullptr;
}

UD_Error* expect_shape(const char* op, const char* arg, const UD_Tensor& t, const int64_t* want) {
  const int64_t* s = t.shape;
  UD_KIT_REQUIRE(std::equal(s, s + 4, want), UD_ERR_INVALID_ARGUMENT,
                 "%s: '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]",
                 op, arg, ll(s[0]), ll(s[1]), ll(s[2]), ll(s[3]), ll(want[0]), ll(want[1]),
                 ll(want[2]), ll(want[3]));
  return nullptr;
}

Algo choose(const ConvCall& c, bool is_f32) {
  const ConvShape& p = c.p;
  // channels-last: oneDNN's nhwc kernels take it as it is, else im2col or (depthwise) direct
  if (ud_x86_layout4(c.in0) == UD_X86_NHWC)
    return kOneDNN && is_f32 ? Algo::onednn : p.cg() == 1 ? Algo::direct : Algo::im2col;
  if (kOneDNN && is_f32 && p.cg() == 1) {  // depthwise: see the header
    const bool small = p.h * p.w <= 1024, strided = p.sh > 1 || p.sw > 1;
    const bool dnn = c.dir == ConvDir::forward           ? small
                     : c.dir == ConvDir::backward_input ? small && strided
                                                         : small && p.r * p.s <= 9;
    return dnn ? Algo::onednn : Algo::direct;
  }
  if (p.cg() == 1) return Algo::direct;
  if (kOneDNN && is_f32) {
    const bool bwd_x = c.dir == ConvDir::backward_input;
    const int64_t side = c.dir == ConvDir::backward_weight ? 14 : 28, chans = 128;
    if (winograd_applies(p) && std::min(p.cg(), p.kg()) >= chans && std::min(p.oh, p.ow) >= side)
      return Algo::winograd;
    const bool thin = p.cg() < 16 || (p.r == 1 && p.s == 1 && (p.sh > 1 || p.sw > 1));
    return bwd_x && thin ? Algo::im2col : Algo::onednn;
  }
  if (winograd_applies(p) && p.cg() >= 16 && p.kg() >= 16) return Algo::winograd;
  if (p.cg() * p.r * p.s < 16 || p.kg() < 4) return Algo::direct;
  return Algo::im2col;
}

UD_Error* check_algo(const ConvCall& c, bool is_f32) {
  const ConvShape& p = c.p;
  UD_KIT_REQUIRE(c.algo != Algo::winograd || winograd_applies(p), UD_ERR_INVALID_ARGUMENT,
                 "%s: algorithm 'winograd' needs a 3x3 kernel, stride 1 and dilation 1; got "
                 "%lldx%lld, stride [%lld, %lld], dilation [%lld, %lld]", c.op, ll(p.r), ll(p.s),
                 ll(p.sh), ll(p.sw), ll(p.dh), ll(p.dw));
  if (c.algo == Algo::onednn && !(kOneDNN && is_f32))
    return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: algorithm 'onednn' %s", c.op,
                        kOneDNN ? "supports float32 only" : "is not built in");
  const int64_t lim = INT32_MAX;
  if (p.cg() * p.r * p.s > lim || p.n * p.oh * p.ow > lim || p.k > lim)
    return ud_kit_error(UD_ERR_UNSUPPORTED, "%s: problem too large for 32-bit BLAS dims", c.op);
  return nullptr;
}

template <class T>
const T* dense_in(const UD_Tensor& t, std::unique_ptr<T[]>& buf) {
  if (ud_kit_is_contiguous(&t)) return data_ptr<T>(t);
  buf.reset(new T[ud_kit_numel(&t)]);
  pack(t, buf.get(), false);
  return buf.get();
}

// The call's 4-d tensors as the algorithm takes them: activations (x, y and their gradients)
// dense in the call's layout, channels-last for oneDNN when the leading activation is, else NCHW;
// the weight (or grad_w) dense KCRS, except that oneDNN takes any positive strides. What is not
// so already is copied (counted in layout_copies) and an output copied back.
struct Staged {
  UD_X86Staged s[3];  // in0, in1, out
  bool ok = true;
  Staged(const ConvCall& c, bool nhwc) {
    const UD_Tensor* t[3] = {c.in0, c.in1, c.out};
    const int weight = c.dir == ConvDir::backward_weight ? 2 : 1;
    for (int i = 0; i < 3; i++) {
      bool strided_ok = i == weight && c.algo == Algo::onednn;
      for (int d = 0; d < 4; d++) strided_ok &= t[i]->strides[d] > 0 || t[i]->shape[d] == 1;
      const int layout = i != weight && nhwc ? UD_X86_NHWC : UD_X86_NCHW;
      ok = ok && ud_x86_stage(t[i], strided_ok ? ud_x86_layout4(t[i]) : layout, i < 2, &s[i]);
    }
  }
  ~Staged() {
    for (int i = 0; i < 3; i++) ud_x86_unstage(&s[i], i == 2);
  }
};

// Activations oneDNN's post-op computes as the op set does: its relu turns nan into 0, its gelu
// (erf) inf into nan, so those two run in our epilogue pass after the primitive.
bool dnn_act(int act) { return act != UD_ACT_RELU && act != UD_ACT_GELU; }

template <class T>
void run_conv(const ConvCall& c, const Staged& st, bool empty, bool nhwc, const T* bias, T* o) {
  const UD_Tensor& out = st.s[2].t;
  if (empty) {  // an empty sum: bias or zero
    std::fill(o, o + ud_kit_numel(&out), T(0));
    return epilogue<T>(out, bias, nullptr, UD_ACT_NONE);
  }
  const T* i0 = data_ptr<T>(st.s[0].t);
  const T* i1 = data_ptr<T>(st.s[1].t);
  if (c.algo == Algo::onednn) {
#ifdef UD_DENSE_ONEDNN
    const UD_Tensor& w = c.dir == ConvDir::backward_weight ? out : st.s[1].t;
    int64_t wst[4];  // a dim of extent 1 may have any stride: one that cannot confuse oneDNN
    for (int d = 0; d < 4; d++) wst[d] = w.shape[d] == 1 ? 1 : w.strides[d];
    if constexpr (std::is_same_v<T, float>)
      onednn_conv(c.dir, c.p, nhwc, wst, i0, i1, bias, o, dnn_act(c.act) ? c.act : UD_ACT_NONE,
                  c.residual != nullptr);
#endif
    return;
  }
  ConvShape p = c.p;
  p.cl = nhwc;
  const ConvAlgo<T> a = c.algo == Algo::direct   ? conv_direct<T>()
                        : c.algo == Algo::im2col ? conv_im2col<T>()
                                                 : conv_winograd<T>();
  if (c.dir == ConvDir::forward) a.forward(p, i0, i1, bias, o);
  if (c.dir == ConvDir::backward_input) a.backward_input(p, i0, i1, o);
  if (c.dir == ConvDir::backward_weight) a.backward_weight(p, i0, i1, o);
}

template <class T>
void run(const ConvCall& c) {
  const int64_t n_out = ud_kit_numel(c.out);
  if (n_out == 0) return;
  std::unique_ptr<T[]> bb;
  const T* bias = c.bias ? dense_in<T>(*c.bias, bb) : nullptr;
  const bool empty = ud_kit_numel(c.in0) == 0 || ud_kit_numel(c.in1) == 0;
  const bool cl_algo = c.algo == Algo::onednn || c.algo == Algo::im2col ||
                       (c.algo == Algo::direct && c.p.cg() == 1);
  const bool nhwc = cl_algo && !empty && ud_x86_layout4(c.in0) == UD_X86_NHWC;
  Staged st(c, nhwc);
  if (!st.ok) throw std::bad_alloc();
  const UD_Tensor& out = st.s[2].t;
  T* o = data_ptr<T>(out);
  const bool fused_dnn = c.algo == Algo::onednn && !empty && c.dir == ConvDir::forward;
  if (c.residual && fused_dnn) {  // oneDNN adds the output's contents (a sum post-op)
    const UD_Tensor* views[2] = {&out, c.residual};
    ud_x86_map(nullptr, 2, views, nullptr);
  }
  run_conv(c, st, empty, nhwc, bias, o);
  if (fused_dnn ? !dnn_act(c.act) : c.residual || c.act != UD_ACT_NONE)
    epilogue<T>(out, nullptr, fused_dnn ? nullptr : c.residual, c.act);
}


// which: a ConvDir, or 3 for conv2d_bias_act (forward, then the epilogue)
template <int which>
UD_Error* conv_kernel(const UD_KernelArgs* a) {
  const ConvOp& k = kOps[which];
  const UD_OpInfo* info = ud_op_info(k.op);
  const ConvDir dir = which == 3 ? ConvDir::forward : ConvDir(which);
  const bool fwd = dir == ConvDir::forward;
  ConvCall c{info->name, dir};
  UD_KIT_TRY(ud_x86_check_args(k.op, a));
  if (which == 3) {  // the activation, bias and residual against y
    UD_KIT_TRY(ud_kit_check_epilogue(k.op, a, &c.act));
    const UD_Tensor& r = a->inputs[UD_IN_CONV2D_BIAS_ACT_RESIDUAL];
    c.residual = ud_kit_present(&r) ? &r : nullptr;
  }
  c.in0 = &a->inputs[k.in0], c.in1 = &a->inputs[k.in1], c.out = &a->outputs[0];
  const char* out_name = info->output_names[0];
  UD_KIT_TRY(check_input(c.op, info->input_names[k.in0], *c.in0, 4, nullptr));
  UD_KIT_TRY(check_input(c.op, info->input_names[k.in1], *c.in1, 4, &c.in0->dtype));
  UD_KIT_TRY(check_input(c.op, out_name, *c.out, 4, &c.in0->dtype));
  int64_t out_shape[4];
  if (!fwd) UD_KIT_TRY(read_ints(c.op, a->attrs[k.shape], 4, 0, out_shape));
  UD_KIT_TRY(read_attrs(&c, k, a->attrs));
  const int64_t* xs = dir == ConvDir::backward_input ? out_shape : (fwd ? c.in0 : c.in1)->shape;
  const int64_t* ws = dir == ConvDir::backward_weight ? out_shape : c.in1->shape;
  UD_KIT_TRY(read_shape(c.op, xs, ws, &c.p));
  const int64_t gy[4] = {c.p.n, c.p.k, c.p.oh, c.p.ow};
  UD_KIT_TRY(expect_shape(c.op, fwd ? "y" : "grad_y", fwd ? *c.out : *c.in0, gy));
  if (!fwd) UD_KIT_TRY(expect_shape(c.op, out_name, *c.out, out_shape));
  const UD_Tensor& b = a->inputs[UD_IN_CONV2D_BIAS];
  if (fwd && ud_kit_present(&b)) {
    UD_KIT_TRY(check_input(c.op, "bias", b, 1, &c.in0->dtype));
    UD_KIT_REQUIRE(b.shape[0] == c.p.k, UD_ERR_INVALID_ARGUMENT,
                   "%s: 'bias' has %lld values, expected %lld", c.op, ll(b.shape[0]), ll(c.p.k));
    c.bias = &b;
  }
  const bool f32 = c.in0->dtype.bits == 32;
  if (c.algo == Algo::automatic) c.algo = choose(c, f32);
  UD_KIT_TRY(check_algo(c, f32));
  return by_dtype(c.op, c.in0->dtype, [&](auto t) { run<decltype(t)>(c); });
}

}  // namespace
}  // namespace ud_dense

using namespace ud_dense;  // the tables below name its kernels

extern "C" const UD_X86Kernel ud_x86_conv_kernels[] = {
    {UD_OP_CONV2D, UD_X86_FLOAT, omp_kernel<conv_kernel<0>>},
    {UD_OP_CONV2D_BACKWARD_INPUT, UD_X86_FLOAT, omp_kernel<conv_kernel<1>>},
    {UD_OP_CONV2D_BACKWARD_WEIGHT, UD_X86_FLOAT, omp_kernel<conv_kernel<2>>},
    {UD_OP_CONV2D_BIAS_ACT, UD_X86_FLOAT, omp_kernel<conv_kernel<3>>},
    {0, 0, nullptr},
};
