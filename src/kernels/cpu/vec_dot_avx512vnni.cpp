// The VNNI kernel table (vec_dot_vnni_impl.h) with the EVEX vpdpbusd / vpdpwssd of AVX-512 VNNI on 256-bit
// registers. This file alone is compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (on top of the AVX2
// flags); dispatch.cpp calls it only after checking the CPU for all four.
#include <immintrin.h>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu::vnni {
namespace {

inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}
inline __attribute__((always_inline)) __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_epi32(acc, a, b);
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

#include "kernels/cpu/vec_dot_vnni_impl.h"

namespace rwd::kernels::cpu::avx512vnni {

VecDotKernel vec_dot_kernel(tensor::DType weight_type) { return vnni::kernel_table(weight_type); }

}  // namespace rwd::kernels::cpu::avx512vnni
