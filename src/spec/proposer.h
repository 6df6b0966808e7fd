// Proposer: what drafts tokens for speculative decoding (DESIGN §6). The engine asks every speculating slot's
// proposer for up to max_draft tokens before the target's verify forward, and tells it afterwards how many of
// the verified tokens the target kept, so proposers with their own state (a draft model, the MTP block) can
// roll back to match. Proposers never touch the target's recurrent state.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sampling/sampling_params.h"
#include "spec/verify.h"

namespace rwd::spec {

struct ProposeRequest {
  int slot = 0;
  std::span<const int32_t> tokens;  // the slot's sequence; the last token is not yet in the target's state
  int max_draft = 0;  // tokens of a chain, or the depth of a tree
  // Tree drafts (proposers that branch): at most this many tokens in all, at most tree_topk children of a
  // node; 0: a chain of max_draft tokens.
  int max_nodes = 0;
  int tree_topk = 0;
  // What the policy expects to pay, for proposers that branch off their chain (a draft model, MTP):
  // alternatives[d] of them at depth d + 1 (within max_nodes; MTP spends the rest below them). Empty: the
  // proposer's own choice.
  std::vector<int> alternatives;
  const sampling::SamplingParams* sampling = nullptr;  // the slot's target sampling (greedy when temperature 0)
  int64_t n_prompt = 0;
  std::span<const int32_t> oracle;  // the oracle proposer's known continuation after the prompt
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string_view name() const = 0;

  // A new request starts in the slot and its first n_kept tokens are in the target's state already (prompt
  // reuse; 0: a new sequence). kept_from_slot: they are the first n_kept of the slot's previous sequence, so
  // the proposer keeps what it holds of them and drops the rest; otherwise the target's rows came from an
  // archive of another sequence and nothing the proposer holds for the slot is of this one.
  virtual void start_sequence(int slot, int64_t n_kept, bool kept_from_slot) = 0;

  // Work owed before the next propose that does not come with every round: a draft model's or the MTP block's
  // catch-up on tokens the target decoded without it (the prompt, steps decoded plainly while speculation was
  // off). The engine calls it after each prompt chunk the target ran (the tokens are the sequence so far) and
  // before each propose, and leaves it out of the proposer cost it measures per draft length, which would
  // otherwise charge a whole prompt to the one length that happened to draft first, and rule that length out.
  virtual Status catch_up(std::span<const ProposeRequest>) { return Status::ok(); }
  // The most rows one catch-up feeds for a slot however many are owed (a proposer that drops older ones).
  virtual int64_t max_catch_up_rows() const { return std::numeric_limits<int64_t>::max(); }

  // Fills drafts[i] for requests[i] with at most max_draft tokens (possibly none), or with a tree of at most
  // max_nodes tokens and depth max_draft when the request asks for one and the proposer branches (DraftToken
  // parents, depth-first order).
  virtual Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) = 0;

  // The target ran a run of the slot's tokens from first_position and keeps n_kept of them, the slot's tokens
  // from first_position on; hidden holds their output-normed hidden rows in that order, [n_kept, n_embd]. The
  // first n_as_run of them are the run's own first tokens in batch order: all of them after a chain; after a
  // tree, the newest token and the drafts up to where the kept path leaves the draft's first path (the chain
  // the proposer drafted), so a proposer that ran its chain keeps only what the target kept of it.
  virtual Status on_target_forward(int slot, int64_t first_position, int64_t n_kept, int64_t n_as_run,
                                   const float* hidden) = 0;

  // Whether a tree's alternatives may have children of their own (an n-gram trie follows an older occurrence
  // on from where it parts from the first path; MTP runs its block on an alternative's row; the oracle grows
  // any node), or stay leaves beside the chain (a draft model hangs its runners-up).
  virtual bool branches_continue() const { return false; }

  // Bytes of state the proposer holds (a draft model's KV and recurrent state, records, copies).
  virtual size_t state_bytes() const = 0;
};

}  // namespace rwd::spec
