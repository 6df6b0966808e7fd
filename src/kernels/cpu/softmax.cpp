// Softmax dispatch and its portable path: max subtracted, exp in float, sum in float64 in index order, then
// one multiply by the float-rounded reciprocal of the sum.
#include "kernels/cpu/softmax.h"

#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_kernel_variants.h"

namespace rwd::kernels::cpu {

void softmax(float* x, int64_t n) {
  if (has_avx2_fma()) {
    detail::softmax_avx2(x, n);
  } else {
    detail::softmax_scalar(x, n);
  }
}

namespace detail {

void softmax_scalar(float* x, int64_t n) {
  float max_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = x[i] > max_value ? x[i] : max_value;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
