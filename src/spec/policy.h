// Draft-length policy (DESIGN §6): per slot, pick the draft length that maximises expected output tokens per
// unit of time, from the slot's measured acceptance and the engine's measured cost of a verify batch, and
// fall back to plain decoding when no length beats it, once the slot's own drafts have been seen often enough
// to judge. A slot that fell back probes again after a while, since plain steps tell nothing about acceptance.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rwd::spec {

// Seconds per forward by batch size, measured by the engine; relative costs against a one-token step.
class CostModel {
 public:
  static constexpr int kMaxTokens = 64;
  void observe(int64_t n_tokens, double seconds);
  // cost(n) / cost(base): measured when both sizes were seen, else interpolated between measured sizes, else
  // extended optimistically (0.1 of a step per extra token) so that the policy tries the size and measures it.
  double relative_cost(int64_t n_tokens, int64_t base_tokens = 1) const;
  // The measured seconds of an n-token forward, 0 until one was seen.
  double seconds(int64_t n_tokens) const;

 private:
  std::array<double, kMaxTokens + 1> seconds_{};
  std::array<int64_t, kMaxTokens + 1> count_{};
};

// Seconds of one proposer call by the draft length it produced, measured by the engine. A draft model's call is
// one forward of the round's own catch-up token, the newest token and the first draft, then one forward per
// further draft, so its cost is not proportional to the length: a long draft amortises the first forward.
class ProposerCost {
 public:
  static constexpr int kMaxLength = 32;
  void observe(int length, double seconds);
  // Measured when that length was seen; else interpolated between measured lengths; past the longest measured,
  // extended by half its per-token time per extra token (optimistic, so the policy tries the length and measures
  // it; below the shortest, scaled down in proportion). 0 until a call was measured.
  double seconds(int length) const;

 private:
  std::array<double, kMaxLength + 1> seconds_{};
  std::array<int64_t, kMaxLength + 1> count_{};
};

struct PolicyDecisions {
  int64_t rounds = 0;          // speculative rounds
  int64_t plain_steps = 0;     // steps decoded without a draft because the policy chose so
  int64_t fallbacks = 0;       // times the policy switched speculation off
  std::vector<int64_t> rounds_by_length;  // index k: rounds with draft length k
};

class DraftPolicy {
 public:
  DraftPolicy(int draft_min, int draft_max, bool adaptive);

  // The draft length for the next step: 0 = decode plainly, else in [draft_min, draft_max]. batch_slots: the
  // slots decoding in the same forward (all assumed to draft alike, in one proposer call).
  int next_length(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots);
  // The outcome of a round that drafted `drafted` tokens of which `accepted` were accepted.
  void record(int drafted, int accepted);
  // The estimated probability that a draft token is accepted given the previous one was.
  double acceptance() const;
  const PolicyDecisions& decisions() const { return decisions_; }
  // True while speculation is switched off for the slot (plain decoding with periodic probes).
  bool backed_off() const { return off_; }

  // Tree or chain, for a slot allowed tree drafts: each round's tokens per unit of verify cost, (1 + accepted) /
  // relative_cost(tokens verified), is averaged per shape (decayed); the better shape drafts, the other is tried
  // again every kShapeRetryEvery rounds so that a text whose alternatives start (or stop) paying is noticed,
  // and the two alternate until each has kShapeMinRounds rounds. Without adaptation: always the tree.
  bool next_tree();
  void record_shape(bool tree, int emitted, double relative_cost);

 private:
  int draft_min_;
  int draft_max_;
  bool adaptive_;
  double accepted_weight_;  // decayed sums: recent rounds count more
  double evaluated_weight_;
  int64_t evaluated_total_ = 0;  // draft tokens verified so far (accepted ones and the first rejected of a round)
  bool off_ = false;
  bool probing_ = false;  // the last round was a probe
  int plain_since_off_ = 0;
  int probe_after_;
  PolicyDecisions decisions_;
  // Per shape (0: chain, 1: tree): decayed sums of tokens per relative cost and of rounds, and the rounds seen.
  std::array<double, 2> shape_value_{};
  std::array<double, 2> shape_weight_{};
  std::array<int64_t, 2> shape_rounds_{};
  int64_t shape_choices_ = 0;
};

}  // namespace rwd::spec
