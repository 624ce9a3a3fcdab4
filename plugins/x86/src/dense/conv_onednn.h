// conv_onednn.h — conv2d through oneDNN (x86 only; the dispatcher compiles without it when
// UD_DENSE_ONEDNN is not defined).
#pragma once

#include "conv_algos.h"

namespace ud_dense {

// Buffers as for ConvAlgo: forward (x, w, bias|null) -> y; backward_input (gy, w) -> gx;
// backward_weight (gy, x) -> gw; activations dense NCHW, or dense NHWC when nhwc; the weight (or
// grad_w) with element strides wst[4] of its [K, C/g, R, S] shape. float32 only. Throws
// dnnl::error on failure.
void onednn_conv(ConvDir dir, const ConvShape& p, bool nhwc, const int64_t* wst, const float* in0,
                 const float* in1, const float* bias, float* out);

}  // namespace ud_dense
