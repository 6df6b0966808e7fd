#include "tensor/quant/quant_fit.h"

#include <algorithm>
#include <limits>

namespace rwd::tensor::quant {
namespace {

// Candidate scales: the range mapped onto the levels stretched by up to ±1 level, in tenths of a level; each
// candidate only chooses the levels, and least squares then sets the scale for them.
constexpr int kSearchSteps = 10;
constexpr float kSearchStride = 0.1f;

double affine_error(const float* x, int n, int n_max, float scale, float offset) {
  const float inv_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
  double error = 0.0;
  for (int i = 0; i < n; ++i) {
    const int q = round_clamp((x[i] - offset) * inv_scale, 0, n_max);
    const double diff = static_cast<double>(scale) * q + offset - x[i];
    error += diff * diff;
  }
  return error;
}

}  // namespace

float fit_symmetric(const float* x, int n, int n_neg, int8_t* levels) {
  float extreme = 0.0f;
  double sum_x2 = 0.0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(extreme)) extreme = x[i];
    sum_x2 += static_cast<double>(x[i]) * x[i];
  }
  if (extreme == 0.0f || !std::isfinite(extreme)) {
    if (levels != nullptr) std::fill(levels, levels + n, int8_t{0});
    return 0.0f;
  }
  double best_error = std::numeric_limits<double>::infinity();
  float best_scale = extreme / static_cast<float>(-n_neg);
  for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
    // Maps the extreme value to -(n_neg + step/10): the longer, negative side of the levels.
    const float inv_scale = -(static_cast<float>(n_neg) + kSearchStride * static_cast<float>(step)) / extreme;
    double sum_xq = 0.0, sum_qq = 0.0;
    for (int i = 0; i < n; ++i) {
      const int q = round_clamp(x[i] * inv_scale, -n_neg, n_neg - 1);
      sum_xq += static_cast<double>(x[i]) * q;
      sum_qq += static_cast<double>(q) * q;
    }
    if (sum_qq == 0.0) continue;
    // With the levels fixed, the least-squares scale is sum_xq / sum_qq and leaves this much error.
    const double error = sum_x2 - sum_xq * sum_xq / sum_qq;
    if (error < best_error) {
      best_error = error;
      best_scale = static_cast<float>(sum_xq / sum_qq);
    }
  }
  if (levels != nullptr) {
    const float inv_best = best_scale != 0.0f ? 1.0f / best_scale : 0.0f;
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(round_clamp(x[i] * inv_best, -n_neg, n_neg - 1));
  }
  return best_scale;
}

AffineFit fit_affine(const float* x, int n, int n_max, bool offset_at_most_zero) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (offset_at_most_zero) lo = std::min(lo, 0.0f);
  if (!(hi > lo) || !std::isfinite(hi - lo)) return {0.0f, std::isfinite(lo) ? lo : 0.0f};

  AffineFit best = {(hi - lo) / static_cast<float>(n_max), lo};
  double best_error = affine_error(x, n, n_max, best.scale, best.offset);
  for (int step = -kSearchSteps; step <= kSearchSteps; ++step) {
    const float inv_scale = (static_cast<float>(n_max) + kSearchStride * static_cast<float>(step)) / (hi - lo);
    double sum_q = 0.0, sum_qq = 0.0, sum_x = 0.0, sum_xq = 0.0;
    for (int i = 0; i < n; ++i) {
      const int q = round_clamp((x[i] - lo) * inv_scale, 0, n_max);
      sum_q += q;
      sum_qq += static_cast<double>(q) * q;
      sum_x += x[i];
      sum_xq += static_cast<double>(x[i]) * q;
    }
    // Least squares for x ≈ d q + m with the levels fixed.
    const double det = n * sum_qq - sum_q * sum_q;
    if (det <= 0.0) continue;
    double scale = (n * sum_xq - sum_q * sum_x) / det;
    double offset = (sum_qq * sum_x - sum_q * sum_xq) / det;
    if (offset_at_most_zero && offset > 0.0) {
      offset = 0.0;
      scale = sum_xq / sum_qq;
    }
    if (!(scale > 0.0)) continue;
    const AffineFit candidate = {static_cast<float>(scale), static_cast<float>(offset)};
    const double error = affine_error(x, n, n_max, candidate.scale, candidate.offset);
    if (error < best_error) {
      best_error = error;
      best = candidate;
    }
  }
  return best;
}

}  // namespace rwd::tensor::quant
