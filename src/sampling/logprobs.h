// Stateless helpers over one logit row: argmax, log-softmax, and the top-k log-probabilities behind the
// --top-logprobs output. Natural logarithms of the full softmax (no temperature, no penalties, no truncation).
// The stochastic chain and its state live in sampler.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rwd::sampling {

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// Index of the largest logit; ties go to the lowest id; NaN never wins. 0 when nothing beats -inf.
int32_t argmax(std::span<const float> logits);

// out[i] = logits[i] - log(sum_j exp(logits[j])), with the max subtracted first and the sum in float64.
// logits must hold at least one finite value.
void log_softmax(std::span<const float> logits, std::vector<float>& out);

// The k most likely tokens (fewer if the row is shorter), by decreasing log-probability, ties by id.
std::vector<TokenLogprob> top_k_logprobs(std::span<const float> logits, int32_t k);

// The log-probability of one token, the same number log_softmax gives for it.
float token_logprob(std::span<const float> logits, int32_t id);

}  // namespace rwd::sampling
