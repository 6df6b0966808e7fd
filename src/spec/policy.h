// Draft-shape policy (DESIGN §6): per slot, pick the draft length, and for a slot allowed tree drafts the
// alternatives at each depth, that maximise expected output tokens per unit of time, from the slot's measured
// acceptance (of the chain's tokens, and of a node's other candidates by depth and rank) and the engine's
// measured cost of a verify batch by size; fall back to a chain when alternatives do not pay for their verify
// rows, and to plain decoding when no draft beats it, once the slot's own drafts have been seen often enough to
// judge. A slot that fell back probes again after a while, since plain steps tell nothing about acceptance.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace rwd::spec {

// The time of one kind of call: the median of its last kWindow timings, so that one slow call (another
// process took the core) moves nothing and the machine's drift is followed within a few calls. The first timing
// counts only until the second arrives: it often carries one-time work (scratch buffers growing to the size,
// pages touched for the first time, caches still full of the prompt's prefill).
class RecentSeconds {
 public:
  static constexpr int kWindow = 5;
  void add(double seconds);
  // 0 until a timing was added. Kept up to date by add: the policy reads it many times per decision.
  double median() const { return median_; }
  int64_t count() const { return count_; }  // timings added

 private:
  std::array<double, kWindow> window_{};
  double median_ = 0.0;
  int n_kept_ = 0;
  int next_ = 0;
  int64_t count_ = 0;
};

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
  // How many n-token forwards were timed.
  int64_t timings(int64_t n_tokens) const;

 private:
  std::array<RecentSeconds, kMaxTokens + 1> seconds_{};
};

// Seconds of one proposer call by the size of the draft it produced (a chain's tokens, a tree's nodes), measured
// by the engine. A draft model's call is one forward of the round's own catch-up token, the newest token and the
// first draft, then one forward per further draft, so its cost is not proportional to the length: a long draft
// amortises the first forward. MTP runs its block once per chain token and once per tree node it grows on.
class ProposerCost {
 public:
  static constexpr int kMaxLength = 32;
  void observe(int length, double seconds);
  // Measured when that length was seen; else interpolated between measured lengths; past the longest measured,
  // extended by half its per-token time per extra token (optimistic, so the policy tries the length and measures
  // it; below the shortest, scaled down in proportion). 0 until a call was measured.
  double seconds(int length) const;

 private:
  std::array<RecentSeconds, kMaxLength + 1> seconds_{};
};

struct PolicyDecisions {
  int64_t rounds = 0;          // speculative rounds
  int64_t plain_steps = 0;     // steps decoded without a draft because the policy chose so
  int64_t fallbacks = 0;       // times the policy switched speculation off
  std::vector<int64_t> rounds_by_length;  // index k: rounds with draft length k
};

// Acceptance of a tree's alternatives: q(d, r), the probability that the target takes the rank-r child (r >= 2:
// the proposer's r-th candidate there, children in draft order) of a node at depth d - 1 whose path was
// accepted, given that ranks 1 .. r - 1 were not taken. Depths past kDepths share the last estimate; a depth's
// estimate leans on all depths' for the rank until it has its own evidence.
class RankAcceptance {
 public:
  static constexpr int kDepths = 4;
  static constexpr int kMaxRank = 16;
  void observe(int depth, int rank, bool taken);
  // Forget old rounds at the policy's rate.
  void decay(double factor);
  double estimate(int depth, int rank) const;
  // Trials of ranks >= 2 seen so far (not decayed).
  int64_t trials() const { return trials_; }

 private:
  std::array<std::array<double, kMaxRank + 1>, kDepths + 1> taken_{};  // [0]: all depths
  std::array<std::array<double, kMaxRank + 1>, kDepths + 1> tried_{};
  int64_t trials_ = 0;
};

// A draft's shape: `length` tokens of a chain (0: decode plainly) and, for a tree, alternatives[d] candidates
// beside the chain's token at depth d + 1. nodes: the tree's budget, chain included (0: a chain), which may
// exceed length + the alternatives by nodes below them (proposers whose branches continue); with no
// alternatives listed, the proposer spends it its own way.
struct DraftShape {
  int length = 0;
  int nodes = 0;
  std::vector<int> alternatives;
  // At most max_length deep and max_nodes tokens in all (alternatives dropped deepest first, with what a
  // shorter chain cuts off); a shape left with no alternatives is a chain.
  void fit(int max_length, int max_nodes);
};

class DraftPolicy {
 public:
  DraftPolicy(int draft_min, int draft_max, bool adaptive);

  // The draft length for the next step: 0 = decode plainly, else in [draft_min, draft_max]. batch_slots: the
  // slots decoding in the same forward (all assumed to draft alike, in one proposer call).
  int next_length(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots);
  // The same for a slot that may draft a tree of up to max_nodes tokens with up to topk children per node: the
  // length, and the alternatives per depth that raise expected tokens per unit of cost, each depth taking ranks
  // 2, 3, ... in turn by their marginal value α^(d-1) (1 - α) q(d, 2) ... (an alternative found there adds one
  // token); where branches continue, a node below an alternative is worth the alternative's value times α per
  // level, and nodes counts them. Without adaptation: a tree of max(max_nodes, draft_max) tokens shaped by the
  // proposer.
  DraftShape next_shape(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots, int max_nodes,
                        int topk, bool branches_continue = false);
  // The outcome of a round that drafted `drafted` tokens of which `accepted` were accepted.
  void record(int drafted, int accepted);
  // The outcome of a tree: parents[i] is draft token i's parent (-1: the newest token), path the accepted
  // tokens from the root down. Records, at each node of the path and at the node where it ends, which of its
  // children the target took.
  void record_tree(std::span<const int32_t> parents, std::span<const int32_t> path);
  // The estimated probability that a draft token is accepted given the previous one was.
  double acceptance() const;
  const RankAcceptance& rank_acceptance() const { return ranks_; }
  const PolicyDecisions& decisions() const { return decisions_; }
  // True while speculation is switched off for the slot (plain decoding with periodic probes).
  bool backed_off() const { return off_; }

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
  RankAcceptance ranks_;
};

}  // namespace rwd::spec
