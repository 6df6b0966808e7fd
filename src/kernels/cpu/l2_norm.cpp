// L2 normalisation dispatch and its portable path: squares summed in float64 (four fixed partial sums), the
// scale 1 / max(norm, eps) rounded once to float, y = x * scale.
#include "kernels/cpu/l2_norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/recurrent_kernel_variants.h"

namespace rwd::kernels::cpu {

void l2_norm(const float* x, float* y, int64_t n_rows, int64_t n, float eps) {
  if (has_avx2_fma()) {
    detail::l2_norm_avx2(x, y, n_rows, n, eps);
  } else {
    detail::l2_norm_scalar(x, y, n_rows, n, eps);
  }
}

namespace detail {

void l2_norm_scalar(const float* x, float* y, int64_t n_rows, int64_t n, float eps) {
  for (int64_t row = 0; row < n_rows; ++row) {
    const float* x_row = x + row * n;
    float* y_row = y + row * n;
    double partial[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      for (int lane = 0; lane < 4; ++lane) partial[lane] += static_cast<double>(x_row[i + lane]) * x_row[i + lane];
    }
    double sum_squares = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; i < n; ++i) sum_squares += static_cast<double>(x_row[i]) * x_row[i];
    const float scale = static_cast<float>(1.0 / std::max(std::sqrt(sum_squares), static_cast<double>(eps)));
    for (int64_t j = 0; j < n; ++j) y_row[j] = x_row[j] * scale;
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
