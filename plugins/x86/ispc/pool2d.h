/* pool2d.h — the geometry of one 2-d pooling over one [H, W] plane, shared by C and ISPC. */
#ifndef UD_POOL2D_H_
#define UD_POOL2D_H_
#ifdef ISPC
typedef int64 int64_t;
#else
#include <stdint.h>
#endif

struct UD_Pool2d {
  int64_t h, w, oh, ow;     /* input and output plane extents */
  int64_t kh, kw, sh, sw;   /* window and stride */
  int64_t ph, pw, dh, dw;   /* padding and dilation */
  int64_t count_include_pad, adaptive;
  int64_t xs[2], ys[2], is[2]; /* (h, w) element strides of x (or grad_x), y (or grad_y), indices */
};
#endif
