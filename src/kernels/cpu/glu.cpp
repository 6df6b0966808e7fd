// SwiGLU/GeGLU dispatch and the portable path. GELU uses the identity 0.5 x (1 + tanh(y)) = x * sigmoid(2y),
// which needs one exp and keeps full relative accuracy for negative x, where 1 + tanh(y) cancels.
#include "kernels/cpu/glu.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_kernel_variants.h"

namespace rwd::kernels::cpu {

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (has_avx2_fma()) {
    detail::swiglu_avx2(gate, up, out, n);
  } else {
    detail::swiglu_scalar(gate, up, out, n);
  }
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  if (has_avx2_fma()) {
    detail::geglu_avx2(gate, up, out, n);
  } else {
    detail::geglu_scalar(gate, up, out, n);
  }
}

void silu(const float* x, float* out, int64_t n) {
  if (has_avx2_fma()) {
    detail::silu_avx2(x, out, n);
  } else {
    detail::silu_scalar(x, out, n);
  }
}

namespace detail {

void silu_scalar(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void geglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kCubic = 0.044715f;
  constexpr float kTwoSqrtTwoOverPi = 1.5957691216057308f;  // 2 * sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float inner = g + kCubic * (g * g * g);
    out[i] = g / (1.0f + std::exp(-kTwoSqrtTwoOverPi * inner)) * up[i];
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
