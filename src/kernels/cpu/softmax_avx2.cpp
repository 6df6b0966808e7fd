// Softmax, AVX2 path: vector max, the 8-lane exp of vector_math_avx2.h (also for the tail, through a padded
// block, so every element goes through the same exp), sum in float64 lanes.
#include <immintrin.h>

#include <limits>

#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"

namespace rwd::kernels::cpu::detail {

void softmax_avx2(float* x, int64_t n) {
  const int64_t n_full = n - n % 8;
  __m256 max8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n_full; i += 8) max8 = _mm256_max_ps(max8, _mm256_loadu_ps(x + i));
  float max_value = vmath::reduce_max(max8);
  for (int64_t i = n_full; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;

  const __m256 shift = _mm256_set1_ps(max_value);
  __m256d sum_lo = _mm256_setzero_pd();
  __m256d sum_hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < n_full; i += 8) {
    const __m256 e = vmath::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift));
    _mm256_storeu_ps(x + i, e);
    vmath::accumulate_double(e, sum_lo, sum_hi);
  }
  if (n_full < n) {
    // Padding with -inf gives exp = 0, which leaves the sum unchanged.
    alignas(32) float tail[8];
    for (int lane = 0; lane < 8; ++lane) {
      tail[lane] = n_full + lane < n ? x[n_full + lane] : -std::numeric_limits<float>::infinity();
    }
    const __m256 e = vmath::exp(_mm256_sub_ps(_mm256_load_ps(tail), shift));
    _mm256_store_ps(tail, e);
    vmath::accumulate_double(e, sum_lo, sum_hi);
    for (int64_t i = n_full; i < n; ++i) x[i] = tail[i - n_full];
  }
  const double sum = vmath::reduce_add(_mm256_add_pd(sum_lo, sum_hi));
  const float inv_sum = static_cast<float>(1.0 / sum);
  const __m256 inv8 = _mm256_set1_ps(inv_sum);
  for (int64_t i = 0; i < n_full; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv8));
  for (int64_t i = n_full; i < n; ++i) x[i] *= inv_sum;
}

}  // namespace rwd::kernels::cpu::detail
