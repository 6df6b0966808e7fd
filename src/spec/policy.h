// Draft-shape policy (DESIGN §6): per slot, pick the draft length, and for a slot allowed tree drafts the
// alternatives at each depth, that maximise expected output tokens per unit of time, from the slot's measured
// acceptance (of the chain's tokens, and of a node's other candidates by depth and rank) and the engine's
// measured cost of a whole round by size (verify forward and bookkeeping, proposer call, the proposer's
// catch-up); fall back to a chain when alternatives do not pay for their verify rows, and to plain decoding when
// no draft beats it, once the slot's own drafts have been seen often enough to judge. A slot that fell back
// probes again after a while, since plain steps tell nothing about acceptance. Whatever the estimates say, a
// slot's speculation keeps an account of what its rounds gained or lost against plain decoding (LossBudget)
// and takes no round whose loss, were every draft rejected, the account could not bear: the time speculation
// can lose is bounded by construction, not by the estimates being right.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
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

// Seconds per step by the slots it decoded and the tokens it ran, measured by the engine; costs relative to a
// plain step of the same slots. Keyed by both: a slot's tokens run one after another through the recurrent
// layers, so four tokens of one slot cost otherwise than one token of each of four slots.
class CostModel {
 public:
  static constexpr int kMaxTokens = 64;
  void observe(int64_t n_slots, int64_t n_tokens, double seconds);
  // cost(n_slots, n_tokens) / cost(n_slots, n_slots): measured when both were seen, else interpolated between
  // measured token counts of those slots, else extended optimistically (0.1 of a step per extra token per slot)
  // so that the policy tries the size and measures it.
  double relative_cost(int64_t n_slots, int64_t n_tokens) const;
  // The measured seconds of such a step, 0 until one was seen.
  double seconds(int64_t n_slots, int64_t n_tokens) const;
  // How many such steps were timed.
  int64_t timings(int64_t n_slots, int64_t n_tokens) const;
  // What a token a slot gets ahead by speculating is worth, in its plain steps, among n_slots decoding
  // together: a slot that finishes sooner leaves the batch, and the step of the others costs less by one
  // slot's part of it, (t(n, n) - t(1, 1)) / (n - 1), not by the n-th of the step its share is (on the trained
  // hybrid, four slots: 0.74 of a share). 1 for one slot, and until both steps were timed; in [0.25, 1].
  double token_value(int64_t n_slots) const;

 private:
  using BySize = std::array<RecentSeconds, kMaxTokens + 1>;
  const BySize* row(int64_t n_slots) const;
  std::vector<BySize> by_slots_;  // [n_slots][n_tokens]
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
  // The proposer's catch-up on tokens the target ran without it (MTP's block over each kept row, a draft model
  // over tokens decoded while speculation was off): `rows` tokens owed by the slots of one call, in `seconds`.
  void observe_catch_up(int64_t rows, double seconds);
  // The seconds of a catch-up on `rows` tokens: by rows as seconds() is by length (a forward's fixed cost makes
  // one row dear and many rows cheap each); past kMaxLength rows, in proportion. 0 until one was measured.
  double catch_up_seconds(int64_t rows) const;
  // The most rows a catch-up feeds however many are owed (Proposer::max_catch_up_rows).
  void set_max_catch_up_rows(int64_t rows) { max_catch_up_rows_ = rows; }
  int64_t max_catch_up_rows() const { return max_catch_up_rows_; }

 private:
  std::array<RecentSeconds, kMaxLength + 1> seconds_{};
  std::array<RecentSeconds, kMaxLength + 1> catch_up_{};
  int64_t max_catch_up_rows_ = std::numeric_limits<int64_t>::max();
};

// One slot's speculation account against plain decoding, in plain steps (the slot's share of a step of all the
// slots decoding together). A round that emitted t tokens at a cost of c steps adds 1 + v (t - 1) - c, v being
// what a token ahead is worth (1 for one slot; CostModel::token_value); each token the slot decodes adds
// kLossShare to what may be lost, on top of kAllowance. A round is taken only if the account can
// bear its worst case (every draft rejected: one token for the round's whole cost), so whatever acceptance
// turns out to be, speculation loses at most kAllowance + kLossShare · tokens steps (plus what a round cost
// beyond its prediction) against plain decoding, and wherever it gains, the gain pays for the rounds that lose.
class LossBudget {
 public:
  // 0.8 step up front and 0.8 % of the tokens decoded: at most 2.5 % of a 48-token generation, 1 % of a
  // 512-token one, while a first unlucky round (0.3-0.6 step on the 2-core machines here) leaves room for a
  // second try at once. With 1.2 % the oracle's every-draft-wrong row measured 0.96-1.00x plain over 512
  // tokens: the bound held, but left the noise of a 2-core machine little room.
  static constexpr double kAllowance = 0.8;
  static constexpr double kLossShare = 0.008;
  // emitted tokens, each past the first worth token_value steps (CostModel::token_value), for cost_steps.
  void settle(int emitted, double cost_steps, double token_value = 1.0);
  void add_plain_token() { ++tokens_; }
  // Whether a round that would lose worst_loss steps if every draft were rejected may be taken.
  bool allows(double worst_loss) const;
  double balance() const { return balance_; }  // steps gained (+) or lost (-) by the rounds so far
  int64_t tokens() const { return tokens_; }

