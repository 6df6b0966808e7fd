// Speculative verification. The stochastic rule is the one of Leviathan et al. / Chen et al. (2023): accepting
// draft d with probability min(1, p(d)/q(d)) and otherwise drawing from norm(max(0, p - q)) yields exactly p.
// A deterministic draft is the same rule with q = one-hot at d, whose residual is p with d removed.
// Distributions are the sampler's (sorted by id), so lookups and the residual are merges, never dense rows.
#include "spec/verify.h"

#include <algorithm>
#include <cmath>

namespace rwd::spec {
namespace {

using sampling::TokenProb;

Status validate(std::span<const DraftToken> draft, const float* logits, int64_t n_vocab) {
  if (n_vocab <= 0) return Status::errorf("verify: n_vocab is {}, expected > 0", n_vocab);
  if (logits == nullptr) return Status::error("verify: logits is null");
  for (size_t i = 0; i < draft.size(); ++i) {
    const DraftToken& token = draft[i];
    if (token.id < 0 || token.id >= n_vocab) {
      return Status::errorf("verify: draft[{}] token {} outside the vocabulary [0, {})", i, token.id, n_vocab);
    }
    const int32_t parent = draft_parent(draft, i);
    if (parent < -1 || parent >= static_cast<int32_t>(i)) {
      return Status::errorf("verify: draft[{}] has parent {}, expected -1 .. {}", i, token.parent,
                            static_cast<int64_t>(i) - 1);
    }
    for (size_t j = 0; j < i; ++j) {
      if (draft_parent(draft, j) != parent) continue;
      if (draft[j].id == token.id) {
        return Status::errorf("verify: draft[{}] and draft[{}] are siblings with the same token {}", j, i, token.id);
      }
      if (!draft[j].probs.empty() || !token.probs.empty()) {
        return Status::errorf("verify: draft[{}] and draft[{}] are siblings and one carries probs: siblings are "
                              "deterministic drafts", j, i);
      }
    }
    if (token.probs.empty()) continue;
    double sum = 0.0;
    double own_prob = 0.0;
    for (size_t j = 0; j < token.probs.size(); ++j) {
      const TokenProb& entry = token.probs[j];
      if (entry.id < 0 || entry.id >= n_vocab) {
        return Status::errorf("verify: draft[{}].probs[{}] token {} outside the vocabulary [0, {})", i, j, entry.id,
                              n_vocab);
      }
      if (j > 0 && entry.id <= token.probs[j - 1].id) {
        return Status::errorf("verify: draft[{}].probs[{}] token {} follows token {}, expected increasing ids", i, j,
                              entry.id, token.probs[j - 1].id);
      }
      if (!std::isfinite(entry.prob) || entry.prob < 0.0f) {
        return Status::errorf("verify: draft[{}].probs[{}] (token {}) has probability {}, expected finite and >= 0",
                              i, j, entry.id, entry.prob);
      }
      sum += entry.prob;
      if (entry.id == token.id) own_prob = entry.prob;
    }
    // Float rounding of a sampler's distribution stays far below this; a larger gap means q is not normalised,
    // and the acceptance ratio p/q would then be wrong.
    if (std::abs(sum - 1.0) > 1e-3) return Status::errorf("verify: draft[{}].probs sum to {}, expected 1", i, sum);
    if (own_prob <= 0.0) {
      return Status::errorf("verify: draft[{}] token {} has probability 0 in its own probs", i, token.id);
    }
  }
  return Status::ok();
}

// Probability of id in a distribution sorted by id; 0 outside its support.
double prob_of(std::span<const TokenProb> dist, int32_t id) {
  const auto it = std::lower_bound(dist.begin(), dist.end(), id,
                                   [](const TokenProb& entry, int32_t value) { return entry.id < value; });
  return it != dist.end() && it->id == id ? it->prob : 0.0;
}

struct RowResult {
  int32_t token;
  bool accepted;
};

// target and residual are scratch reused across rows.
RowResult verify_stochastic_row(sampling::Sampler& sampler, const DraftToken& draft, std::span<const float> row,
                                std::vector<TokenProb>& target, std::vector<TokenProb>& residual) {
  // Copied because distribution()'s span is invalidated by the next call on the sampler.
  const std::span<const TokenProb> distribution = sampler.distribution(row);
  target.assign(distribution.begin(), distribution.end());
  const TokenProb one_hot[1] = {{draft.id, 1.0f}};
  const std::span<const TokenProb> q = draft.probs.empty() ? std::span<const TokenProb>(one_hot)
                                                           : std::span<const TokenProb>(draft.probs);

  // u * q(d) < p(d) is u < p(d)/q(d) without dividing; q(d) > 0 is guaranteed by validate().
  const double p_draft = prob_of(target, draft.id);
  if (sampler.uniform() * prob_of(q, draft.id) < p_draft) return {draft.id, true};

  residual.clear();
  double residual_sum = 0.0;
  size_t iq = 0;
  for (const TokenProb& entry : target) {
    while (iq < q.size() && q[iq].id < entry.id) ++iq;
    const double q_prob = iq < q.size() && q[iq].id == entry.id ? q[iq].prob : 0.0;
    const double excess = std::max(0.0, static_cast<double>(entry.prob) - q_prob);
    residual.push_back({entry.id, static_cast<float>(excess)});
    residual_sum += static_cast<float>(excess);
  }
  // All zero only when p == q up to rounding, where a rejection is itself a rounding artefact.
  return {sampler.draw(residual_sum > 0.0 ? std::span<const TokenProb>(residual) : std::span<const TokenProb>(target)),
          false};
}

// Recursive rejection over a node's deterministic children (each q = one-hot at its id): child c is accepted
// with probability r(c) / sum(r), r the target distribution with the earlier children's ids removed; when all
// are rejected the token is drawn from r. residual is scratch.
RowResult verify_children_row(sampling::Sampler& sampler, std::span<const DraftToken> draft,
                              std::span<const int32_t> children, std::span<const float> row,
                              std::vector<TokenProb>& target, std::vector<TokenProb>& residual,
                              int32_t* accepted_child) {
  const std::span<const TokenProb> distribution = sampler.distribution(row);
  target.assign(distribution.begin(), distribution.end());
  residual = target;
  double sum = 0.0;
  for (const TokenProb& entry : residual) sum += entry.prob;
  for (int32_t child : children) {
    const int32_t id = draft[child].id;
    const auto it = std::lower_bound(residual.begin(), residual.end(), id,
                                     [](const TokenProb& entry, int32_t value) { return entry.id < value; });
    const double weight = it != residual.end() && it->id == id ? it->prob : 0.0;
    if (sampler.uniform() * sum < weight) {
      *accepted_child = child;
      return {id, true};
    }
    if (weight > 0.0) {
      sum -= weight;
      it->prob = 0.0f;
    }
  }
  // Every kept token was a rejected child only when rounding says so: then p itself is what is left.
  if (!(sum > 0.0)) residual = target;
  return {sampler.draw(residual), false};
}

}  // namespace

Result<VerifyOutcome> verify(sampling::Sampler& sampler, std::span<const DraftToken> draft, const float* logits,
                             int64_t n_vocab, const std::function<bool(int32_t)>& stop) {
  REWIND_RETURN_IF_ERROR(validate(draft, logits, n_vocab));
  const bool greedy = sampler.params().temperature == 0.0f;
  VerifyOutcome outcome;
  std::vector<TokenProb> target;
  std::vector<TokenProb> residual;
  std::vector<int32_t> children;
  for (int32_t node = -1;;) {
    const std::span<const float> row(logits + static_cast<int64_t>(node + 1) * n_vocab, static_cast<size_t>(n_vocab));
    children.clear();
    for (size_t i = static_cast<size_t>(node + 1); i < draft.size(); ++i) {
      if (draft_parent(draft, i) == node) children.push_back(static_cast<int32_t>(i));
    }
    RowResult result = {0, false};
    int32_t accepted_child = -1;
    if (children.empty()) {
      result.token = sampler.sample(row);
    } else if (greedy) {
      result.token = sampler.sample(row);
      for (int32_t child : children) {
        if (draft[child].id == result.token) accepted_child = child;
      }
      result.accepted = accepted_child >= 0;
    } else if (children.size() == 1) {
      result = verify_stochastic_row(sampler, draft[children[0]], row, target, residual);
      if (result.accepted) accepted_child = children[0];
    } else {
      result = verify_children_row(sampler, draft, children, row, target, residual, &accepted_child);
    }
    outcome.emitted.push_back(result.token);
    sampler.accept(result.token);
    if (!result.accepted) break;
    ++outcome.n_accepted;
    outcome.path.push_back(accepted_child);
    node = accepted_child;
    if (stop && stop(result.token)) break;
  }
  return outcome;
}

}  // namespace rwd::spec
