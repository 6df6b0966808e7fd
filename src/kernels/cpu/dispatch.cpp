// Chooses the kernel table once per process: the best set the CPU has, in the order avx512vnni, avxvnni, avx2,
// scalar (the VNNI sets need AVX2, FMA and F16C too). REWIND_ISA=scalar|avx2|avxvnni|avx512vnni|vnni-emulated
// forces one (tests, benchmarks, bisecting a numeric difference) and falls back, with a warning, to the best
// supported set where the CPU lacks it. vnni-emulated is never chosen unless asked for.
#include <cstdlib>
#include <string_view>

#include "base/log.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"

namespace rwd::kernels::cpu {
namespace {

constexpr KernelIsa kAllIsas[] = {KernelIsa::scalar, KernelIsa::avx2, KernelIsa::avxvnni, KernelIsa::avx512vnni,
                                  KernelIsa::vnni_emulated};

KernelIsa best_supported() {
  for (KernelIsa isa : {KernelIsa::avx512vnni, KernelIsa::avxvnni, KernelIsa::avx2}) {
    if (isa_supported(isa)) return isa;
  }
  return KernelIsa::scalar;
}

KernelIsa choose_isa() {
  const char* env = std::getenv("REWIND_ISA");
  const std::string_view requested = env != nullptr ? env : "";
  if (requested.empty()) return best_supported();
  for (KernelIsa isa : kAllIsas) {
    if (requested != isa_name(isa)) continue;
    if (isa_supported(isa)) return isa;
    const KernelIsa fallback = best_supported();
    log_warn("REWIND_ISA={} but this CPU lacks the instructions for it; using {}", requested, isa_name(fallback));
    return fallback;
  }
  log_warn("REWIND_ISA={} is not one of scalar, avx2, avxvnni, avx512vnni, vnni-emulated; choosing by CPU features",
           requested);
  return best_supported();
}

}  // namespace

bool avx2_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

// GCC's and clang's checks include the OS having enabled the register state (XGETBV), not just CPUID bits.
bool isa_supported(KernelIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case KernelIsa::scalar: return true;
    case KernelIsa::avx2:
    case KernelIsa::vnni_emulated: return avx2_supported();
    case KernelIsa::avxvnni: return avx2_supported() && __builtin_cpu_supports("avxvnni");
    case KernelIsa::avx512vnni:
      return avx2_supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

const char* isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::scalar: return "scalar";
    case KernelIsa::avx2: return "avx2";
    case KernelIsa::avxvnni: return "avxvnni";
    case KernelIsa::avx512vnni: return "avx512vnni";
    case KernelIsa::vnni_emulated: return "vnni-emulated";
  }
  return "unknown";
}

// Decided on first use and constant afterwards.
KernelIsa kernel_isa() {
  static const KernelIsa chosen = choose_isa();
  return chosen;
}

const char* isa_name() { return isa_name(kernel_isa()); }

VecDotKernel vec_dot_kernel(KernelIsa isa, tensor::DType weight_type) {
  switch (isa) {
    case KernelIsa::scalar: return scalar::vec_dot_kernel(weight_type);
    case KernelIsa::avx2: return avx2::vec_dot_kernel(weight_type);
    case KernelIsa::avxvnni: return avxvnni::vec_dot_kernel(weight_type);
    case KernelIsa::avx512vnni: return avx512vnni::vec_dot_kernel(weight_type);
    case KernelIsa::vnni_emulated: return vnni_emulated::vec_dot_kernel(weight_type);
  }
  return {};
}

QuantizeRowFn quantize_row_fn(KernelIsa isa, tensor::DType activation_type) {
  return isa == KernelIsa::scalar ? scalar::quantize_row_fn(activation_type) : avx2::quantize_row_fn(activation_type);
}

VecDotKernel vec_dot_kernel(tensor::DType weight_type) { return vec_dot_kernel(kernel_isa(), weight_type); }

VecDotFn vec_dot_fn(tensor::DType weight_type) { return vec_dot_kernel(weight_type).one; }

QuantizeRowFn quantize_row_fn(tensor::DType activation_type) {
  return quantize_row_fn(kernel_isa(), activation_type);
}

}  // namespace rwd::kernels::cpu