 private:
  double balance_ = 0.0;
  int64_t tokens_ = 0;
};

struct PolicyDecisions {
  int64_t rounds = 0;          // speculative rounds
  int64_t plain_steps = 0;     // steps decoded without a draft because the policy chose so
  int64_t fallbacks = 0;       // times the policy switched speculation off
  int64_t budget_plain = 0;    // of plain_steps: a round the loss budget could not bear
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
  // slots decoding in the same forward; drafting_slots: how many of them are expected to draft, alike, in one
  // proposer call (0: all), which share what the round adds to the step (one slot drafting alone among four
  // bears all of it: on the trained hybrid one extra token among four slots added 29 % to their step, one
  // for each of the four 45 %).
  int next_length(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
                  int64_t drafting_slots = 0);
  // The same for a slot that may draft a tree of up to max_nodes tokens with up to topk children per node: the
  // length, and the alternatives per depth that raise expected tokens per unit of cost, each depth taking ranks
  // 2, 3, ... in turn by their marginal value α^(d-1) (1 - α) q(d, 2) ... (an alternative found there adds one
  // token); where branches continue, a node below an alternative is worth the alternative's value times α per
  // level, and nodes counts them. Without adaptation: a tree of max(max_nodes, draft_max) tokens shaped by the
  // proposer.
  DraftShape next_shape(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots, int max_nodes,
                        int topk, bool branches_continue = false, int64_t drafting_slots = 0);
  // Whether the loss budget bears `shape` (as next_shape chose it) when drafting_slots of the batch_slots draft
  // in the step: the engine asks once every slot has chosen, since a slot that drafts with fewer others than
  // next_shape expected bears more of the round. Always true without adaptation.
  bool bears(const DraftShape& shape, const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
             int64_t drafting_slots) const;
  // Takes back the round next_shape chose: the step decodes plainly (a probe waits for the next step).
  void decline();
  // The outcome of a round that drafted `drafted` tokens of which `accepted` were accepted.
  void record(int drafted, int accepted);
  // What the round cost against plain decoding: `emitted` tokens for `cost_steps` plain steps of the slot
  // (measured medians of its forward and proposer call, and its share of the catch-up it paid). A step whose
  // proposer drafted nothing settles as one token for a step and the call. token_value: what each token past
  // the first is worth (CostModel::token_value).
  void settle(int emitted, double cost_steps, double token_value = 1.0);
  // A step the engine decoded plainly without asking the policy (to time a plain step).
  void on_plain_step();
  // Tokens a proposer may owe a slot between two rounds (the last round's emitted tokens): its catch-up on
  // them is part of each round's cost. More are a run of plain steps, whose catch-up the resuming round pays.
  static int64_t steady_owed_rows(int draft_max) { return int64_t{1} + draft_max; }
  // The outcome of a tree: parents[i] is draft token i's parent (-1: the newest token), path the accepted
  // tokens from the root down. Records, at each node of the path and at the node where it ends, which of its
  // children the target took.
  void record_tree(std::span<const int32_t> parents, std::span<const int32_t> path);
  // The estimated probability that a draft token is accepted given the previous one was.
  double acceptance() const;
  const RankAcceptance& rank_acceptance() const { return ranks_; }
  const PolicyDecisions& decisions() const { return decisions_; }
  const LossBudget& budget() const { return budget_; }
  // True while speculation is switched off for the slot (plain decoding with periodic probes).
  bool backed_off() const { return off_; }

 private:
  DraftShape decode_plainly();
  // A round of n_tokens (the newest and the draft) in the slot's plain steps: the forward it adds to a plain
  // step of the batch_slots and the proposer call, both shared by the drafting_slots (0: all).
  double round_steps(const CostModel& cost, const ProposerCost& proposer, int64_t batch_slots,
                     int64_t drafting_slots, int n_tokens) const;
  // What `shape` loses against plain decoding if every draft is rejected, with the catch-up it owes.
  double worst_loss(const DraftShape& shape, const CostModel& cost, const ProposerCost& proposer,
                    int64_t batch_slots, int64_t drafting_slots) const;

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
  // Tokens decoded since the slot's last round: the proposer owes them a catch-up (MTP and a draft model).
  int64_t owed_rows_ = 0;
  PolicyDecisions decisions_;
  RankAcceptance ranks_;
  LossBudget budget_;
};

}  // namespace rwd::spec
