// Chooses the kernel table once per process: AVX2 (with FMA and F16C) where the CPU has it, scalar otherwise.
// REWIND_ISA=scalar forces the scalar kernels (tests, benchmarks, bisecting a numeric difference);
// REWIND_ISA=avx2 asks for AVX2 and falls back with a warning where the CPU lacks it.
#include <cstdlib>
#include <string_view>

#include "base/log.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_impl.h"

namespace rwd::kernels::cpu {
namespace {

bool choose_avx2() {
  const char* env = std::getenv("REWIND_ISA");
  const std::string_view requested = env != nullptr ? env : "";
  if (requested == "scalar") return false;
  if (requested == "avx2" && !avx2_supported()) {
    log_warn("REWIND_ISA=avx2 but this CPU lacks AVX2/FMA/F16C; using scalar kernels");
    return false;
  }
  if (!requested.empty() && requested != "avx2") {
    log_warn("REWIND_ISA={} is not one of scalar, avx2; choosing by CPU features", requested);
  }
  return avx2_supported();
}

// Decided on first use and constant afterwards.
bool use_avx2() {
  static const bool chosen = choose_avx2();
  return chosen;
}

}  // namespace

VecDotKernel vec_dot_kernel(tensor::DType weight_type) {
  return use_avx2() ? avx2::vec_dot_kernel(weight_type) : scalar::vec_dot_kernel(weight_type);
}

bool avx2_supported() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

VecDotFn vec_dot_fn(tensor::DType weight_type) { return vec_dot_kernel(weight_type).one; }

QuantizeRowFn quantize_row_fn(tensor::DType activation_type) {
  return use_avx2() ? avx2::quantize_row_fn(activation_type) : scalar::quantize_row_fn(activation_type);
}

const char* isa_name() { return use_avx2() ? "avx2" : "scalar"; }

}  // namespace rwd::kernels::cpu
