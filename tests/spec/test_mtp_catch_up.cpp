// The MTP proposer's catch-up (the rows of a prompt or of plain steps fed to the block before a round, so that
// the engine does not charge them to the next draft's length) against drafting without it: a slot caught up
// chunk by chunk as the prompt arrives, or in one call before its round, drafts exactly what a slot that fed
// every row inside propose drafts, greedy chains and best-first trees alike, because each row reaches the block
// once, at its own position, whichever call feeds it. A catch-up owed more rows than its window (a prompt's,
// MtpProposer::kPromptWindow; a run of plain steps', kResumeWindow) feeds only the last of them: its drafts
// are those of a block that was never given the rows before.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "spec/mtp.h"
#include "spec/verify.h"
#include "state/model_state.h"

namespace rwd::spec {
namespace {

constexpr int kSlots = 6;
constexpr int64_t kCtx = 128;
constexpr int64_t kProposerBatch = 16;  // below the prompt's length: catch-up runs in several forwards

std::vector<int32_t> prompt_tokens(int64_t n_vocab) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < 75; ++i) tokens.push_back(static_cast<int32_t>((i * 97 + 13) % n_vocab));
  return tokens;
}

std::vector<int32_t> ids_of(const std::vector<DraftToken>& draft) {
  std::vector<int32_t> ids;
  for (const DraftToken& token : draft) ids.push_back(token.id);
  return ids;
}

struct Fixture {
  std::unique_ptr<model::Model> model;
  ThreadPool pool{2};
  std::unique_ptr<model::ForwardContext> target;
  std::unique_ptr<state::ModelState> state;
  std::unique_ptr<MtpProposer> mtp;
};

void load(Fixture& f) {
  const std::string path = (std::filesystem::path(REWIND_TEST_DATA) / "qwen35-tiny-f32.gguf").string();
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  f.model = std::move(*model);
  f.target = std::make_unique<model::ForwardContext>(*f.model, f.pool, kCtx);
  f.state = std::make_unique<state::ModelState>(f.model->kv_specs(), f.model->recurrent_specs(), kSlots, kCtx);
  auto mtp = MtpProposer::create(*f.model, *f.target, *f.state, kProposerBatch);
  ASSERT_TRUE(mtp.is_ok()) << mtp.status().message();
  f.mtp = std::move(*mtp);
}

// The target runs tokens[begin, end) of the slot and hands the proposer their hidden rows.
void run_target(Fixture& f, int slot, const std::vector<int32_t>& tokens, int64_t begin, int64_t end) {
  model::Batch batch;
  for (int64_t p = begin; p < end; ++p) batch.add(tokens[p], static_cast<int32_t>(p), slot, p == end - 1);
  std::vector<float> logits;
  ASSERT_TRUE(f.target->forward(batch, *f.state, logits).is_ok());
  ASSERT_TRUE(f.mtp->on_target_forward(slot, begin, end - begin, end - begin, f.target->hidden_rows()).is_ok());
}

ProposeRequest request_for(int slot, const std::vector<int32_t>& tokens, int max_draft, int max_nodes,
                           int64_t n_prompt) {
  ProposeRequest request;
  request.slot = slot;
  request.tokens = tokens;
  request.n_prompt = n_prompt;
  request.max_draft = max_draft;
  request.max_nodes = max_nodes;
  request.tree_topk = max_nodes > 0 ? 3 : 0;
  return request;
}

