// Reference SwiGLU and GeGLU in float64.
#include "kernels/ref/glu.h"

#include <cmath>
#include <numbers>

namespace rwd::kernels::ref {

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// 0.5 x (1 + tanh(y)) equals x * sigmoid(2y); the sigmoid form keeps full relative accuracy for very negative
// x, where 1 + tanh(y) would cancel to nothing even in float64.
double gelu_tanh(double x) {
  const double y = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * y));
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(silu(gate[i]) * static_cast<double>(up[i]));
}

void silu(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(silu(static_cast<double>(x[i])));
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu_tanh(gate[i]) * static_cast<double>(up[i]));
}

}  // namespace rwd::kernels::ref
