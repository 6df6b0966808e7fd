// The VNNI kernel table (vec_dot_vnni_impl.h) with the VEX vpdpbusd / vpdpwssd of AVX-VNNI (Intel Alder Lake and
// later client cores, which have no AVX-512). This file alone is compiled with -mavxvnni (on top of the AVX2
// flags); dispatch.cpp calls it only after checking the CPU.
#include <immintrin.h>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu::vnni {
namespace {

inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_avx_epi32(acc, u, s);
}
inline __attribute__((always_inline)) __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_avx_epi32(acc, a, b);
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

#include "kernels/cpu/vec_dot_vnni_impl.h"

namespace rwd::kernels::cpu::avxvnni {

VecDotKernel vec_dot_kernel(tensor::DType weight_type) { return vnni::kernel_table(weight_type); }

}  // namespace rwd::kernels::cpu::avxvnni
