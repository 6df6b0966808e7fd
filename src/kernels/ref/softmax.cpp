// Reference softmax in float64.
#include "kernels/ref/softmax.h"

#include <cmath>
#include <limits>

namespace rwd::kernels::ref {

void softmax(float* x, int64_t n) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::fmax(max_value, static_cast<double>(x[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_value);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - max_value) / sum);
}

}  // namespace rwd::kernels::ref
