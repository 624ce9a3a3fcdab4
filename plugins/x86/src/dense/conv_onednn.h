// conv_onednn.h — conv2d through oneDNN (x86 only; the dispatcher compiles without it when
// UD_DENSE_ONEDNN is not defined).
#pragma once

#include "conv_algos.h"

namespace ud_dense {

// Buffers as for ConvAlgo: forward (x, w, bias|null) -> y; backward_input (gy, w) -> gx;
// backward_weight (gy, x) -> gw; activations dense NCHW, or dense NHWC when nhwc; the weight (or
// grad_w) with element strides wst[4] of its [K, C/g, R, S] shape. Forward only: conv2d_bias_act's
// epilogue as post-ops, out = act(conv + bias + out) (residual: out holds it on entry; act: a
// UD_ACT_* id, 0 for none). float32 only. Throws dnnl::error on failure.
void onednn_conv(ConvDir dir, const ConvShape& p, bool nhwc, const int64_t* wst, const float* in0,
                 const float* in1, const float* bias, float* out, int act = 0,
                 bool residual = false);

}  // namespace ud_dense
