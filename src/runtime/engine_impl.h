// EngineImpl: the Engine of the public API. One step = schedule (a token budget over busy slots: prompt
// chunks, single decode tokens, verify runs of a token and its draft) → forward → sample or verify → emit.
// Requests beyond the slots wait in a queue. Its parts, one job each: engine_impl.cpp (opening, requests, the
// step, emission), prompt_reuse.cpp (how a request starts in a slot and what the prompt cache keeps),
// speculation.cpp (drafts, verification and its statistics, what a round cost the policy).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "rewind/engine.h"
#include "runtime/prompt_cache.h"
#include "runtime/slot.h"
#include "spec/policy.h"
#include "spec/proposer.h"
#include "spec/verify.h"
#include "state/model_state.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rwd::runtime {

// The sampler's parameters for a request's.
sampling::SamplingParams to_sampling_params(const SamplingParams& params);

class EngineImpl final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options);

  const ModelInfo& info() const override { return info_; }
  Result<std::vector<int32_t>> tokenize(const std::string& text, bool add_bos, bool parse_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  Result<std::string> format_chat(const std::vector<ChatMessage>& messages) const override;
  Result<std::vector<int32_t>> tokenize_chat(const std::vector<ChatMessage>& messages) const override;
  bool add_bos_default() const override;

  Result<int64_t> submit(Request request, std::function<void(const TokenEvent&)> on_token) override;
  Status step() override;
  bool idle() const override;
  void cancel(int64_t request_id) override;
  RequestTimings timings(int64_t request_id) const override;
  StateReport state_report() const override;
  EngineStatus status() const override;

 private:
  struct Pending {
    int64_t id;
    Request request;
    std::function<void(const TokenEvent&)> on_token;
  };

  // How a request starts in a slot: the prefix of its prompt it takes from the slot's state (or a checkpoint).
  struct ReusePlan {
    enum class Kind {
      fresh,     // nothing: the slot is reset
      extend,    // the slot's whole state (its tokens are a prefix of the prompt)
      truncate,  // the first n_kept of the slot's tokens (no recurrent layers: shortening the KV is free)
      rewind,    // the slot's state rewound to n_kept (the divergence is within its rewind ring)
      restore,   // KV rows of the prefix from the slot or an archive, and a checkpoint's recurrent state
    };
    Kind kind = Kind::fresh;
    int64_t n_kept = 0;
    const PromptCache::Entry* checkpoint = nullptr;  // the recurrent state restored (null without recurrent layers)
    const PromptCache::Entry* kv_source = nullptr;   // an archive whose KV rows are copied in (null: the slot's own)
    bool foreign = false;  // the kept tokens are not the slot's own: they come from another slot's sequence
  };

  EngineImpl() = default;
  Status validate_request_spec(const RequestSpec& spec) const;
  // `cached`: what the prompt cache holds for the request's prompt (empty without a cache).
  ReusePlan plan_reuse(const Slot& slot, const Request& request, const PromptCache::Matches& cached) const;
  // The prompt-cache plan for a slot whose tokens agree with the prompt on n_common: a checkpoint's state with
  // the slot's own KV rows, or an archive's.
  ReusePlan plan_restore(std::span<const int32_t> prompt, int64_t n_common, const PromptCache::Matches& cached) const;
  // The chat template, or why there is none; warns once when it is a fallback.
  Result<const tokenizer::ChatTemplate*> chat_template() const;
  void start_request(Slot& slot, Pending next, const ReusePlan& plan);
  // A prompt-cache entry of a slot's computed tokens: their recurrent state, and with_kv their KV rows too
  // (an archive of the whole sequence, taken before another request overwrites it).
  PromptCache::Entry cache_entry(Slot& slot, bool with_kv);
  // After a prompt chunk: a checkpoint at the prompt's end, and every checkpoint_every tokens of a long one.
  void maybe_save_checkpoint(Slot& slot);
  Status follow_prompt(const Slot& slot);
  // What the proposer is told of a slot: its first n_tokens tokens, the rest of the request's settings.
  spec::ProposeRequest propose_request(const Slot& slot, int64_t n_tokens, const spec::DraftShape& shape) const;
  // The slot's tree budget: its request's, or the engine's (0: chains).
  int tree_nodes(const Slot& slot) const;
  void assign_pending();
  void finish(Slot& slot, FinishReason reason, const std::string& error = {});
  // Ends a slot's request with an error at a stage of the step; its state, which the failure may have left
  // half-written, is reset, and the other slots go on.
  void fail(Slot& slot, std::string_view stage, const Status& status);
  Status injected_fault(const Slot& slot, std::string_view stage) const;
  void handle_logits(Slot& slot, const float* logits);
  // One run of a slot in this step's batch: plain tokens (a prompt chunk, a decode token, or a re-run after
  // a checkpoint restore) and, when it speculates, the transaction's tokens: the newest token and its draft.
  struct SlotRun {
    int slot = 0;
    int64_t first_position = 0;
    int64_t n_tokens = 0;
    int64_t logit_row = -1;  // first logit row of the run, -1 when it asks for none
    std::vector<spec::DraftToken> draft;
    std::optional<state::Transaction> txn;
    bool proposed = false;  // the proposer was asked for a draft (it may have made none)
    int64_t owed_rows = 0;  // tokens the proposer caught up on for this slot before drafting
    int n_emitted = 0;      // tokens a speculative round emitted
  };
  // Decode steps after a prompt that run cold (caches still full of the prompt): neither they nor their
  // proposer calls are timed for the policy.
  static constexpr int64_t kColdSteps = 2;
  void schedule_decode(std::vector<SlotRun>& runs, int64_t& budget);
  // Times plain steps and rejected verify rounds of every draft length on empty slots before the first request
  // (one slot with the proposer drafting each round, and all slots together), then resets those slots: the
  // policy's first decisions then rest on warm timings rather than on first ones, which carry one-time work
  // (MTP's first 2-token draft on the trained hybrid took 359 µs against 180 later), or on guesses.
  Status calibrate_costs();
  // SpecOptions::assumed_verify_token: the policy's costs are set once, here, and never timed.
  bool assumed_costs() const { return options_.spec.assumed_verify_token > 0.0; }
  void assume_costs();
  // Tells each slot that asked for a draft what its round cost against a plain step of the same slots: the
  // median forward of the batch's size and proposer call of the draft's, and its share of the catch-up.
  void settle_rounds(const std::vector<SlotRun>& runs);
  Status finish_spec_run(Slot& slot, SlotRun& run);
  void emit(Slot& slot, int32_t token, const float* logits_row);
  void fill_spec_stats(Slot& slot);

  EngineOptions options_;
  ModelInfo info_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  // The chat template chosen at open (the file's, --chat-template's, or a fallback), or why there is none.
  std::optional<tokenizer::ChatTemplate> chat_template_;
  Status chat_template_status_;
  std::string chat_template_warning_;  // said once, at the first chat formatted (a fallback was chosen)
  mutable std::once_flag chat_template_warned_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<state::ModelState> state_;
  std::unique_ptr<model::ForwardContext> forward_;
  std::vector<Slot> slots_;
  std::deque<Pending> pending_;
  std::map<int64_t, RequestTimings> finished_timings_;
  int64_t next_request_id_ = 1;
  model::Batch batch_;
  std::vector<float> logits_;
  std::vector<float> logprob_scratch_;
  std::unique_ptr<spec::Proposer> proposer_;
  spec::CostModel cost_;
  spec::ProposerCost proposer_cost_;
  int64_t speculative_steps_since_plain_ = 0;  // decode steps with a draft since the last fully plain one
  // This step's proposer call and the catch-up before it; the longest draft made.
  double propose_seconds_ = 0.0;
  double catch_up_seconds_ = 0.0;
  bool resuming_ = false;
  // Slots that drafted in the last step any did (0 before one did: all are expected to), which the policy
  // expects to share the next round's cost.
  int64_t drafting_slots_ = 0;  // a slot's catch-up covered a run of plain steps (DraftPolicy::steady_owed_rows)
  size_t longest_draft_ = 0;
  int64_t run_first_row_ = 0;                 // batch row of the run being finished
  std::vector<float> kept_hidden_;            // a tree run's kept rows of hidden, for the proposer
  std::unique_ptr<PromptCache> prompt_cache_;  // with cache_ram_mib
  uint64_t n_assigned_ = 0;                   // requests given a slot so far (the slots' LRU clock)
};

}  // namespace rwd::runtime
