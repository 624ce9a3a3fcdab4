// fallback.cpp — the boxed CPU fallback for every aten op without a device kernel: counted per
// operator (UNIDEV_FALLBACK warns or raises), refusing view ops, checking written arguments as
// torch's kernels would; and autocast's fallthrough.
#include <ATen/native/CPUFallback.h>

#include <atomic>
#include <mutex>

#include "aten.h"

namespace unidev_torch {
namespace {

std::atomic<int> g_mode{0};  // 0: count, 1: warn once per op, 2: raise
std::mutex g_counts_mu;
std::map<std::string, int64_t> g_counts;

const std::string& device_name() {
  static const std::string pu1 = "PrivateUse1";
  return loaded() ? plugin().torch_name : pu1;
}

// A view op's result shares its input's storage; run on the host it would be a copy, and writes
// through it would be lost. Views torch serves on every backend never get here; the others with
// a generic kernel are registered (register.cpp); the rest (sparse, nested) are refused.
bool returns_view(const c10::FunctionSchema& s) {
  for (const auto& r : s.returns())
    if (r.alias_info() && !r.alias_info()->isWrite()) return true;
  return false;
}

// On the host the arguments are separate copies, so the CPU kernel cannot see that an output
// repeats elements or overlaps an input: check what torch's kernels check (TensorIterator's).
void check_written(const c10::FunctionSchema& s, const torch::jit::Stack& stack) {
  size_t n = s.arguments().size(), base = stack.size() - n;
  for (size_t i = 0; i < n; ++i) {
    const auto* alias = s.arguments()[i].alias_info();
    const c10::IValue& w = stack[base + i];
    if (!alias || !alias->isWrite() || !w.isTensor() || !w.toTensor().defined() ||
        w.toTensor().device().type() != kPU1)
      continue;
    const Tensor& out = w.toTensor();
    at::assert_no_internal_overlap(out);
    for (size_t j = 0; j < n; ++j)
      if (j != i && stack[base + j].isTensor() && stack[base + j].toTensor().defined())
        at::assert_no_partial_overlap(out, stack[base + j].toTensor());
  }
}

}  // namespace

int64_t count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> g(g_counts_mu);
  return ++g_counts[op];
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> g(g_counts_mu);
  return g_counts;
}

void reset_fallbacks() {
  std::lock_guard<std::mutex> g(g_counts_mu);
  g_counts.clear();
}

void set_fallback_mode(int mode) { g_mode = mode; }

void note_fallback(const std::string& op) {
  int64_t n = count_fallback(op);
  TORCH_CHECK_NOT_IMPLEMENTED(g_mode != 2, "unidev ", device_name(), ": ", op,
                              " has no device kernel and UNIDEV_FALLBACK=error forbids running "
                              "it on the CPU");
  if (g_mode == 1 && n == 1) TORCH_WARN("unidev ", device_name(), ": ", op, " runs on the CPU (fallback)");
}

void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(!returns_view(op.schema()), "unidev ", device_name(), ": ", full,
                              " is a view op without a device kernel; on the CPU it would "
                              "return a copy and writes through it would be lost");
  check_written(op.schema(), *stack);
  note_fallback(full);
  at::native::cpu_fallback(op, stack);
}

c10::OperatorHandle op_handle(const std::string& aten) {
  auto dot = std::min(aten.find('.'), aten.size());
  std::string overload = dot < aten.size() ? aten.substr(dot + 1) : "";
  return c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + aten.substr(0, dot)).c_str(),
                                                        overload.c_str());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&boxed_fallback>());
}

// torch 2.13 registers no fallthrough for this key, so every op under
// torch.autocast(<device>) would fail; autocast runs ops in the dtypes they are given.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace unidev_torch
