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
// Plain steps before a slot that fell back tries a draft again; each probe that finds speculation still losing
// doubles the wait, up to the cap, because a probe is not free (a draft model first reads every token decoded
// without it, about a tenth of a step each) and a text that did not pay twice seldom starts to.
constexpr int kProbeAfter = 32;
constexpr int kMaxProbeAfter = 512;
// Every this many rounds a slot drafts one token longer than its best length, so that a length whose cost
// was measured once, badly, is measured again instead of being ruled out for good.
constexpr int64_t kExploreEvery = 16;
// Tree or chain: rounds of each shape before the better one is chosen, and how often the other is tried again.
constexpr int64_t kShapeMinRounds = 4;
constexpr int64_t kShapeRetryEvery = 16;
// Draft tokens a slot must have had verified before the policy may switch speculation off: the prior says
// nothing about this text, and with an expensive proposer (a draft model) it alone would switch speculation off
// at once, on texts where drafts are nearly always right too.
constexpr int64_t kMinEvidence = 16;

// An exponential average, because the machine's speed drifts (other load, frequency) and old timings must fade;
// the second timing of a size replaces the first, which often carries one-time work (scratch buffers growing
// to the new size, pages touched for the first time).
double average_in(double average, int64_t count, double seconds) {
  return count <= 1 ? seconds : 0.9 * average + 0.1 * seconds;
}

}  // namespace

void CostModel::observe(int64_t n_tokens, double seconds) {
  if (n_tokens < 1 || n_tokens > kMaxTokens || !(seconds > 0.0)) return;
  seconds_[n_tokens] = average_in(seconds_[n_tokens], count_[n_tokens], seconds);
  ++count_[n_tokens];
}

double CostModel::relative_cost(int64_t n_tokens, int64_t base_tokens) const {
  n_tokens = std::clamp<int64_t>(n_tokens, 1, kMaxTokens);
  base_tokens = std::clamp<int64_t>(base_tokens, 1, kMaxTokens);
  const double optimistic_slope = 0.1 / static_cast<double>(base_tokens);
  if (count_[base_tokens] == 0) return 1.0 + optimistic_slope * static_cast<double>(n_tokens - base_tokens);
  if (count_[n_tokens] > 0) return seconds_[n_tokens] / seconds_[base_tokens];
  // Between two measured sizes: interpolate. Past the largest: extend it optimistically, so the policy tries
  // the size once and measures it (t(n) is flat while memory-bound and steep once compute-bound; no fit of
  // a few points predicts where the bend is).
  int64_t below = 0;
  int64_t above = 0;
  for (int64_t n = n_tokens - 1; n >= 1 && below == 0; --n) below = count_[n] > 0 ? n : 0;
  for (int64_t n = n_tokens + 1; n <= kMaxTokens && above == 0; ++n) above = count_[n] > 0 ? n : 0;
  const double base = seconds_[base_tokens];
  if (below > 0 && above > 0) {
    const double f = static_cast<double>(n_tokens - below) / static_cast<double>(above - below);
    return ((1.0 - f) * seconds_[below] + f * seconds_[above]) / base;
  }
  if (below > 0) return seconds_[below] / base + optimistic_slope * static_cast<double>(n_tokens - below);
  return std::max(1.0, seconds_[above] / base);
}

double CostModel::seconds(int64_t n_tokens) const {
  if (n_tokens < 1 || n_tokens > kMaxTokens) return 0.0;
  return count_[n_tokens] > 0 ? seconds_[n_tokens] : 0.0;
}

void ProposerCost::observe(int length, double seconds) {
  if (length < 1 || length > kMaxLength || !(seconds > 0.0)) return;
  seconds_[length] = average_in(seconds_[length], count_[length], seconds);
  ++count_[length];
}

