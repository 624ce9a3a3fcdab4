// program.cpp — elementwise_program (tier 4): an interpreter of the postfix program that runs
// the way VE code runs, a vector register at a time. The elements go in runs of at most
// VESIM_VL (256) along the innermost dim; each token is one vector loop over the run (push an
// input's run, apply an operator to the top slots of a stack of 256-element slots, pop into a
// register or an output), so the dispatch costs once per token per 256 elements. With a
// reduction, each output's runs are folded into a per-core accumulator (double) instead.
#include <algorithm>
#include <array>

#include "strided.h"

namespace aurora {

namespace {

constexpr int64_t kVL = VESIM_VL;

template <class T> inline T prog_op(int op, T a, T b, T c) {
  if constexpr (std::is_same_v<T, float>) return ud_kit_program_op_f32(op, a, b, c);
  else return ud_kit_program_op_f64(op, a, b, c);
}

// a[j] = op(a[j], b[j], c[j]) over a run: OP a constant, so the operator's switch folds away.
template <class T, int OP> void apply(T* a, const T* b, const T* c, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; j++) a[j] = prog_op<T>(OP, a[j], b[j], c[j]);
}

template <class T> using ApplyFn = void (*)(T*, const T*, const T*, int64_t);
#define UD_APPLY_(ID, NAME, ARITY) &apply<T, UD_PROG_##ID>,
template <class T> constexpr ApplyFn<T> kApply[] = {UD_PROGRAM_OPS(UD_APPLY_)};
#undef UD_APPLY_

struct Instr {
  int32_t kind, arg;
  double value;
};
// the host half's words: reduce, reduced axes, instruction count, deepest stack, then 2 per token
constexpr int kHeader = 4;

// The views the program reads (and, without a reduction, writes) over the common shape,
// collapsed together; element strides.
template <class T> struct Space {
  int nd = 1;
  int64_t shape[kMaxDims] = {1};
  std::vector<std::array<int64_t, kMaxDims>> st;
  std::vector<int64_t> inner;  // each view's innermost stride
  std::vector<T*> base;
};

template <class T> Space<T> make_space(std::vector<Tensor*> ts) {
  Space<T> s;
  std::vector<const int64_t*> strides;
  for (Tensor* t : ts) strides.push_back(t->strides), s.base.push_back(t->ptr<T>());
  s.st.assign(ts.size(), {});
  s.nd = ud_kit_collapse(ts[0]->ndim, ts[0]->shape, int(ts.size()), strides.data(), s.shape,
                         reinterpret_cast<int64_t(*)[kMaxDims]>(s.st.data()));
  if (s.nd == 0) s.nd = 1, s.shape[0] = 1;  // one element: strides 0 (st is zeroed)
  for (auto& st : s.st) s.inner.push_back(st[s.nd - 1]);
  return s;
}

// f(off, n) for the runs of at most kVL elements covering linear elements [b, e) of the space:
// off[v] is view v's element offset of the run's first element.
template <class T, class F> void runs(const Space<T>& s, int64_t b, int64_t e, int64_t* off, F&& f) {
  const int last = s.nd - 1;
  const int64_t inner = s.shape[last];
  for (int64_t i = b; i < e;) {
    const int64_t row = i / inner, col = i % inner, n = std::min(std::min(inner - col, e - i), kVL);
    for (size_t v = 0; v < s.st.size(); v++) off[v] = offset_of(row, last, s.shape, s.st[v].data()) + col * s.st[v][last];
    f(off, n);
    i += n;
  }
}

// Runs the program over one run of n elements; input k's run starts at in[k] with stride
// st[k]; out(k, values) takes output k's run. work: (depth + 2 + registers) slots of kVL.
template <class T, class Out>
void evaluate(const Instr* code, int ni, T* work, int depth, T* const* in, const int64_t* st, int64_t n, Out&& out) {
  T* regs = work + (depth + 2) * kVL;
  int top = 0;
  for (int i = 0; i < ni; i++) {
    const Instr& ins = code[i];
    T* slot = work + top * kVL;
    switch (ins.kind) {
      case UD_KIT_PI_INPUT: {
        const T* p = in[ins.arg];
        const int64_t s = st[ins.arg];
        if (s == 1) std::copy_n(p, n, slot);
        else
#pragma omp simd
          for (int64_t j = 0; j < n; j++) slot[j] = p[j * s];
        top++;
        break;
      }
      case UD_KIT_PI_CONST: std::fill_n(slot, n, T(ins.value)), top++; break;
      case UD_KIT_PI_STORE: top--, std::copy_n(slot - kVL, n, regs + ins.arg * kVL); break;
      case UD_KIT_PI_LOAD: std::copy_n(regs + ins.arg * kVL, n, slot), top++; break;
      case UD_KIT_PI_OUTPUT: top--, out(ins.arg, slot - kVL); break;
      default: {
        const int arity = ud_program_op_arity(ins.arg);
        T* a = slot - arity * kVL;
        kApply<T>[ins.arg](a, a + kVL, a + 2 * kVL, n);
        top -= arity - 1;
      }
    }
  }
}

template <class T> struct Program {
  static UD_Error* run(const UD_KernelArgs* a) {
    Check ck(a, UD_OP_ELEMENTWISE_PROGRAM);
    thread_local UD_KitProgram prog;  // 16 KiB: not on the caller's stack, not allocated per call
    thread_local std::vector<int64_t> words;
    int reduce = 0, reduced = 0;
    if (!ck.signature()) return ck.take();
    if (UD_Error* e = ud_kit_program_check_call(a, &prog, &reduce, &reduced)) return e;
    if (!ck.dtypes(ud_of<T>())) return ck.take();
    words.assign({reduce, reduced, prog.num_instrs, prog.max_stack});
    for (int i = 0; i < prog.num_instrs; i++) {
      int64_t v;
      std::memcpy(&v, &prog.instrs[i].value, sizeof v);
      words.push_back(int64_t(prog.instrs[i].kind) << 32 | uint32_t(prog.instrs[i].arg));
      words.push_back(v);
    }
    return launch(a, make_call(a, UD_OP_ELEMENTWISE_PROGRAM, body, {words.data(), words.size()}));
  }

  static VESIMresult body(VESIMkernel_ctx* k, Call& c) {
    const int64_t* w = c.iparams.data();
    const int reduce = int(w[0]), reduced = int(w[1]), ni = int(w[2]), depth = int(w[3]);
    std::vector<Instr> code(ni);
    for (int i = 0; i < ni; i++) {
      code[i] = {int32_t(w[kHeader + 2 * i] >> 32), int32_t(uint32_t(w[kHeader + 2 * i])), 0.0};
      std::memcpy(&code[i].value, &w[kHeader + 2 * i + 1], sizeof(double));
    }
    const int nin = int(c.in.size());
    const Tensor& x0 = c.in[0];
    const int64_t total = x0.numel(), cores = vesimDevCores(k), slots = (depth + 2 + UD_PROGRAM_MAX_REGISTERS) * kVL;
    std::vector<Tensor*> views;
    for (Tensor& t : c.in) views.push_back(&t);
    if (reduce == UD_RED_NONE)
      for (Tensor& t : c.out) views.push_back(&t);
    T* work = static_cast<T*>(vesimDevScratch(k, uint64_t(cores * slots) * sizeof(T)));
    if (!work) return VESIM_ERROR_OUT_OF_MEMORY;
    if (reduce == UD_RED_NONE) {
      if (total == 0) return VESIM_SUCCESS;
      const Space<T> s = make_space<T>(views);
      return parallel_chunks(k, total, kGrain, [&](int64_t b, int64_t e, int chunk) {
        std::vector<int64_t> off(views.size());
        std::vector<T*> in(nin);
        runs(s, b, e, off.data(), [&](const int64_t* o, int64_t n) {
          for (int i = 0; i < nin; i++) in[i] = s.base[i] + o[i];
          evaluate<T>(code.data(), ni, work + chunk * slots, depth, in.data(), s.inner.data(), n, [&](int kk, const T* v) {
            T* y = s.base[nin + kk] + o[nin + kk];
            const int64_t ys = s.inner[nin + kk];
#pragma omp simd
            for (int64_t j = 0; j < n; j++) y[j * ys] = v[j];
          });
        });
      });
    }
    return reduce_body(k, c, code, reduce, reduced, depth, views, work, slots);
  }

  // outputs[k][o] = reduce over the trailing `reduced` axes (inner elements) of output k's
  // values; a part is a range of outer indices, or of one's inner elements when there are fewer
  // outer indices than cores (partial accumulators, folded at the end)
  static VESIMresult reduce_body(VESIMkernel_ctx* k, Call& c, const std::vector<Instr>& code, int reduce, int reduced,
                                 int depth, std::vector<Tensor*>& views, T* work, int64_t slots) {
    const Tensor& x0 = c.in[0];
    const int nin = int(c.in.size()), nout = int(c.out.size());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < x0.ndim; d++) (d < x0.ndim - reduced ? outer : inner) *= x0.shape[d];
    if (outer == 0) return VESIM_SUCCESS;
    const int64_t cores = vesimDevCores(k), parts = std::max<int64_t>(1, std::min(inner / kVL, cores / outer));
    const bool extreme = reduce == UD_RED_MAX || reduce == UD_RED_MIN;
    const double init = reduce == UD_RED_MAX ? -INFINITY : reduce == UD_RED_MIN ? INFINITY : 0.0;
    auto fold = [&](double acc, double v) {
      return !extreme ? acc + v : (v != v || (reduce == UD_RED_MAX ? v > acc : v < acc)) ? v : acc;
    };
    std::vector<double> part(outer * parts * nout, init);
    const Space<T> s = inner ? make_space<T>(views) : Space<T>{};
    VESIMresult r = parallel_chunks(k, outer * parts, 1, [&](int64_t b, int64_t e, int chunk) {
      std::vector<int64_t> off(views.size());
      std::vector<T*> in(nin);
      for (int64_t i = b; i < e && inner; i++) {
        const int64_t o = i / parts, p = i % parts;
        double* acc = &part[i * nout];
        runs(s, o * inner + p * inner / parts, o * inner + (p + 1) * inner / parts, off.data(), [&](const int64_t* of, int64_t n) {
          for (int v = 0; v < nin; v++) in[v] = s.base[v] + of[v];
          evaluate<T>(code.data(), int(code.size()), work + chunk * slots, depth, in.data(), s.inner.data(), n,
                      [&](int kk, const T* v) {
                        double a = acc[kk];
                        for (int64_t j = 0; j < n; j++) a = fold(a, double(v[j]));
                        acc[kk] = a;
                      });
        });
      }
    });
    for (int kk = 0; kk < nout && !r; kk++) {
      Tensor& y = c.out[kk];
      for (int64_t o = 0; o < outer; o++) {
        double a = init;
        for (int64_t p = 0; p < parts; p++) a = fold(a, part[(o * parts + p) * nout + kk]);
        if (reduce == UD_RED_MEAN) a /= double(inner);
        y.ptr<T>()[offset_of(o, y.ndim, y.shape, y.strides)] = T(a);
      }
    }
    return r;
  }
};

const RegisterTypes<Program, float, double> reg_program(UD_OP_ELEMENTWISE_PROGRAM);

}  // namespace

}  // namespace aurora
