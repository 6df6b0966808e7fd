// Reference gated RMSNorm: mean square and gate in float64, one rounding per output.
#include "kernels/ref/gated_rms_norm.h"

#include <cmath>

namespace rwd::kernels::ref {

void gated_rms_norm(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                    float eps, GateActivation activation) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    const float* z_row = z + row * n;
    double sum_squares = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const double inv_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i) {
      const double zi = z_row[i];
      const double sigmoid = 1.0 / (1.0 + std::exp(-zi));
      const double gate = activation == GateActivation::silu ? zi * sigmoid : sigmoid;
      y[row * n + i] = static_cast<float>(static_cast<double>(x_row[i]) * inv_rms * weight[i] * gate);
    }
  }
}

}  // namespace rwd::kernels::ref
