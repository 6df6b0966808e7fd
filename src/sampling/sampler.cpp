// The sampler chain. Candidates are (id, logit, prob) triples; every ordering among them is by logit
// descending, ties by lower id (a strict total order), so the kept sets do not depend on the sort algorithm.
// Probabilities are float64 until the final distribution, whose canonical order is increasing id.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "sampling/logprobs.h"

namespace rwd::sampling {
namespace {

template <typename T>
bool higher_logit(const T& a, const T& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

Result<Sampler> Sampler::create(const SamplingParams& params) {
  REWIND_RETURN_IF_ERROR(validate(params));
  return Sampler(params);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f) {
    if (!penalties_active()) return argmax(logits);
    apply_penalties(logits);
    return argmax(penalized_);
  }
  return draw(distribution(logits));
}

std::span<const TokenProb> Sampler::distribution(std::span<const float> logits) {
  apply_penalties(logits);
  distribution_.clear();
  candidates_.clear();
  if (params_.temperature > 0.0f) {
    for (size_t i = 0; i < penalized_.size(); ++i) {
      // -inf and NaN can never be drawn; dropping them here also keeps the orderings strict.
      if (penalized_[i] > -std::numeric_limits<float>::infinity()) {
        candidates_.push_back({static_cast<int32_t>(i), penalized_[i], 0.0});
      }
    }
  }
  if (candidates_.empty()) {  // greedy, or nothing finite to sample from
    distribution_.push_back({argmax(penalized_), 1.0f});
    return distribution_;
  }
  keep_top_k();
  compute_probabilities();
  keep_top_p();
  keep_min_p();
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double sum = 0.0;
  for (const Candidate& c : candidates_) sum += c.prob;
  for (const Candidate& c : candidates_) distribution_.push_back({c.id, static_cast<float>(c.prob / sum)});
  return distribution_;
}

int32_t Sampler::draw(std::span<const TokenProb> weights) {
  REWIND_CHECK(!weights.empty(), "draw from an empty distribution");
  double total = 0.0;
  for (const TokenProb& w : weights) total += w.prob;
  const double target = uniform() * total;
  double cumulative = 0.0;
  for (const TokenProb& w : weights) {
    cumulative += w.prob;
    if (target < cumulative) return w.id;
  }
  // Only reachable through rounding when target lands on the total: the last token with weight wins.
  for (size_t i = weights.size(); i-- > 0;) {
    if (weights[i].prob > 0.0f) return weights[i].id;
  }
  return weights.back().id;
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1p-53; }

void Sampler::accept(int32_t token) {
  history_.push_back(token);
  // Trim in batches so accepting stays O(1) amortised.
  const int64_t keep = params_.repeat_last_n;
  if (keep >= 0 && static_cast<int64_t>(history_.size()) >= 2 * keep + 64) {
    history_.erase(history_.begin(), history_.end() - keep);
  }
}

void Sampler::reset_history() { history_.clear(); }

std::span<const int32_t> Sampler::penalty_window() const {
  const std::span<const int32_t> all(history_);
  if (params_.repeat_last_n < 0) return all;
  return all.last(std::min(all.size(), static_cast<size_t>(params_.repeat_last_n)));
}

bool Sampler::penalties_active() const {
  const bool any = params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                   params_.presence_penalty != 0.0f;
  return any && !penalty_window().empty();
}

// Repetition penalty (llama.cpp's rule: positive logits divided, others multiplied) once per distinct token,
// then frequency (per occurrence) and presence (once) penalties subtracted.
void Sampler::apply_penalties(std::span<const float> logits) {
  penalized_.assign(logits.begin(), logits.end());
  if (!penalties_active()) return;
  const std::span<const int32_t> window = penalty_window();
  window_sorted_.assign(window.begin(), window.end());
  std::sort(window_sorted_.begin(), window_sorted_.end());
  for (size_t begin = 0; begin < window_sorted_.size();) {
    const int32_t id = window_sorted_[begin];
    size_t end = begin;
    while (end < window_sorted_.size() && window_sorted_[end] == id) ++end;
    REWIND_CHECK(id >= 0 && static_cast<size_t>(id) < penalized_.size(), "history token {} outside vocabulary of {}",
                 id, penalized_.size());
    float& logit = penalized_[id];
    logit = logit > 0.0f ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
    logit -= static_cast<float>(end - begin) * params_.frequency_penalty + params_.presence_penalty;
    begin = end;
  }
}

void Sampler::keep_top_k() {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= candidates_.size()) return;
  std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k - 1), candidates_.end(),
                   higher_logit<Candidate>);
  candidates_.resize(k);
}

// softmax(logit / temperature) over the candidates, in float64.
void Sampler::compute_probabilities() {
  float max_logit = candidates_.front().logit;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  const double temperature = params_.temperature;
  double sum = 0.0;
  for (Candidate& c : candidates_) {
    c.prob = std::exp((static_cast<double>(c.logit) - static_cast<double>(max_logit)) / temperature);
    sum += c.prob;
  }
  for (Candidate& c : candidates_) c.prob /= sum;
}

// Keeps the most likely tokens up to and including the one whose cumulative probability reaches top_p.
// Sorts only as long a prefix as needed, growing it 4x at a time, since top_p usually keeps few tokens.
void Sampler::keep_top_p() {
  if (params_.top_p >= 1.0f) return;
  const size_t n = candidates_.size();
  size_t n_sorted = std::min<size_t>(n, 64);
  while (true) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n_sorted),
                      candidates_.end(), higher_logit<Candidate>);
    double cumulative = 0.0;
    for (size_t i = 0; i < n_sorted; ++i) {
      cumulative += candidates_[i].prob;
      if (cumulative >= params_.top_p) {
        candidates_.resize(i + 1);
        return;
      }
    }
    if (n_sorted == n) return;
    n_sorted = std::min(n, n_sorted * 4);
  }
}

void Sampler::keep_min_p() {
  if (params_.min_p <= 0.0f) return;
  double max_prob = 0.0;
  for (const Candidate& c : candidates_) max_prob = std::max(max_prob, c.prob);
  const double threshold = static_cast<double>(params_.min_p) * max_prob;
  std::erase_if(candidates_, [&](const Candidate& c) { return c.prob < threshold; });
}

}  // namespace rwd::sampling