double ProposerCost::seconds(int length) const {
  length = std::clamp(length, 1, kMaxLength);
  if (count_[length] > 0) return seconds_[length];
  int below = 0;
  int above = 0;
  for (int k = length - 1; k >= 1 && below == 0; --k) below = count_[k] > 0 ? k : 0;
  for (int k = length + 1; k <= kMaxLength && above == 0; ++k) above = count_[k] > 0 ? k : 0;
  if (below > 0 && above > 0) {
    const double f = static_cast<double>(length - below) / static_cast<double>(above - below);
    return (1.0 - f) * seconds_[below] + f * seconds_[above];
  }
  if (below > 0) return seconds_[below] * (1.0 + 0.5 * static_cast<double>(length - below) / below);
  if (above > 0) return seconds_[above] * static_cast<double>(length) / static_cast<double>(above);
  return 0.0;
}

DraftPolicy::DraftPolicy(int draft_min, int draft_max, bool adaptive)
    : draft_min_(draft_min),
      draft_max_(draft_max),
      adaptive_(adaptive),
      // A prior worth two evaluations at 1/2: optimistic enough to try drafting, quickly overruled.
      accepted_weight_(1.0),
      evaluated_weight_(2.0),
      probe_after_(kProbeAfter) {
  decisions_.rounds_by_length.assign(static_cast<size_t>(draft_max + 1), 0);
}

double DraftPolicy::acceptance() const { return accepted_weight_ / evaluated_weight_; }

int DraftPolicy::next_length(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots) {
  if (!adaptive_) return draft_max_;
  if (off_) {
    if (++plain_since_off_ < probe_after_) {
      ++decisions_.plain_steps;
      return 0;
    }
    // A probe: one short round, whatever the estimate says, so a text that became predictable is noticed.
    off_ = false;
    probing_ = true;
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
    const double step_seconds = cost.seconds(batch_slots);
    const double proposer_cost = step_seconds > 0.0 ? proposer.seconds(k) / step_seconds : 0.0;
    const double round_cost = cost.relative_cost(batch_slots * (k + 1), batch_slots) + proposer_cost;
    const double gain = expected_tokens / round_cost;
    if (gain > best_gain) {
      best_gain = gain;
      best_k = k;
    }
  }
  const bool probe_failed = probing_;
  probing_ = false;
  if (best_gain < kMinGain && evaluated_total_ >= kMinEvidence) {
    probe_after_ = probe_failed ? std::min(2 * probe_after_, kMaxProbeAfter) : kProbeAfter;
    off_ = true;
    plain_since_off_ = 0;
    ++decisions_.fallbacks;
    ++decisions_.plain_steps;
    return 0;
  }
  if (decisions_.rounds % kExploreEvery == kExploreEvery - 1 && best_k < draft_max_) return best_k + 1;
  return best_k;
}

void DraftPolicy::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  ++decisions_.rounds;
  if (drafted < static_cast<int>(decisions_.rounds_by_length.size())) ++decisions_.rounds_by_length[drafted];
  const int evaluated = accepted + (accepted < drafted ? 1 : 0);
  evaluated_total_ += evaluated;
  accepted_weight_ = kDecay * accepted_weight_ + accepted;
  evaluated_weight_ = kDecay * evaluated_weight_ + evaluated;
}

bool DraftPolicy::next_tree() {
  if (!adaptive_) return true;
  const int64_t choice = shape_choices_++;
  if (shape_rounds_[0] < kShapeMinRounds || shape_rounds_[1] < kShapeMinRounds) {
    return shape_rounds_[1] <= shape_rounds_[0];
  }
  const bool tree_better = shape_value_[1] / shape_weight_[1] > shape_value_[0] / shape_weight_[0];
  return choice % kShapeRetryEvery == kShapeRetryEvery - 1 ? !tree_better : tree_better;
}

void DraftPolicy::record_shape(bool tree, int emitted, double relative_cost) {
  if (emitted <= 0 || !(relative_cost > 0.0)) return;
  const int arm = tree ? 1 : 0;
  shape_value_[arm] = kDecay * shape_value_[arm] + static_cast<double>(emitted) / relative_cost;
  shape_weight_[arm] = kDecay * shape_weight_[arm] + 1.0;
  ++shape_rounds_[arm];
}

}  // namespace rwd::spec
