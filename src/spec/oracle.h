// Oracle proposer, for measurements and tests: drafts a known continuation of the prompt (typically the
// target's own greedy output from an earlier run) with each drafted token replaced by a wrong one with a set
// probability, so acceptance can be dialled in without a real draft model. Errors are a fixed function of
// (seed, position), so runs are repeatable.
#pragma once

#include "spec/proposer.h"

namespace rwd::spec {

class OracleProposer final : public Proposer {
 public:
  OracleProposer(double error_rate, uint64_t seed, int64_t n_vocab)
      : error_rate_(error_rate), seed_(seed), n_vocab_(n_vocab) {}

  std::string_view name() const override { return "oracle"; }
  void start_sequence(int, int64_t, bool) override {}
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int, int64_t, int64_t, int64_t, const float*) override { return Status::ok(); }
  size_t state_bytes() const override { return 0; }

 private:
  double error_rate_;
  uint64_t seed_;
  int64_t n_vocab_;
};

}  // namespace rwd::spec
