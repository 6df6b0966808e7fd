// Reference L2 normalisation: the norm in float64, clamped below by eps as ggml_l2_norm does.
#include "kernels/ref/l2_norm.h"

#include <algorithm>
#include <cmath>

namespace rwd::kernels::ref {

void l2_norm(const float* x, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t row = 0; row < n_rows; ++row) {
    double sum_squares = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[row * n + i]) * x[row * n + i];
    const double norm = std::max(std::sqrt(sum_squares), static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i) y[row * n + i] = static_cast<float>(x[row * n + i] / norm);
  }
}

}  // namespace rwd::kernels::ref
