// reduce.cpp — the reduction row kinds: sum/mean (with dtype=), amax/amin, max/min of all,
// argmax/argmin, over any set of dims, computed into a temporary when the output aliases.
#include <ATen/WrapDimUtils.h>

#include <algorithm>

#include "aten.h"

namespace unidev_torch {
namespace {

// Reduction over `dim` (none or empty: all) computing in `t`; false when unsupported.
bool reduce(int op, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, ScalarType t,
            const Tensor& out) {
  UD_KernelFn fn = kernel(op, t);
  if (!fn) return false;
  Tensor x = self.scalar_type() == t ? self : self.to(t);
  int64_t nd = self.dim();
  std::vector<int64_t> axes;
  if (dim.has_value() && nd > 0)
    for (int64_t d : *dim) axes.push_back(at::maybe_wrap_dim(d, nd));
  std::sort(axes.begin(), axes.end());
  TORCH_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), op_name(op),
              ": dim ", *dim, " repeats a dimension");
  at::DimVector shape;
  for (int64_t i = 0; i < nd; ++i) {
    bool r = axes.empty() || std::binary_search(axes.begin(), axes.end(), i);
    if (!r) shape.push_back(self.size(i));
    else if (keepdim) shape.push_back(1);
  }
  at::native::resize_output(out, shape);
  at::assert_no_internal_overlap(out);
  ScalarType ot = (op == UD_OP_ARGMAX || op == UD_OP_ARGMIN) ? at::kLong : t;
  bool temp = out.scalar_type() != ot || shares_storage(out, x);
  Tensor dst = temp ? at::empty(shape, out.options().dtype(ot)) : out;
  if (dst.numel() > 0) {
    UD_Tensor in = desc(x), o = desc(dst);
    launch(fn, op, x.device().index(), &in, 1, &o, 1, Attrs(op).ints(0, axes).b(1, keepdim));
  }
  if (temp) out.copy_(dst);
  return true;
}

template <int E>
Tensor& k_reduce_dtype(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<ScalarType> dtype, Tensor& out) {
  if (dtype) check_dtype(*dtype, out);
  ScalarType t = dtype.value_or(out.scalar_type());
  if (!reduce(ROW_OP, self, dim, keepdim, t, out)) fallback(ROW, self, dim, keepdim, dtype, out);
  return out;
}

template <int E>
Tensor& k_reduce(const Tensor& self, IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to "
              "match, but got ", self.scalar_type(), " for input's dtype and ", out.scalar_type(),
              " for out's dtype.");
  if (!reduce(ROW_OP, self, dim, keepdim, self.scalar_type(), out))
    fallback(ROW, self, dim, keepdim, out);
  return out;
}

template <int E>
Tensor k_reduce_all(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, ROW, "(): Expected reduction dim to be specified for "
              "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  Tensor out = at::empty({}, self.options());
  if (!reduce(ROW_OP, self, std::nullopt, false, self.scalar_type(), out))
    return fallback(ROW, self)[0].toTensor();
  return out;
}

template <int E>
Tensor& k_arg_reduce(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  check_dtype(at::kLong, out);
  std::vector<int64_t> d;
  if (dim) d.push_back(*dim);
  bool ok = (dim || !keepdim) && self.numel() > 0 &&
            reduce(ROW_OP, self, dim ? at::OptionalIntArrayRef(d) : std::nullopt, keepdim,
                   self.scalar_type(), out);
  if (!ok) fallback(ROW, self, dim, keepdim, out);
  return out;
}

}  // namespace

UD_TORCH_REGISTER(UD_TORCH_ROWS_REDUCE)

}  // namespace unidev_torch
