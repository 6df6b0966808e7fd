// CPU feature query for the float kernels; the answer is computed once (thread-safe static) and never changes.
#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace rwd::kernels::cpu {
namespace {

bool detect_avx2_fma() {
  const char* forced = std::getenv("REWIND_ISA");
  if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return false;
#if defined(__x86_64__) || defined(__i386__)
  // GCC's and clang's checks include the OS having enabled the YMM state (XGETBV), not just CPUID bits.
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

}  // namespace

bool has_avx2_fma() {
  static const bool supported = detect_avx2_fma();
  return supported;
}

}  // namespace rwd::kernels::cpu
