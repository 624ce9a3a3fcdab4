// window.h — TF's sliding-window rules shared by conv.cc and pool.cc: padding checks, output
// sizes, and NHWC / HWIO tensors seen as the op set's NCHW / OIHW.
#pragma once

#include "call.h"

namespace udtf {

const int kNhwcAsNchw[4] = {0, 3, 1, 2};  // NHWC tensor viewed as NCHW
const int kHwioAsOihw[4] = {3, 2, 0, 1};  // TF filter [R,S,C,K] viewed as unidev [K,C,R,S]

struct Window {
  int64_t before[2], after[2], stride[2], dilation[2], out[2];
};

std::string list_str(const std::vector<int64_t>& v);
// explicit_paddings against `padding`, as TF CPU checks them; `cd` is the depth dimension.
bool check_padding(Call& c, int cd);
// A tensor's shape (TF layout) against what the op's other arguments imply.
bool expect_shape(Call& c, const char* what, const Desc& d, const std::vector<int64_t>& want);
// TF's padding rules for the spatial dims of an NCHW-ordered shape.
bool window(Call& c, const int64_t* in, const int64_t* kernel, Window* w);
inline bool symmetric(const Window& w) {
  return w.before[0] == w.after[0] && w.before[1] == w.after[1];
}
// A tensor of this kernel's data layout as an NCHW view.
inline Desc nchw(const Kern* k, const Desc& d) { return k->nchw ? d : d.permuted(kNhwcAsNchw); }
inline std::vector<int64_t> layout_dims(const Kern* k, int64_t n, int64_t ch, int64_t h,
                                        int64_t w) {
  return k->nchw ? std::vector<int64_t>{n, ch, h, w} : std::vector<int64_t>{n, h, w, ch};
}
// A device temporary of NCHW shape `s` laid out in this kernel's data format, as an NCHW view:
// temporaries keep the tensors' layout, so the plugin never sees a mixed-layout call.
inline Desc layout_temp(Call& c, TF_DataType dt, const int64_t* s) {
  TF_Tensor* t = c.temp(dt, layout_dims(c.k, s[0], s[1], s[2], s[3]));
  return t ? nchw(c.k, desc(c, t)) : absent();
}

}  // namespace udtf
