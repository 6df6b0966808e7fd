// The VNNI kernel table (vec_dot_vnni_impl.h) with vpdpbusd / vpdpwssd spelled in AVX2: the same int32 results
// (exact products, wrapping sums), several instructions each. It exists so that the VNNI kernels' logic is
// tested bit for bit against the AVX2 table on machines without VNNI; it is slower than the AVX2 table and is
// chosen only by REWIND_ISA=vnni-emulated. Compiled with the AVX2 flags.
#include <immintrin.h>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu::vnni {
namespace {

// Bytes 0 and 2 of each 16-bit lane (zero- or sign-extended) meet in one madd, bytes 1 and 3 in another: each
// int32 lane gets u0 s0 + u2 s2 and u1 s1 + u3 s3, exact (operands 0..255 and -128..127 as int16; the products
// and their pair sums fit int32).
inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
  const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF));
  const __m256i u_odd = _mm256_srli_epi16(u, 8);
  const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8);
  const __m256i s_odd = _mm256_srai_epi16(s, 8);
  const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd));
  return _mm256_add_epi32(acc, sum);
}
// madd wraps its one overflowing case (two products of -32768 * -32768) to the same int32 as vpdpwssd.
inline __attribute__((always_inline)) __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

#include "kernels/cpu/vec_dot_vnni_impl.h"

namespace rwd::kernels::cpu::vnni_emulated {

VecDotKernel vec_dot_kernel(tensor::DType weight_type) { return vnni::kernel_table(weight_type); }

}  // namespace rwd::kernels::cpu::vnni_emulated
