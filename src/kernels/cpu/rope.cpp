// RoPE: one portable path. Per call, each pair's frequency freq_scale * freq_base^(-2i/n_rot) is computed once
// in float64; per token, its angles pos * freq and their cos/sin in float64, rounded to float and applied to
// every head. Rotating a pair is 4 multiplies and 2 adds in float, which the compiler vectorises well enough;
// the op is too small next to the matmuls to earn an AVX2 twin. No float recurrence over i, so large
// positions keep accurate angles.
#include "kernels/cpu/rope.h"

#include <cmath>

#include "base/check.h"

namespace rwd::kernels::cpu {
namespace {

constexpr int64_t kMaxPairs = 512;

}  // namespace

void rope(float* x, int64_t n_tokens, const int32_t* positions, const RopeParams& params) {
  REWIND_CHECK(params.n_rot >= 0 && params.n_rot % 2 == 0 && params.n_rot <= params.head_dim,
               "n_rot {} must be even and <= head_dim {}", params.n_rot, params.head_dim);
  const int64_t n_pairs = params.n_rot / 2;
  REWIND_CHECK(n_pairs <= kMaxPairs, "n_rot {} above the supported {}", params.n_rot, 2 * kMaxPairs);
  double freq[kMaxPairs];
  for (int64_t i = 0; i < n_pairs; ++i) {
    freq[i] = static_cast<double>(params.freq_scale) *
              std::pow(static_cast<double>(params.freq_base),
                       -2.0 * static_cast<double>(i) / static_cast<double>(params.n_rot));
  }
  // In neox mode pair i is (i, i + n_pairs); in normal mode (2i, 2i + 1).
  const int64_t first_stride = params.mode == RopeMode::normal ? 2 : 1;
  const int64_t second_offset = params.mode == RopeMode::normal ? 1 : n_pairs;
  float cos_theta[kMaxPairs];
  float sin_theta[kMaxPairs];
  for (int64_t t = 0; t < n_tokens; ++t) {
    const double pos = static_cast<double>(positions[t]);
    for (int64_t i = 0; i < n_pairs; ++i) {
      const double theta = pos * freq[i];
      cos_theta[i] = static_cast<float>(std::cos(theta));
      sin_theta[i] = static_cast<float>(std::sin(theta));
    }
    for (int64_t h = 0; h < params.n_head; ++h) {
      float* head = x + (t * params.n_head + h) * params.head_dim;
      for (int64_t i = 0; i < n_pairs; ++i) {
        float* first = head + i * first_stride;
        float* second = first + second_offset;
        const float x0 = *first;
        const float x1 = *second;
        *first = x0 * cos_theta[i] - x1 * sin_theta[i];
        *second = x0 * sin_theta[i] + x1 * cos_theta[i];
      }
    }
  }
}

}  // namespace rwd::kernels::cpu
