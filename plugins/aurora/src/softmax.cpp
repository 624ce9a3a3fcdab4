// softmax.cpp — softmax and log-softmax along one axis, and their gradients.
//
// The tensor is viewed as [outer, len, inner] around the axis; every (outer, inner) line is
// independent, and lines are spread over the cores. Sums run in double.
#include "strided.h"

namespace aurora {

namespace {

enum Kind { kSoftmax, kLogSoftmax, kSoftmaxBackward, kLogSoftmaxBackward };
const int kOps[] = {UD_OP_SOFTMAX, UD_OP_LOG_SOFTMAX, UD_OP_SOFTMAX_BACKWARD, UD_OP_LOG_SOFTMAX_BACKWARD};
// one body: input 0 is x (grad_y backward), input 1 y, attribute 0 the axis, for all four
constexpr int kAxis = UD_ATTR_SOFTMAX_AXIS;
static_assert(UD_ATTR_LOG_SOFTMAX_AXIS == kAxis && UD_ATTR_SOFTMAX_BACKWARD_AXIS == kAxis &&
              UD_ATTR_LOG_SOFTMAX_BACKWARD_AXIS == kAxis && UD_IN_LOG_SOFTMAX_BACKWARD_Y == UD_IN_SOFTMAX_BACKWARD_Y, "softmax");

template <class T, int K> struct Softmax {
  static constexpr bool kBackward = K >= kSoftmaxBackward;
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, kOps[K]);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) ||
        !ck.same_shape(ck.out(0), "output", ck.in(0), "input 0") ||
        (kBackward && !ck.same_shape(ck.in(UD_IN_SOFTMAX_BACKWARD_Y), "y", ck.in(0), "grad_y")))
      return ck.take();
    int64_t nd = std::max(ck.in(0).ndim, 1), axis = ud_kit_attr_int(a, kAxis);
    if (axis < -nd || axis >= nd)
      return ud_kit_error(UD_ERR_INVALID_ARGUMENT, "%s: attribute 'axis' = %lld, expected in "
                          "[%lld, %lld)", ck.op(), (long long)axis, (long long)-nd, (long long)nd);
    return launch(a, make_call(a, kOps[K], body, pack(int64_t((axis + nd) % nd))));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor& t = c.in[0];
    int64_t axis = c.iparams[0], outer = 1, len = 1, inner = 1;
    for (int d = 0; d < t.ndim; d++) (d < axis ? outer : d == axis ? len : inner) *= t.shape[d];
    const T *a, *b = nullptr;
    T* y;
    if (VESIMresult r = dense_in(k, c.in[0], &a)) return r;
    if (kBackward)
      if (VESIMresult r = dense_in(k, c.in[UD_IN_SOFTMAX_BACKWARD_Y], &b)) return r;
    if (VESIMresult r = dense_out(k, c.out[0], &y, false)) return r;
    VESIMresult r = parallel(k, outer * inner, std::max<int64_t>(1, kGrain / std::max<int64_t>(len, 1)),
                             [&](int64_t lb, int64_t le) {
      for (int64_t line = lb; line < le; line++) {
        int64_t base = line / inner * len * inner + line % inner;
        const T* x = a + base;
        T* o = y + base;
        if (K == kSoftmax || K == kLogSoftmax) {
          double mx = -INFINITY;
          for (int64_t i = 0; i < len; i++) mx = std::max(mx, double(x[i * inner]));
          double sum = 0;
          for (int64_t i = 0; i < len; i++) sum += std::exp(double(x[i * inner]) - mx);
          double ls = std::log(sum);
          for (int64_t i = 0; i < len; i++) {
            double v = double(x[i * inner]) - mx;
            o[i * inner] = T(K == kSoftmax ? std::exp(v - ls) : v - ls);
          }
        } else {  // a = grad_y, b = y
          const T* yy = b + base;
          double s = 0;
          for (int64_t i = 0; i < len; i++)
            s += K == kSoftmaxBackward ? double(x[i * inner]) * double(yy[i * inner]) : double(x[i * inner]);
          for (int64_t i = 0; i < len; i++) {
            double g = x[i * inner], v = yy[i * inner];
            o[i * inner] = T(K == kSoftmaxBackward ? v * (g - s) : g - std::exp(v) * s);
          }
        }
      }
    });
    return r ? r : store(k, c.out[0], y);
  }
};

template <class T> using SoftmaxK = Softmax<T, kSoftmax>;
template <class T> using LogSoftmaxK = Softmax<T, kLogSoftmax>;
template <class T> using SoftmaxBackK = Softmax<T, kSoftmaxBackward>;
template <class T> using LogSoftmaxBackK = Softmax<T, kLogSoftmaxBackward>;

const RegisterTypes<SoftmaxK, float, double> reg_sm(UD_OP_SOFTMAX);
const RegisterTypes<LogSoftmaxK, float, double> reg_lsm(UD_OP_LOG_SOFTMAX);
const RegisterTypes<SoftmaxBackK, float, double> reg_smb(UD_OP_SOFTMAX_BACKWARD);
const RegisterTypes<LogSoftmaxBackK, float, double> reg_lsmb(UD_OP_LOG_SOFTMAX_BACKWARD);

}  // namespace

}  // namespace aurora
