// Oracle proposer, for measurements and tests: drafts a known continuation of the prompt (typically the
// target's own greedy output from an earlier run) with each drafted token replaced by a wrong one with a set
// probability, so acceptance can be dialled in without a real draft model. Errors are a fixed function of
// (seed, position), so runs are repeatable.
//
// Asked for a tree, it stands for a drafter that ranks candidates at each position: the true token is its
// first candidate with probability 1 - e (the chain's draft), else its second with probability 1 - e, and so on
// (rank r with probability (1 - e) e^(r-1)); the other candidates are wrong. Not knowing which is true, it grows
// the tree best first by that confidence (a node's is the product of (1 - e) e^(rank-1) along its path, as a
// drafter's top-k probabilities would be), up to the node budget, tree_topk candidates per node. The
// geometric ranks make it an idealised drafter (a real one's later candidates are right less often): tree
// measurements with it are an upper bound on what a real drafter's confidences would give.
#pragma once

#include "spec/proposer.h"

namespace rwd::spec {

class OracleProposer final : public Proposer {
 public:
  OracleProposer(double error_rate, uint64_t seed, int64_t n_vocab)
      : error_rate_(error_rate), seed_(seed), n_vocab_(n_vocab) {}

  std::string_view name() const override { return "oracle"; }
  bool branches_continue() const override { return true; }
  void start_sequence(int, int64_t, bool) override {}
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int, int64_t, int64_t, int64_t, const float*) override { return Status::ok(); }
  size_t state_bytes() const override { return 0; }

  // The tree for one request (exposed for tests).
  std::vector<DraftToken> propose_tree(const ProposeRequest& request) const;

 private:
  // The token a drafter ranks at `rank` (0: first) for continuation index `at` under the node numbered salt,
  // and whether it is the true token of that position (rank 0 is the chain's draft).
  int32_t candidate(std::span<const int32_t> oracle, int64_t at, int rank, uint64_t salt, bool* is_truth) const;
  double error_rate_;
  uint64_t seed_;
  int64_t n_vocab_;
};

}  // namespace rwd::spec
