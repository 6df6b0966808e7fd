// Prompt lookup (n-gram) proposer: finds the most recent earlier occurrence of the sequence's last n tokens
// (n from ngram_max down to ngram_min) in the slot's own prompt and output, and drafts the tokens that
// followed it. Free to run and strong on rewriting, summarising and code editing, where output repeats input.
#pragma once

#include "spec/proposer.h"

namespace rwd::spec {

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}

  std::string_view name() const override { return "ngram"; }
  void start_sequence(int, int64_t, bool) override {}
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int, int64_t, int64_t, int64_t, const float*) override { return Status::ok(); }
  size_t state_bytes() const override { return 0; }

  // The lookup for one sequence (exposed for tests).
  static std::vector<int32_t> lookup(std::span<const int32_t> tokens, int ngram_min, int ngram_max, int max_draft);

 private:
  int ngram_min_;
  int ngram_max_;
};

}  // namespace rwd::spec
