// Draft-model proposer: a second, smaller GGUF model with the target's vocabulary, with its own slots and
// state. Each round it catches up on the tokens the target accepted, then drafts by decoding one token at a
// time (all speculating slots share each forward). Its drafting runs inside its own transaction, so when the
// target rejects part of the draft the draft model rolls back with the same policies as the target — a
// hybrid draft model needs that as much as the target does.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "spec/proposer.h"
#include "state/model_state.h"

namespace rwd::spec {

struct DraftModelOptions {
  std::string path;
  int n_slots = 1;
  int64_t n_ctx = 0;
  int64_t n_batch = 512;
  int max_draft = 8;
  state::RollbackPolicy policy = state::RollbackPolicy::replay;
  // > 0: the draft scores only ids below this (the frequent ids of a BPE vocabulary) in rounds whose slots'
  // recent tokens mostly lie there; 0: every id; kAutoVocab: kFrequentIds for vocabularies over kLargeVocab.
  int64_t vocab = 0;
  static constexpr int64_t kAutoVocab = -1;
  // Qwen2.5's 151,936-row output matrix is a third of what its 0.5B model reads per token; its first 32768 ids
  // cover all but a few percent of code and English text (scripts/pair_bench.py, four runs: acceptance 74-82 % with
  // them against 73-92 % with every id on code), as FR-Spec and EAGLE-3's reduced draft vocabularies found for
  // Llama 3.
  static constexpr int64_t kLargeVocab = 65536;
  static constexpr int64_t kFrequentIds = 32768;
  // Sorted ids the choice of vocabulary does not count: the target's control tokens (a chat template's
  // markers, Qwen's at ids 151643 and up), which are not text the draft predicts.
  std::vector<int32_t> control_ids;
};

// The number of logit rows a draft round scores: frequent_ids while at most one in kMaxOutsideShare of the text
// tokens (those not in control_ids) among each drafting slot's last kRecentTokens tokens lies at or above it,
// else n_vocab. A token the draft cannot score is a rejected draft; at the pair's costs (a draft token 0.42 of
// a target step with every row, 0.30 with the first 32768) the smaller head stops paying when about one token in
// eight lies outside it.
int64_t round_logit_vocab(std::span<const std::span<const int32_t>> recent_tokens, int64_t frequent_ids,
                          int64_t n_vocab, std::span<const int32_t> control_ids);
inline constexpr int64_t kRecentTokens = 256;
inline constexpr int64_t kMaxOutsideShare = 8;

class DraftModelProposer final : public Proposer {
 public:
  // Fails when the file does not load or its vocabulary differs from the target's (n_vocab given).
  static Result<std::unique_ptr<DraftModelProposer>> create(const DraftModelOptions& options, int64_t target_n_vocab,
                                                            ThreadPool& pool);

  std::string_view name() const override { return "draft"; }
  void start_sequence(int slot, int64_t n_kept, bool kept_from_slot) override;
  Status catch_up(std::span<const ProposeRequest> requests) override;
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int slot, int64_t first_position, int64_t n_kept, int64_t n_as_run,
                           const float* hidden) override;
  size_t state_bytes() const override;

 private:
  struct SlotState {
    int64_t n_done = 0;  // tokens of the sequence in the draft model's committed state
    std::optional<state::Transaction> txn;
    std::optional<sampling::Sampler> sampler;  // for stochastic targets: the draft's own q
  };

  DraftModelProposer(const DraftModelOptions& options, ThreadPool& pool) : options_(options), pool_(pool) {}
  DraftToken pick(SlotState& slot, const ProposeRequest& request, const float* logits);
  // Runs the request's plain tokens through the draft model, in chunks of at most n_batch, until at most
  // `left` of them remain before the newest token.
  Status catch_up_until(const ProposeRequest& request, int64_t left);
  // One forward with logits on a scratch state: every weight read once before the first timed round.
  Status warm_up();

  DraftModelOptions options_;
  ThreadPool& pool_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<state::ModelState> state_;
  std::unique_ptr<model::ForwardContext> forward_;
  int64_t frequent_ids_ = 0;  // the resolved DraftModelOptions::vocab; 0: every round scores every id
  std::vector<SlotState> slots_;
  model::Batch batch_;
  std::vector<float> logits_;
};

}  // namespace rwd::spec
