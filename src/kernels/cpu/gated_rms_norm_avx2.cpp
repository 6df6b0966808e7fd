// Gated RMSNorm, AVX2 path: squares summed in float64 lanes, the gate with the 8-lane exp; the last n % 8
// values go through one masked block so every value uses the same exp.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"

namespace rwd::kernels::cpu::detail {
namespace {

double sum_squares(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int half = 0; half < 2; ++half) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * half);
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      acc[2 * half] = _mm256_fmadd_pd(lo, lo, acc[2 * half]);
      acc[2 * half + 1] = _mm256_fmadd_pd(hi, hi, acc[2 * half + 1]);
    }
  }
  double sum = vmath::reduce_add(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

template <GateActivation kActivation>
inline __m256 gated8(__m256 x, __m256 z, __m256 weight, __m256 scale) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sigmoid = _mm256_div_ps(one, _mm256_add_ps(one, vmath::exp(_mm256_sub_ps(_mm256_setzero_ps(), z))));
  const __m256 gate = kActivation == GateActivation::silu ? _mm256_mul_ps(z, sigmoid) : sigmoid;
  return _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(x, scale), weight), gate);
}

template <GateActivation kActivation>
void gated_rows(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t n_full = n & ~int64_t{7};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - (n - n_full)));
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    const float* z_row = z + row * n;
    float* y_row = y + row * n;
    const __m256 scale = _mm256_set1_ps(
        static_cast<float>(1.0 / std::sqrt(sum_squares(x_row, n) / static_cast<double>(n) + static_cast<double>(eps))));
    for (int64_t j = 0; j < n_full; j += 8) {
      _mm256_storeu_ps(y_row + j, gated8<kActivation>(_mm256_loadu_ps(x_row + j), _mm256_loadu_ps(z_row + j),
                                                      _mm256_loadu_ps(weight + j), scale));
    }
    if (n_full < n) {
      const __m256 result = gated8<kActivation>(_mm256_maskload_ps(x_row + n_full, mask),
                                                _mm256_maskload_ps(z_row + n_full, mask),
                                                _mm256_maskload_ps(weight + n_full, mask), scale);
      _mm256_maskstore_ps(y_row + n_full, mask, result);
    }
  }
}

}  // namespace

void gated_rms_norm_avx2(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                         float eps, GateActivation activation) {
  if (activation == GateActivation::silu) {
    gated_rows<GateActivation::silu>(x, z, weight, y, n_rows, n, eps);
  } else {
    gated_rows<GateActivation::sigmoid>(x, z, weight, y, n_rows, n, eps);
  }
}

}  // namespace rwd::kernels::cpu::detail
