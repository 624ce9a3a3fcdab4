// fused.cpp — gemm_bias_act (tier 4): out = act(alpha * a @ b + bias + residual) in one pass,
// the epilogue applied to each output tile as soon as the core's GEMM has written it.
// (conv2d_bias_act is conv2d's own loops with the same epilogue: conv.cpp, conv_nhwc.cpp.)
#include "epilogue.h"
#include "strided.h"

namespace aurora {

namespace {

template <class T> struct GemmBiasAct {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_GEMM_BIAS_ACT);
    const UD_Tensor &A = ck.in(UD_IN_GEMM_BIAS_ACT_A), &B = ck.in(UD_IN_GEMM_BIAS_ACT_B), &O = ck.out(0);
    if (!ck.signature() || !ck.dtypes(ud_of<T>()) || !ck.ndim(A, "a", 2, 2) || !ck.ndim(B, "b", 2, 2) ||
        !ck.ndim(O, "out", 2, 2) || !ck.dim(B, "b", 0, A.shape[1]) || !ck.dim(O, "out", 0, A.shape[0]) ||
        !ck.dim(O, "out", 1, B.shape[1]))
      return ck.take();
    int act = UD_ACT_NONE;
    if (UD_Error* e = ud_kit_check_epilogue(UD_OP_GEMM_BIAS_ACT, a, &act)) return e;
    for (const UD_Tensor* t : {&A, &B})
      if (t->shape[0] > kBlasMax || t->shape[1] > kBlasMax)
        return ud_kit_error(UD_ERR_UNSUPPORTED, "gemm_bias_act: matrix dims above 2^31-1");
    const int64_t act64 = act;
    return launch(a, make_call(a, UD_OP_GEMM_BIAS_ACT, body, pack(act64)));
  }
  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const Tensor &A = c.in[UD_IN_GEMM_BIAS_ACT_A], &B = c.in[UD_IN_GEMM_BIAS_ACT_B],
                 &R = c.in[UD_IN_GEMM_BIAS_ACT_RESIDUAL];
    Tensor& O = c.out[0];
    const int64_t m = O.shape[0], n = O.shape[1], kk = A.shape[1], act = unpack<int64_t>(c);
    if (O.numel() == 0) return VESIM_SUCCESS;
    const T alpha = T(c.attrs[UD_ATTR_GEMM_BIAS_ACT_ALPHA].f);
    const T* bias;
    if (VESIMresult r = dense_in(k, c.in[UD_IN_GEMM_BIAS_ACT_BIAS], &bias)) return r;
    // tiles of whole rows (or columns, when there are more), at least one per core, small
    // enough that the epilogue finds its tile in cache
    const bool rows = m >= n;
    const int64_t cores = vesimDevCores(k), ext = rows ? m : n;
    const int64_t tile = std::max<int64_t>(1, std::min((ext + cores - 1) / cores, rows ? int64_t(128) : int64_t(512)));
    const int64_t tm = rows ? tile : m, tn = rows ? n : tile;
    const uint64_t per = gemm_scratch_bytes(tm, tn, kk, sizeof(T)) / sizeof(T) + 1;
    T* scratch = static_cast<T*>(vesimDevScratch(k, cores * per * sizeof(T)));
    if (!scratch) return VESIM_ERROR_OUT_OF_MEMORY;
    const T* ap = A.ptr<const T>();
    const T* bp = B.ptr<const T>();
    const T* rp = R.ptr<const T>();
    T* op = O.ptr<T>();
    const int64_t *as = A.strides, *bs = B.strides, *os = O.strides, *rs = R.strides;
    return parallel_chunks(k, (ext + tile - 1) / tile, 1, [&](int64_t b, int64_t e, int chunk) {
      for (int64_t t = b; t < e; t++) {
        const int64_t i0 = rows ? t * tile : 0, j0 = rows ? 0 : t * tile;
        const int64_t mi = rows ? std::min(tile, m - i0) : m, nj = rows ? n : std::min(tile, n - j0);
        Mat<T> out{op + i0 * os[0] + j0 * os[1], mi, nj, os[0], os[1]};
        gemm<T>(k, {ap ? ap + i0 * as[0] : ap, mi, kk, as[0], as[1]}, {bp ? bp + j0 * bs[1] : bp, kk, nj, bs[0], bs[1]},
                out, alpha, T(0), scratch + chunk * per, true);
        epilogue<T>(act, out, {rp ? rp + i0 * rs[0] + j0 * rs[1] : nullptr, mi, nj, rp ? rs[0] : 0, rp ? rs[1] : 0},
                    nullptr, bias ? bias + j0 : nullptr);
      }
    });
  }
};

const RegisterTypes<GemmBiasAct, float, double> reg_gemm_fused(UD_OP_GEMM_BIAS_ACT);

}  // namespace

}  // namespace aurora
