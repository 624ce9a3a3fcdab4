// window.cc — TF CPU's window checks and padding arithmetic, with its error codes, so the device
// refuses what TF CPU refuses and never ignores a batch or depth entry.
#include "window.h"

#include <algorithm>

namespace udtf {

std::string list_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool check_padding(Call& c, int cd) {
  const std::vector<int64_t>& p = c.k->explicit_pads;
  if (c.k->padding != "EXPLICIT")
    return p.empty() || c.fail(TF_INVALID_ARGUMENT, "explicit_paddings attribute must be empty "
                                                    "if the padding attribute is not EXPLICIT");
  if (p.size() != 8)
    return c.fail(TF_INVALID_ARGUMENT, "explicit_paddings attribute must contain 8 values, but "
                                       "got: " + std::to_string(p.size()));
  for (int64_t v : p)
    if (v < 0) return c.fail(TF_INVALID_ARGUMENT, "All elements of explicit_paddings must be "
                                                  "nonnegative, got " + std::to_string(v));
  if (p[0] || p[1] || p[2 * cd] || p[2 * cd + 1])
    return c.fail(TF_INVALID_ARGUMENT, "Nonzero explicit padding in the batch or depth "
                                       "dimensions is not supported");
  return true;
}

bool expect_shape(Call& c, const char* what, const Desc& d, const std::vector<int64_t>& want) {
  std::vector<int64_t> got(d.shape, d.shape + d.t.ndim);
  return got == want || c.fail(TF_INVALID_ARGUMENT, std::string("Expected ") + what +
                                                        " shape to be " + list_str(want) +
                                                        ", but got " + list_str(got));
}

bool window(Call& c, const int64_t* in, const int64_t* kernel, Window* w) {
  const Kern* k = c.k;
  int h = k->nchw ? 2 : 1;
  for (int i = 0; i < 2; i++) {
    w->stride[i] = k->strides.size() == 4 ? k->strides[h + i] : 1;
    w->dilation[i] = k->dilations.size() == 4 ? k->dilations[h + i] : 1;
    int64_t ext = (kernel[i] - 1) * w->dilation[i] + 1, size = in[2 + i];
    if (w->stride[i] < 1) return c.fail(TF_INVALID_ARGUMENT, "strides must be positive");
    w->before[i] = w->after[i] = 0;
    if (k->padding == "SAME") {
      int64_t out = (size + w->stride[i] - 1) / w->stride[i];
      int64_t total = std::max<int64_t>((out - 1) * w->stride[i] + ext - size, 0);
      w->before[i] = total / 2, w->after[i] = total - total / 2;
    } else if (k->padding == "EXPLICIT" && k->explicit_pads.size() == 8) {
      w->before[i] = k->explicit_pads[2 * (h + i)], w->after[i] = k->explicit_pads[2 * (h + i) + 1];
    }
    if (size + w->before[i] + w->after[i] < ext)
      return c.fail(TF_INVALID_ARGUMENT, "window larger than the padded input");
    w->out[i] = (size + w->before[i] + w->after[i] - ext) / w->stride[i] + 1;
  }
  return true;
}

}  // namespace udtf
