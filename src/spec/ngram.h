// Prompt lookup (n-gram) proposer: finds the most recent earlier occurrence of the sequence's last n tokens
// (n from ngram_max down to ngram_min) in the slot's own prompt and output, and drafts the tokens that
// followed it. Free to run and strong on rewriting, summarising and code editing, where output repeats input.
// Asked for a tree, it merges the continuations of several earlier occurrences into one (a trie), the chain's
// continuation first and whole, so a tree holds the chain it replaces and adds the alternatives the text has.
#pragma once

#include "spec/proposer.h"

namespace rwd::spec {

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}

  std::string_view name() const override { return "ngram"; }
  bool branches_continue() const override { return true; }
  void start_sequence(int, int64_t, bool) override {}
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int, int64_t, int64_t, int64_t, const float*) override { return Status::ok(); }
  size_t state_bytes() const override { return 0; }

  // The lookup for one sequence (exposed for tests).
  static std::vector<int32_t> lookup(std::span<const int32_t> tokens, int ngram_min, int ngram_max, int max_draft);
  // The tree lookup: continuations of every earlier occurrence of the suffix (longest n first, most recent first
  // within an n), merged into a trie of at most max_nodes tokens, depth max_draft, max_topk children per
  // node, in depth-first order; the first continuation is lookup()'s.
  static std::vector<DraftToken> lookup_tree(std::span<const int32_t> tokens, int ngram_min, int ngram_max,
                                             int max_draft, int max_nodes, int max_topk);

 private:
  int ngram_min_;
  int ngram_max_;
};

}  // namespace rwd::spec
