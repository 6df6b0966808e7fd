// Verification of a drafted run of tokens against the target model's logits: greedy (accept while the target's
// argmax matches) and stochastic (accept with probability min(1, p/q), else draw from the residual), so the
// emitted tokens have exactly the distribution plain decoding with the same sampler would give.
// It owns no state: proposing drafts, running the target and rolling back rejected positions live elsewhere.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/sampler.h"

namespace rwd::spec {

// One drafted token. probs is the draft's distribution q it was sampled from (kept tokens in strictly increasing
// id order, summing to 1, as Sampler::distribution returns), or empty for a deterministic draft (n-gram lookup,
// greedy draft model), which counts as q = one-hot at id.
struct DraftToken {
  int32_t id;
  std::vector<sampling::TokenProb> probs;
};

struct VerifyOutcome {
  int n_accepted = 0;  // draft tokens accepted, 0..draft.size()
  // The accepted drafts, then one token from the target (the correction, or the bonus when every draft was
  // accepted): n_accepted + 1 tokens, or n_accepted when stop() fired on an accepted draft.
  std::vector<int32_t> emitted;
};

// logits: [draft.size() + 1, n_vocab]; row i holds the target's logits after the slot's tokens and draft[0..i-1].
// sampler is the slot's target sampler. Every emitted token is passed to sampler.accept() before the next row is
// looked at, so the penalties of row i see exactly the history plain decoding would have.
// stop (may be empty) ends verification right after emitting a token for which it returns true.
//
// Greedy sampler (temperature 0): row i's token is sampler.sample(row i); no random numbers are used.
// Otherwise each row i < draft.size() consumes one uniform() for the acceptance test and, on rejection, one
// draw() from the residual; the bonus row consumes what sample() does. So a seed fixes every outcome.
//
// Fails, leaving the sampler untouched, when n_vocab <= 0, logits is null, a draft id is outside [0, n_vocab),
// or a draft's probs are not a distribution in increasing id order over [0, n_vocab) that gives its own
// token a nonzero probability.
Result<VerifyOutcome> verify(sampling::Sampler& sampler, std::span<const DraftToken> draft, const float* logits,
                             int64_t n_vocab, const std::function<bool(int32_t)>& stop);

}  // namespace rwd::spec
