// MTP proposer: the target's own next-token-prediction block(s) from the GGUF (Qwen3.5 / Qwen3-Next
// "nextn" layers). Row (token t(p+1), trunk hidden h(p)) at position p predicts t(p+2); chaining the block's
// own hidden output drafts further tokens. The block's attention KV rows live in the target's state beside
// the trunk's; it has no recurrent layers, so drafting never touches the trunk's recurrent state. Every
// kept trunk position is fed to the block once (catch-up), so its KV matches the sequence; rows it wrote
// while chaining are overwritten by the next catch-up, which is how its attention rolls back.
// Asked for a tree, it drafts its chain and grows the tree on best first by the block's own probabilities
// (spec/draft_tree.h TreeGrowth): alternatives where the block is unsure, continued below them by running the
// block on their rows. The block is one layer and a head, against the target's many layers per verified node;
// the policy weighs the forwards a tree adds (they are priced by draft size).
#pragma once

#include <optional>
#include <vector>

#include "model/forward_context.h"
#include "model/model.h"
#include "spec/draft_tree.h"
#include "spec/proposer.h"
#include "state/model_state.h"

namespace rwd::spec {

class MtpProposer final : public Proposer {
 public:
  // Fails when the model has no MTP block.
  static Result<std::unique_ptr<MtpProposer>> create(const model::Model& model, model::ForwardContext& forward,
                                                     state::ModelState& state, int64_t n_batch);

  std::string_view name() const override { return "mtp"; }
  void start_sequence(int slot, int64_t n_kept, bool kept_from_slot) override;
  // Feeds the block every kept row but a round's own (the newest token's and those of the draft before it), so
  // a prompt or a run of plain steps is not charged to the next draft's length: of a prompt, its last
  // kPromptWindow rows; of a run of plain steps, its last kResumeWindow. The block's KV rows before them keep
  // what they held (another sequence's rows, or zeros): the drafts may differ from those of a block fed
  // everything, the verified output cannot. On the trained hybrid (models/, 8 held-out prompts of ~320 tokens,
  // fixed drafts, 128 tokens) acceptance at k = 1 was 81.2 % with the last 32 prompt rows fed and 81.7 % with
  // the last 4 (k = 3: 62.3 and 61.2 %), while the full prompt pass added 5 ms to a 28 ms time to first token;
  // over the first 12 tokens alone it was 63.5 % with every prompt row, 60.4 % with 64, 56.4 % with 8 (50
  // drafts each). So a prompt costs the block 16 rows, and resuming after plain steps no more than a round's
  // own catch-up: speculation that stopped can start again without paying for the steps it sat out.
  static constexpr int64_t kPromptWindow = 16;
  static constexpr int64_t kResumeWindow = 4;
  Status catch_up(std::span<const ProposeRequest> requests) override;
  int64_t max_catch_up_rows() const override { return kResumeWindow; }
  Status propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) override;
  Status on_target_forward(int slot, int64_t first_position, int64_t n_kept, int64_t n_as_run,
                           const float* hidden) override;
  bool branches_continue() const override { return true; }
  size_t state_bytes() const override;

 private:
  struct SlotState {
    int64_t n_fed = 0;            // positions p whose row (t(p+1), h(p)) the block has processed
    int64_t hidden_first = 0;     // position of the first row in hidden
    std::vector<float> hidden;    // trunk hidden rows kept since, [n, n_embd]
  };

  MtpProposer(const model::Model& model, model::ForwardContext& forward, state::ModelState& state, int64_t n_batch)
      : model_(model), forward_(forward), state_(state), n_batch_(n_batch) {}
  // Whether the slot holds the trunk rows from its next unfed position up to the request's last token.
  Status check_rows(const ProposeRequest& request) const;
  // Feeds the block the rows of requests[r]'s slot from its next unfed position up to until[r] (not included),
  // for each r of `feeding`, in forwards of up to n_batch rows shared by the slots, and drops the trunk rows it
  // used. With logits_at_end a slot's last row asks for logits, and finished(r, its logit row, its batch row)
  // runs after the forward that ran it, while logits_ and hidden_out_ hold that forward's.
  template <typename Finished>
  Status feed(std::span<const ProposeRequest> requests, std::vector<size_t> feeding, std::span<const int64_t> until,
              bool logits_at_end, Finished finished);
  // Grows the trees of requests[growing[i]] from their root logits (given to trees[...] already) and the block's
  // output hidden of the row before each tree, first_hidden[request].
  Status grow_trees(std::span<const ProposeRequest> requests, std::span<const size_t> growing,
                    std::vector<std::optional<TreeGrowth>>& trees,
                    const std::vector<std::vector<float>>& first_hidden);

  const model::Model& model_;
  model::ForwardContext& forward_;
  state::ModelState& state_;
  int64_t n_batch_;
  std::vector<SlotState> slots_;
  model::Batch batch_;
  std::vector<float> logits_;
  std::vector<float> hidden_in_;
  std::vector<float> hidden_out_;
};

}  // namespace rwd::spec
