#include "spec/policy.h"

#include <algorithm>
#include <cmath>

namespace rwd::spec {
namespace {

// Forget old rounds at this rate, so a slot whose text changes character (prompt echo, then free text)
// re-estimates within ~20 rounds.
constexpr double kDecay = 0.95;
// Speculation must beat plain decoding by this margin to be kept: verify-cost measurements are noisy.
constexpr double kMinGain = 1.03;
// Plain steps before a slot that fell back tries a draft again.
constexpr int kProbeAfter = 32;

}  // namespace

void CostModel::observe(int64_t n_tokens, double seconds) {
  if (n_tokens < 1 || n_tokens > kMaxTokens || !(seconds > 0.0)) return;
  // An exponential average: the machine's speed drifts (other load, frequency), old timings must fade.
  seconds_[n_tokens] = count_[n_tokens] == 0 ? seconds : 0.9 * seconds_[n_tokens] + 0.1 * seconds;
  ++count_[n_tokens];
}

double CostModel::relative_cost(int64_t n_tokens, int64_t base_tokens) const {
  n_tokens = std::clamp<int64_t>(n_tokens, 1, kMaxTokens);
  base_tokens = std::clamp<int64_t>(base_tokens, 1, kMaxTokens);
  if (count_[base_tokens] > 0 && count_[n_tokens] > 0) return seconds_[n_tokens] / seconds_[base_tokens];
  // Least squares t(n) = a + b n over the measured sizes.
  double sum_n = 0.0, sum_t = 0.0, sum_nn = 0.0, sum_nt = 0.0;
  int sizes = 0;
  for (int64_t n = 1; n <= kMaxTokens; ++n) {
    if (count_[n] == 0) continue;
    sum_n += static_cast<double>(n);
    sum_t += seconds_[n];
    sum_nn += static_cast<double>(n * n);
    sum_nt += static_cast<double>(n) * seconds_[n];
    ++sizes;
  }
  const double denominator = sizes * sum_nn - sum_n * sum_n;
  if (sizes >= 2 && denominator > 0.0) {
    const double b = (sizes * sum_nt - sum_n * sum_t) / denominator;
    const double a = (sum_t - b * sum_n) / sizes;
    const double at_n = a + b * static_cast<double>(n_tokens);
    const double at_base = a + b * static_cast<double>(base_tokens);
    if (at_n > 0.0 && at_base > 0.0) return std::max(1.0, at_n / at_base);
  }
  return 1.0 + 0.3 * static_cast<double>(n_tokens - base_tokens) / static_cast<double>(base_tokens);
}

double CostModel::seconds(int64_t n_tokens) const {
  if (n_tokens < 1 || n_tokens > kMaxTokens) return 0.0;
  return count_[n_tokens] > 0 ? seconds_[n_tokens] : 0.0;
}

DraftPolicy::DraftPolicy(int draft_min, int draft_max, bool adaptive)
    : draft_min_(draft_min),
      draft_max_(draft_max),
      adaptive_(adaptive),
      // A prior worth two evaluations at 1/2: optimistic enough to try drafting, quickly overruled.
      accepted_weight_(1.0),
      evaluated_weight_(2.0) {
  decisions_.rounds_by_length.assign(static_cast<size_t>(draft_max + 1), 0);
}

double DraftPolicy::acceptance() const { return accepted_weight_ / evaluated_weight_; }

int DraftPolicy::next_length(const CostModel& cost, double proposer_cost_per_token, int64_t batch_slots) {
  if (!adaptive_) return draft_max_;
  if (off_) {
    if (++plain_since_off_ < kProbeAfter) {
      ++decisions_.plain_steps;
      return 0;
    }
    // A probe: one short round, whatever the estimate says, so a text that became predictable is noticed.
    off_ = false;
    plain_since_off_ = 0;
    return draft_min_;
  }
  const double alpha = std::min(acceptance(), 0.999);
  int best_k = draft_min_;
  double best_gain = 0.0;
  for (int k = draft_min_; k <= draft_max_; ++k) {
    const double expected_tokens = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
    // The slots decoding together share the forward: a round of this slot's k + 1 tokens with the others'
    // steps, against a step of all of them.
    const double round_cost = cost.relative_cost(batch_slots * (k + 1), batch_slots) + proposer_cost_per_token * k;
    const double gain = expected_tokens / round_cost;
    if (gain > best_gain) {
      best_gain = gain;
      best_k = k;
    }
  }
  if (best_gain < kMinGain) {
    off_ = true;
    plain_since_off_ = 0;
    ++decisions_.fallbacks;
    ++decisions_.plain_steps;
    return 0;
  }
  return best_k;
}

void DraftPolicy::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  ++decisions_.rounds;
  if (drafted < static_cast<int>(decisions_.rounds_by_length.size())) ++decisions_.rounds_by_length[drafted];
  const int evaluated = accepted + (accepted < drafted ? 1 : 0);
  accepted_weight_ = kDecay * accepted_weight_ + accepted;
  evaluated_weight_ = kDecay * evaluated_weight_ + evaluated;
}

}  // namespace rwd::spec
