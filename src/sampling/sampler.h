// Sampler: the per-sequence token picker. It owns the sequence's seeded random generator and its recent
// tokens, and runs the chain: penalties -> (temperature 0: argmax) -> top-k -> temperature -> softmax ->
// top-p -> min-p -> renormalise -> draw. It never modifies the caller's logits. Stateless log-probability
// helpers are in logprobs.h; speculative verification builds on distribution(), draw() and uniform().
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/sampling_params.h"

namespace rwd::sampling {

struct TokenProb {
  int32_t id;
  float prob;
};

class Sampler {
 public:
  // Fails with validate()'s message when params are out of range.
  static Result<Sampler> create(const SamplingParams& params);

  const SamplingParams& params() const { return params_; }

  // Picks the next token from logits [n_vocab], with penalties from the accepted history. Greedy (temperature 0)
  // returns the argmax of the penalised logits (ties to the lowest id) and uses no random numbers; otherwise
  // exactly one 64-bit draw is consumed, so the sequence of draws depends only on the seed and the call count.
  int32_t sample(std::span<const float> logits);

  // The distribution sample() draws from: the kept tokens in increasing id order with probabilities summing to
  // 1 (a single token with probability 1 when greedy). Valid until the next call on this sampler.
  // NaN and -inf logits are never kept; if no logit is finite, the result is argmax(logits) with probability 1.
  std::span<const TokenProb> distribution(std::span<const float> logits);

  // Draws from weights (not necessarily normalised; in the order given), consuming one 64-bit draw.
  int32_t draw(std::span<const TokenProb> weights);

  // Uniform in [0, 1) from the top 53 bits of one 64-bit draw: for acceptance tests in speculative decoding.
  double uniform();

  // Appends a token to the history the penalties look at (the prompt's tokens too, if they should count).
  void accept(int32_t token);
  // Forgets the history; the random generator continues where it was.
  void reset_history();
  // The tokens the penalties look at now, oldest first (at most repeat_last_n; all of them when -1).
  std::span<const int32_t> penalty_window() const;

 private:
  struct Candidate {
    int32_t id;
    float logit;
    double prob;
  };

  explicit Sampler(const SamplingParams& params);
  bool penalties_active() const;
  void apply_penalties(std::span<const float> logits);
  void keep_top_k();
  void compute_probabilities();
  void keep_top_p();
  void keep_min_p();

  SamplingParams params_;
  std::mt19937_64 rng_;  // fully specified by the C++ standard, so draws match across platforms
  std::vector<int32_t> history_;
  // Scratch reused across calls so a decoding step does not allocate once warmed up.
  std::vector<float> penalized_;
  std::vector<int32_t> window_sorted_;
  std::vector<Candidate> candidates_;
  std::vector<TokenProb> distribution_;
};

}  // namespace rwd::sampling
