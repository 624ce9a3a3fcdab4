// conv.h — what conv.cpp (NCHW) and conv_nhwc.cpp (channels-last) share: the geometry of a
// call and the channels-last loops.
#pragma once

#include "epilogue.h"
#include "strided.h"

namespace aurora {

enum Algo : int64_t { kAuto = 0, kDirect = 1, kIm2col = 2, kTiled = 3 };

// The conv geometry, from the host half to the device half; `lay` is the layout it computes in,
// `act` conv2d_bias_act's activation.
struct Geo {
  int64_t n, c, h, w, k, cg, kg, r, s, oh, ow, sh, sw, ph, pw, dh, dw, g, algo, lay, act;
  int64_t rows() const { return cg * r * s; }  // im2col rows per group
  int64_t plane() const { return oh * ow; }
};

// Channels-last, on dense NHWC buffers (x, y, grad_y, grad_x); weights and grad_w in their own
// strides. y = conv(x, w) + bias with the epilogue e; grad_x and grad_w are written whole.
template <class T>
VESIMresult nhwc_conv(VESIMkernel_ctx* k, const Geo& g, const T* x, const Tensor& w, const T* bias,
                      const Epi<T>& e, T* y);
template <class T>
VESIMresult nhwc_grad_x(VESIMkernel_ctx* k, const Geo& g, const T* gy, const Tensor& w, T* gx);
template <class T>
VESIMresult nhwc_grad_w(VESIMkernel_ctx* k, const Geo& g, const T* gy, const T* x, Tensor& gw);

}  // namespace aurora
