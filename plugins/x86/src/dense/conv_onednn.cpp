// conv_onednn.cpp — conv2d forward and both backwards through oneDNN (x86 only). For NCHW
// activations oneDNN picks the layout (format_tag::any, usually blocked nChw16c / OIhw16i16o)
// and our dense NCHW buffers are reordered in and out: forcing plain NCHW costs up to a third of
// the speed and can select a reference kernel. Channels-last activations are given to the
// primitive as they are (format_tag::nhwc: oneDNN's nhwc kernels, no reorder of x, y or their
// gradients). Weights (and grad_w) keep the caller's strides (KCRS, or a channels-last or TF
// HWIO permutation) and are reordered to the primitive's blocked layout, as always.
// Primitives, reorders and the blocked buffers are built once per problem and cached (at most
// 256 plans and 1 GiB of blocked buffers; thread-safe: a plan serves one call at a time). The
// reorders themselves run on every call: an optimizer updates weights in place, and nothing in
// a call tells an updated weight from an unchanged one short of reading it, which costs as much
// as the weight reorder itself.
#include "conv_onednn.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include <unidev/ops.h>  // UD_ACT_*

namespace ud_dense {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

const dnnl::primitive_attr& user_scratch() {
  static const dnnl::primitive_attr* attr = [] {
    auto* a = new dnnl::primitive_attr();  // never destroyed, like the engine
    a->set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return *attr;
}

// One tensor as the caller holds it (NCHW / NHWC / strided weights) and as the primitive wants it.
struct Port {
  int arg;                  // DNNL_ARG_* of the primitive
  memory::desc user;        // plain
  memory buf;               // the primitive's layout; empty when it equals `user`
  dnnl::primitive reorder;  // user -> buf for inputs, buf -> user for the output
  dnnl::primitive prefill;  // the output's user -> buf, for a sum post-op (the residual)
};

// ports[0], ports[1]: the inputs, ports[2]: the output.
struct Plan {
  std::mutex mu;  // the cached buffers serve one call at a time
  dnnl::primitive conv;
  Port ports[3];
  memory::desc bias;
  // One scratchpad per plan (scratchpad_mode::user): oneDNN's own library scratchpad is global
  // to the process, and two host threads running primitives at once crashed in it.
  memory scratch;
  memory::dim scratch_size = 1;

  void need(const memory::desc& d) {
    scratch_size = std::max(scratch_size, memory::dim(d.get_size()));
  }

  void set_ports(const dnnl::engine& eng, const int (&args)[3], const memory::desc (&plain)[3],
                 const memory::desc (&want)[3], bool residual = false) {
    for (int i = 0; i < 3; i++) {
      ports[i].arg = args[i], ports[i].user = plain[i];
      if (want[i] == plain[i]) continue;
      ports[i].buf = memory(want[i], eng);
      const bool in = i < 2;
      const dnnl::reorder::primitive_desc rd(eng, in ? plain[i] : want[i], eng,
                                             in ? want[i] : plain[i], user_scratch());
      need(rd.scratchpad_desc());
      ports[i].reorder = dnnl::reorder(rd);
      if (i == 2 && residual)
        ports[i].prefill = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain[i], eng,
                                                                       want[i], user_scratch()));
    }
  }
};

using Key = std::array<int64_t, 25>;

// Never destroyed: no oneDNN object may outlive the library at process exit.
const dnnl::engine& cpu_engine() {
  static const dnnl::engine* eng = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *eng;
}

std::unique_ptr<Plan> finish(std::unique_ptr<Plan> plan) {
  plan->scratch = memory({{plan->scratch_size}, memory::data_type::u8, tag::x}, cpu_engine());
  return plan;
}

// conv2d_bias_act's epilogue as post-ops: + dst (the residual, placed there first), then act.
dnnl::primitive_attr fused_attr(int act, bool residual) {
  static const dnnl::algorithm kAct[] = {
      dnnl::algorithm::undef,          dnnl::algorithm::eltwise_relu,
      dnnl::algorithm::eltwise_gelu_erf, dnnl::algorithm::eltwise_gelu_tanh,
      dnnl::algorithm::eltwise_logistic, dnnl::algorithm::eltwise_tanh,
      dnnl::algorithm::eltwise_swish};
  dnnl::primitive_attr attr;  // a new one: copies of a dnnl handle share the object
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (residual) ops.append_sum(1.0f);
  if (act > 0) ops.append_eltwise(kAct[act], act == UD_ACT_SILU ? 1.0f : 0.0f, 0.0f);
  attr.set_post_ops(ops);
  return attr;
}

