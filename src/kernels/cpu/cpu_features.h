// Which instruction-set path the float kernels (rms_norm, rope, softmax, glu, attention) take, decided once per
// process from the CPU and the environment variable REWIND_ISA ("scalar" forces the portable path).
// The quantized dot products make the same choice in dispatch.cpp; this file does not pick their functions.
#pragma once

namespace rwd::kernels::cpu {

// True when the dot products' dispatch (vec_dot.h kernel_isa) picked any set but scalar: the CPU and OS support
// AVX2, FMA and F16C and REWIND_ISA is not "scalar". Computed on first use and cached: changing REWIND_ISA
// afterwards has no effect.
bool has_avx2_fma();

}  // namespace rwd::kernels::cpu
