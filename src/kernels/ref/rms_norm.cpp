// Reference RMSNorm: one float64 pass for the mean square, then each output rounded once to float.
#include "kernels/ref/rms_norm.h"

#include <cmath>

namespace rwd::kernels::ref {

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    float* y_row = y + row * n;
    double sum_squares = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const double inv_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i) {
      const double w = weight ? static_cast<double>(weight[i]) : 1.0;
      y_row[i] = static_cast<float>(static_cast<double>(x_row[i]) * inv_rms * w);
    }
  }
}

}  // namespace rwd::kernels::ref
