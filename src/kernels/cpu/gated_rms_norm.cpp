// Gated RMSNorm dispatch and its portable path: the mean square in float64 (four fixed partial sums), the
// scale 1/sqrt(mean + eps) rounded once to float, then y = ((x * scale) * weight) * act(z) in float.
#include "kernels/cpu/gated_rms_norm.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/recurrent_kernel_variants.h"

namespace rwd::kernels::cpu {

void gated_rms_norm(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                    float eps, GateActivation activation) {
  if (has_avx2_fma()) {
    detail::gated_rms_norm_avx2(x, z, weight, y, n_rows, n, eps, activation);
  } else {
    detail::gated_rms_norm_scalar(x, z, weight, y, n_rows, n, eps, activation);
  }
}

namespace detail {

void gated_rms_norm_scalar(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                           float eps, GateActivation activation) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    const float* z_row = z + row * n;
    float* y_row = y + row * n;
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int lane = 0; lane < 4; ++lane) partial[lane] += static_cast<double>(x_row[i + lane]) * x_row[i + lane];
    }
    double sum_squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const float scale =
        static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps)));
    for (int64_t j = 0; j < n; ++j) {
      const float sigmoid = 1.0f / (1.0f + std::exp(-z_row[j]));
      const float gate = activation == GateActivation::silu ? z_row[j] * sigmoid : sigmoid;
      y_row[j] = ((x_row[j] * scale) * weight[j]) * gate;
    }
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
