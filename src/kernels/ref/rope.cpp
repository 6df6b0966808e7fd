// Reference RoPE: every angle computed directly from its definition in float64, every pair rotated in float64.
#include "kernels/ref/rope.h"

#include <cmath>

#include "base/check.h"

namespace rwd::kernels::ref {

void rope(float* x, int64_t n_tokens, const int32_t* positions, const RopeParams& params) {
  REWIND_CHECK(params.n_rot % 2 == 0 && params.n_rot <= params.head_dim, "n_rot {} must be even and <= head_dim {}",
               params.n_rot, params.head_dim);
  const int64_t n_pairs = params.n_rot / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < params.n_head; ++h) {
      float* head = x + (t * params.n_head + h) * params.head_dim;
      for (int64_t i = 0; i < n_pairs; ++i) {
        const double theta = static_cast<double>(positions[t]) * static_cast<double>(params.freq_scale) *
                             std::pow(static_cast<double>(params.freq_base), -2.0 * static_cast<double>(i) /
                                                                                 static_cast<double>(params.n_rot));
        const int64_t i0 = params.mode == RopeMode::normal ? 2 * i : i;
        const int64_t i1 = params.mode == RopeMode::normal ? 2 * i + 1 : i + n_pairs;
        const double x0 = head[i0];
        const double x1 = head[i1];
        head[i0] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
        head[i1] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
}

}  // namespace rwd::kernels::ref