TEST(MtpCatchUp, DraftsAreThoseOfFeedingEveryRowInPropose) {
  constexpr int kMaxDraft = 4;
  for (const int max_nodes : {0, 9}) {
    SCOPED_TRACE(max_nodes > 0 ? "tree" : "chain");
    Fixture f;
    load(f);
    const std::vector<int32_t> tokens = prompt_tokens(f.model->hparams().n_vocab);
    const int64_t n = static_cast<int64_t>(tokens.size());
    // What one catch-up before the round leaves unfed: the newest token's row and the draft's before it. Slots
    // 1 and 4 are owed the whole sequence in one catch-up, as a prompt (n_prompt = n) and as the plain steps
    // after a 10-token prompt.
    const int64_t prompt_window_start = n - 2 - kMaxDraft - MtpProposer::kPromptWindow;
    const int64_t resume_window_start = n - 2 - kMaxDraft - MtpProposer::kResumeWindow;
    constexpr int64_t kShortPrompt = 10;
    for (int slot = 0; slot < kSlots; ++slot) f.mtp->start_sequence(slot, 0, false);
    // Slot 0 follows the prompt in chunks of 13, catching up after each, as the engine does with a prompt.
    for (int64_t begin = 0; begin < n; begin += 13) {
      const int64_t end = std::min(n, begin + 13);
      run_target(f, 0, tokens, begin, end);
      const std::vector<int32_t> so_far(tokens.begin(), tokens.begin() + end);
      ASSERT_TRUE(f.mtp->catch_up(std::vector<ProposeRequest>{request_for(0, so_far, kMaxDraft, 0, n)}).is_ok());
    }
    // Slots 1 and 4 run the sequence in one piece and are caught up twice before their round (the first feeds
    // the window, the second finds nothing owed); slot 2 feeds every row inside propose; slots 3 and 5 give
    // the block only the rows from the windows' starts, inside propose.
    for (int slot : {1, 2, 4}) run_target(f, slot, tokens, 0, n);
    for (const auto& [slot, start] : {std::pair{3, prompt_window_start}, std::pair{5, resume_window_start}}) {
      run_target(f, slot, tokens, 0, start);
      f.mtp->start_sequence(slot, start, false);
      run_target(f, slot, tokens, start, n);
    }
    for (int call = 0; call < 2; ++call) {
      for (const auto& [slot, n_prompt] : {std::pair{1, n}, std::pair{4, kShortPrompt}}) {
        ASSERT_TRUE(f.mtp->catch_up(std::vector<ProposeRequest>{request_for(slot, tokens, kMaxDraft, max_nodes,
                                                                             n_prompt)})
                        .is_ok());
      }
    }
    std::vector<std::vector<DraftToken>> drafts;
    std::vector<ProposeRequest> requests;
    for (int slot = 0; slot < kSlots; ++slot) {
      requests.push_back(request_for(slot, tokens, kMaxDraft, max_nodes, slot == 4 ? kShortPrompt : n));
    }
    ASSERT_TRUE(f.mtp->propose(requests, drafts).is_ok());
    ASSERT_EQ(drafts.size(), static_cast<size_t>(kSlots));
    ASSERT_EQ(drafts[2].size(), max_nodes > 0 ? 9u : 4u);
    for (const auto& [windowed, reference] : {std::pair{0, 2}, std::pair{1, 3}, std::pair{4, 5}}) {
      SCOPED_TRACE(testing::Message() << "slot " << windowed << " against slot " << reference);
      EXPECT_EQ(ids_of(drafts[windowed]), ids_of(drafts[reference]));
      for (size_t i = 0; i < drafts[reference].size(); ++i) {
        EXPECT_EQ(draft_parent(drafts[windowed], i), draft_parent(drafts[reference], i)) << "node " << i;
      }
    }
  }
}

TEST(MtpCatchUp, MissingTrunkRowsAreNamed) {
  Fixture f;
  load(f);
  const std::vector<int32_t> tokens = prompt_tokens(f.model->hparams().n_vocab);
  f.mtp->start_sequence(0, 0, false);
  run_target(f, 0, tokens, 0, 20);  // the proposer holds rows 0..19 only
  const Status status = f.mtp->catch_up(std::vector<ProposeRequest>{request_for(0, tokens, 4, 0, 0)});
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("lacks trunk hidden rows"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace rwd::spec
