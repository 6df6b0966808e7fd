// CPU feature query for the float kernels; the answer is computed once (thread-safe static) and never changes.
// It follows the dot products' choice (dispatch.cpp), so that REWIND_ISA and the CPU decide both alike: every
// set but scalar, the VNNI ones included, runs the float kernels on AVX2.
#include "kernels/cpu/cpu_features.h"

#include "kernels/cpu/vec_dot.h"

namespace rwd::kernels::cpu {

bool has_avx2_fma() {
  static const bool supported = kernel_isa() != KernelIsa::scalar;
  return supported;
}

}  // namespace rwd::kernels::cpu
