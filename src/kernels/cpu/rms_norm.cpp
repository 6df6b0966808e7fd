// RMSNorm dispatch and its portable path. Both paths take the mean square in float64 and round the scale
// 1/sqrt(mean + eps) once to float, then compute y = (x * scale) * weight in float, as the reference rounds.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_kernel_variants.h"

namespace rwd::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  if (has_avx2_fma()) {
    detail::rms_norm_avx2(x, weight, y, n_rows, n, eps);
  } else {
    detail::rms_norm_scalar(x, weight, y, n_rows, n, eps);
  }
}

namespace detail {

void rms_norm_scalar(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    float* y_row = y + row * n;
    // Four partial sums break the add latency chain; their order is fixed, so results are reproducible.
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int lane = 0; lane < 4; ++lane) partial[lane] += static_cast<double>(x_row[i + lane]) * x_row[i + lane];
    }
    double sum_squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const float scale =
        static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps)));
    if (weight != nullptr) {
      for (int64_t j = 0; j < n; ++j) y_row[j] = (x_row[j] * scale) * weight[j];
    } else {
      for (int64_t j = 0; j < n; ++j) y_row[j] = x_row[j] * scale;
    }
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
