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
//
// A draft may be a tree (tree speculation): token i follows draft[parent] (parent < i), or the slot's newest
// token for parent -1; kPreviousDraft (the default) is the draft before it, so a draft of such tokens is a
// chain. Siblings are alternatives for the same position: distinct ids, deterministic (empty probs) when a
// node has several.
inline constexpr int32_t kPreviousDraft = -2;

struct DraftToken {
  int32_t id;
  std::vector<sampling::TokenProb> probs;
  int32_t parent = kPreviousDraft;
};

// draft[i]'s parent index: -1 for the slot's newest token.
inline int32_t draft_parent(std::span<const DraftToken> draft, size_t i) {
  return draft[i].parent == kPreviousDraft ? static_cast<int32_t>(i) - 1 : draft[i].parent;
}
// Whether every draft token follows the one before it.
inline bool is_chain(std::span<const DraftToken> draft) {
  for (size_t i = 0; i < draft.size(); ++i) {
    if (draft_parent(draft, i) != static_cast<int32_t>(i) - 1) return false;
  }
  return true;
}

struct VerifyOutcome {
  int n_accepted = 0;  // draft tokens accepted, 0..draft.size()
  // The accepted drafts, then one token from the target (the correction, or the bonus when every draft was
  // accepted): n_accepted + 1 tokens, or n_accepted when stop() fired on an accepted draft.
  std::vector<int32_t> emitted;
  std::vector<int32_t> path;  // the draft indices of the accepted tokens, in order (0 .. n_accepted - 1 on a chain)
};

// logits: [draft.size() + 1, n_vocab]; row 0 holds the target's logits after the slot's tokens, row i + 1 those
// after draft[i] and its ancestors (on a chain: after draft[0..i]). Verification walks from row 0 down the
// tree: at each node the target's token is chosen, and when it is one of the node's children's, that child is
// accepted and its row is next.
// sampler is the slot's target sampler. Every emitted token is passed to sampler.accept() before the next row is
// looked at, so the penalties of row i see exactly the history plain decoding would have.
// stop (may be empty) ends verification right after emitting a token for which it returns true.
//
// Greedy sampler (temperature 0): a row's token is sampler.sample(row); no random numbers are used.
// Otherwise a row with one child consumes one uniform() for the acceptance test and, on rejection, one draw()
// from the residual; a row with several (deterministic) children tests them in order, each with one uniform()
// against the residual the earlier ones left (p with their ids removed: recursive rejection sampling, which
// keeps exactly p), and draws from it when all are rejected; a leaf's row consumes what sample() does. So a seed
// fixes every outcome, and a chain consumes what it did before trees existed.
//
// Fails, leaving the sampler untouched, when n_vocab <= 0, logits is null, a draft id is outside [0, n_vocab),
// a draft's probs are not a distribution in increasing id order over [0, n_vocab) that gives its own
// token a nonzero probability, a parent is not an earlier draft index (or -1), or siblings repeat an id or
// carry probs.
Result<VerifyOutcome> verify(sampling::Sampler& sampler, std::span<const DraftToken> draft, const float* logits,
                             int64_t n_vocab, const std::function<bool(int32_t)>& stop);

}  // namespace rwd::spec
