// L2 normalisation, AVX2 path: squares summed in float64 lanes (four independent chains), scale applied in float.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"

namespace rwd::kernels::cpu::detail {

void l2_norm_avx2(const float* x, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    float* y_row = y + row * n;
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      for (int half = 0; half < 2; ++half) {
        const __m256 v = _mm256_loadu_ps(x_row + i + 8 * half);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        acc[2 * half] = _mm256_fmadd_pd(lo, lo, acc[2 * half]);
        acc[2 * half + 1] = _mm256_fmadd_pd(hi, hi, acc[2 * half + 1]);
      }
    }
    double sum_squares =
        vmath::reduce_add(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    for (; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const float scale = static_cast<float>(1.0 / std::max(std::sqrt(sum_squares), static_cast<double>(eps)));
    const __m256 scale8 = _mm256_set1_ps(scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y_row + j, _mm256_mul_ps(_mm256_loadu_ps(x_row + j), scale8));
    for (; j < n; ++j) y_row[j] = x_row[j] * scale;
  }
}

}  // namespace rwd::kernels::cpu::detail