std::unique_ptr<Plan> make_plan(ConvDir dir, const ConvShape& p, bool has_bias, bool nhwc,
                                const int64_t* wst, int act, bool residual) {
  const dnnl::engine& eng = cpu_engine();
  const auto f32 = memory::data_type::f32;
  const memory::dims x{p.n, p.c, p.h, p.w}, y{p.n, p.k, p.oh, p.ow};
  const memory::dims w =
      p.g > 1 ? memory::dims{p.g, p.kg(), p.cg(), p.r, p.s} : memory::dims{p.k, p.c, p.r, p.s};
  const tag layout = nhwc ? tag::nhwc : tag::nchw;
  const memory::desc xp(x, f32, layout), yp(y, f32, layout);
  const memory::desc wp(w, f32, p.g > 1 ? memory::dims{p.kg() * wst[0], wst[0], wst[1], wst[2],
                                                       wst[3]}
                                        : memory::dims{wst[0], wst[1], wst[2], wst[3]});
  const memory::desc xa = nhwc ? xp : memory::desc(x, f32, tag::any);
  const memory::desc ya = nhwc ? yp : memory::desc(y, f32, tag::any);
  const memory::desc wa(w, f32, tag::any);
  const memory::desc bp({p.k}, f32, tag::x);
  // oneDNN counts dilation from 0 and wants an explicit right padding matching oh / ow.
  const memory::dims st{p.sh, p.sw}, dil{p.dh - 1, p.dw - 1}, pl{p.ph, p.pw};
  const memory::dims pr{(p.oh - 1) * p.sh + (p.r - 1) * p.dh + 1 - p.h - p.ph,
                        (p.ow - 1) * p.sw + (p.s - 1) * p.dw + 1 - p.w - p.pw};
  const auto algo = dnnl::algorithm::convolution_direct;
  const auto prop = dnnl::prop_kind::forward_training;
  auto plan = std::make_unique<Plan>();
  if (dir == ConvDir::forward) {
    // an empty bias descriptor (optional_arg in dnnl.hpp) disables the bias term
    const dnnl::convolution_forward::primitive_desc pd(
        eng, prop, algo, xa, wa, has_bias ? bp : memory::desc(), ya, st, dil, pl, pr,
        fused_attr(act, residual));
    plan->conv = dnnl::convolution_forward(pd);
    plan->need(pd.scratchpad_desc());
    plan->set_ports(eng, {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}, {xp, wp, yp},
                    {pd.src_desc(), pd.weights_desc(), pd.dst_desc()}, residual);
    plan->bias = pd.bias_desc();
    return finish(std::move(plan));
  }
  const dnnl::convolution_forward::primitive_desc hint(eng, prop, algo, xa, wa, ya, st, dil, pl,
                                                       pr);
  if (dir == ConvDir::backward_input) {
    dnnl::convolution_backward_data::primitive_desc pd(eng, algo, xa, wa, ya, st, dil, pl, pr,
                                                       hint, user_scratch());
    plan->conv = dnnl::convolution_backward_data(pd);
    plan->need(pd.scratchpad_desc());
    plan->set_ports(eng, {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, {yp, wp, xp},
                    {pd.diff_dst_desc(), pd.weights_desc(), pd.diff_src_desc()});
  } else {
    dnnl::convolution_backward_weights::primitive_desc pd(eng, algo, xa, wa, ya, st, dil, pl, pr,
                                                          hint, user_scratch());
    plan->conv = dnnl::convolution_backward_weights(pd);
    plan->need(pd.scratchpad_desc());
    plan->set_ports(eng, {DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS}, {yp, xp, wp},
                    {pd.diff_dst_desc(), pd.src_desc(), pd.diff_weights_desc()});
  }
  return finish(std::move(plan));
}

std::shared_ptr<Plan> get_plan(ConvDir dir, const ConvShape& p, bool has_bias, bool nhwc,
                               const int64_t* wst, int act, bool residual) {
  static std::mutex mu;
  static auto& cache = *new std::map<Key, std::shared_ptr<Plan>>();  // never destroyed either
  const Key key{int(dir), has_bias, nhwc, act, residual, p.n,  p.c,  p.h,    p.w,
                p.k,      p.r,      p.s,  p.oh, p.ow,     p.sh, p.sw, p.ph, p.pw,   p.dh,
                p.dw,     p.g,      wst[0], wst[1], wst[2], wst[3]};
  static size_t bytes = 0;  // held by the cached plans' blocked buffers
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<Plan> plan = make_plan(dir, p, has_bias, nhwc, wst, act, residual);
  size_t size = size_t(plan->scratch_size);
  for (const Port& port : plan->ports) size += port.buf ? port.buf.get_desc().get_size() : 0;
  // bounded in count and memory; a plan still running elsewhere lives on in its shared_ptr
  if (cache.size() >= 256 || bytes + size > (size_t(1) << 30)) cache.clear(), bytes = 0;
  cache.emplace(key, plan);
  bytes += size;
  return plan;
}

}  // namespace

void onednn_conv(ConvDir dir, const ConvShape& p, bool nhwc, const int64_t* wst, const float* in0,
                 const float* in1, const float* bias, float* out, int act, bool residual) {
  std::shared_ptr<Plan> plan = get_plan(dir, p, bias != nullptr, nhwc, wst, act, residual);
  std::lock_guard<std::mutex> lock(plan->mu);
  dnnl::stream s(cpu_engine());
  std::unordered_map<int, memory> args;
  float* data[3] = {const_cast<float*>(in0), const_cast<float*>(in1), out};
  memory user[3];
  for (int i = 0; i < 3; i++) {
    Port& port = plan->ports[i];
    user[i] = memory(port.user, cpu_engine(), data[i]);
    args[port.arg] = port.buf ? port.buf : user[i];
    if (i < 2 && port.buf)
      port.reorder.execute(s, {{DNNL_ARG_FROM, user[i]}, {DNNL_ARG_TO, port.buf},
                               {DNNL_ARG_SCRATCHPAD, plan->scratch}});
  }
  if (bias) args[DNNL_ARG_BIAS] = memory(plan->bias, cpu_engine(), const_cast<float*>(bias));
  if (residual && plan->ports[2].buf)
    plan->ports[2].prefill.execute(s, {{DNNL_ARG_FROM, user[2]}, {DNNL_ARG_TO, plan->ports[2].buf},
                                       {DNNL_ARG_SCRATCHPAD, plan->scratch}});
  args[DNNL_ARG_SCRATCHPAD] = plan->scratch;
  plan->conv.execute(s, args);
  const Port& dst = plan->ports[2];
  if (dst.buf)
    dst.reorder.execute(s, {{DNNL_ARG_FROM, dst.buf}, {DNNL_ARG_TO, user[2]},
                            {DNNL_ARG_SCRATCHPAD, plan->scratch}});
  s.wait();
}

}  // namespace ud_dense
