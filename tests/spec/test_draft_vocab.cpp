// The draft model's reduced output vocabulary (--draft-vocab): which rounds score only the frequent ids, and
// that a round scoring every id drafts what a draft model without the option drafts. The engine-level tests
// (test_spec_engine) check that the output stays exact whatever the draft scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "spec/draft_model.h"

namespace rwd::spec {
namespace {

constexpr int64_t kVocab = 512;
constexpr int64_t kFrequent = 100;

int64_t for_slots(const std::vector<std::vector<int32_t>>& slots, int64_t frequent_ids = kFrequent,
                  const std::vector<int32_t>& control_ids = {}) {
  std::vector<std::span<const int32_t>> spans(slots.begin(), slots.end());
  return round_logit_vocab(spans, frequent_ids, kVocab, control_ids);
}

// n tokens, the first `outside` of them at or above kFrequent.
std::vector<int32_t> tokens_with_outside(int64_t n, int64_t outside) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(i < outside ? kFrequent + i % 300 : i % kFrequent);
  return tokens;
}

TEST(DraftVocabulary, RoundsScoreTheFrequentIdsWhileAtMostOneRecentTokenInEightLiesOutside) {
  static_assert(kRecentTokens == 256 && kMaxOutsideShare == 8, "the cases below count one token in eight of 256");
  EXPECT_EQ(for_slots({tokens_with_outside(256, 0)}), kFrequent);
  EXPECT_EQ(for_slots({tokens_with_outside(256, 32)}), kFrequent);  // exactly one in eight
  EXPECT_EQ(for_slots({tokens_with_outside(256, 33)}), kVocab);
  EXPECT_EQ(for_slots({tokens_with_outside(8, 1)}), kFrequent);  // short sequences: the share of what there is
  EXPECT_EQ(for_slots({tokens_with_outside(8, 2)}), kVocab);
  EXPECT_EQ(for_slots({{kFrequent - 1}}), kFrequent);  // the boundary: ids below frequent_ids are inside
  EXPECT_EQ(for_slots({{kFrequent}}), kVocab);
  EXPECT_EQ(for_slots({{}}), kFrequent);
  EXPECT_EQ(for_slots({}), kFrequent);
}

TEST(DraftVocabulary, OnlyTheLastTokensOfEachSlotCountAndAnySlotOutsideWidensTheRound) {
  // 200 outside, then 256 inside: the window has moved past them.
  std::vector<int32_t> moved_on = tokens_with_outside(200, 200);
  const std::vector<int32_t> inside = tokens_with_outside(256, 0);
  moved_on.insert(moved_on.end(), inside.begin(), inside.end());
  EXPECT_EQ(for_slots({moved_on}), kFrequent);
  // The other way round: 256 inside, then 40 outside at the end.
  std::vector<int32_t> drifted = inside;
  const std::vector<int32_t> outside = tokens_with_outside(40, 40);
  drifted.insert(drifted.end(), outside.begin(), outside.end());
  EXPECT_EQ(for_slots({drifted}), kVocab);
  EXPECT_EQ(for_slots({inside, drifted}), kVocab);
  EXPECT_EQ(for_slots({inside, moved_on}), kFrequent);
}

// A chat template's markers are control tokens at the end of Qwen's vocabulary: a short chat prompt is mostly
// markers and would otherwise widen its first rounds.
TEST(DraftVocabulary, ControlTokensAreNotCounted) {
  const std::vector<int32_t> control = {2, 500, 501};
  std::vector<int32_t> chat = {500, 10, 11, 12, 501, 500, 13, 14, 501, 500};  // 5 markers, 5 text tokens inside
  EXPECT_EQ(for_slots({chat}, kFrequent), kVocab);
  EXPECT_EQ(for_slots({chat}, kFrequent, control), kFrequent);
  // The share is of the text tokens: 1 outside among 8 is one in eight, 2 among 8 widens.
  chat = {500, 10, 11, 12, 13, 14, 15, 16, 300, 501};
  EXPECT_EQ(for_slots({chat}, kFrequent, control), kFrequent);
  chat.push_back(301);
  EXPECT_EQ(for_slots({chat}, kFrequent, control), kVocab);
  // A control id below frequent_ids is an inside token like any other: 1 outside among 8.
  EXPECT_EQ(for_slots({{2, 2, 2, 2, 2, 2, 2, 300}}, kFrequent, control), kFrequent);
}

TEST(DraftVocabulary, NoReductionScoresEveryIdInEveryRound) {
  EXPECT_EQ(for_slots({tokens_with_outside(256, 0)}, 0), kVocab);
  EXPECT_EQ(for_slots({tokens_with_outside(256, 0)}, kVocab), kVocab);
}

std::string data_path(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/" + name; }

// One greedy 4-token draft of the tiny model for a sequence, from a fresh proposer.
std::vector<int32_t> draft_of(ThreadPool& pool, int64_t vocab, const std::vector<int32_t>& tokens) {
  DraftModelOptions options;
  options.path = data_path("qwen35-tiny-f32.gguf");
  options.n_ctx = 128;
  options.n_batch = 64;
  options.max_draft = 4;
  options.vocab = vocab;
  auto proposer = DraftModelProposer::create(options, kVocab, pool);
  EXPECT_TRUE(proposer.is_ok()) << proposer.status().message();
  if (!proposer.is_ok()) return {};
  ProposeRequest request;
  request.tokens = tokens;
  request.max_draft = 4;
  std::vector<std::vector<DraftToken>> drafts;
  const ProposeRequest requests[] = {request};
  const Status proposed = (*proposer)->propose(requests, drafts);
  EXPECT_TRUE(proposed.is_ok()) << proposed.message();
  std::vector<int32_t> ids;
  if (proposed.is_ok()) {
    for (const DraftToken& token : drafts[0]) ids.push_back(token.id);
  }
  return ids;
}

bool leaves_frequent_ids(const std::vector<int32_t>& draft) {
  return std::any_of(draft.begin(), draft.end(), [](int32_t id) { return id >= kFrequent; });
}

// The tiny model's vocabulary is 512 ids: under kLargeVocab, so auto scores every id, as 0 does. A reduced
// round drafts only ids below its bound, and a round whose text lies outside drafts exactly the full draft.
TEST(DraftVocabulary, ProposerDraftsFromTheRowsItsRoundScores) {
  ThreadPool pool(2);
  int reduced_differs = 0;
  int widened_reaches_out = 0;
  for (int32_t first = 0; first < 480; first += 40) {
    std::vector<int32_t> tokens(32);
    std::iota(tokens.begin(), tokens.end(), first);
    const std::vector<int32_t> full = draft_of(pool, 0, tokens);
    ASSERT_EQ(full.size(), 4u);
    EXPECT_EQ(draft_of(pool, DraftModelOptions::kAutoVocab, tokens), full) << "tokens from " << first;
    const std::vector<int32_t> reduced = draft_of(pool, kFrequent, tokens);
    if (first + 32 <= kFrequent) {
      EXPECT_FALSE(leaves_frequent_ids(reduced)) << "tokens from " << first;
      reduced_differs += leaves_frequent_ids(full) && reduced != full;
    } else if (first >= kFrequent) {
      EXPECT_EQ(reduced, full) << "tokens from " << first;
      widened_reaches_out += leaves_frequent_ids(full);
    }
  }
  // The random model's drafts do leave the first 100 ids, so the two cases above are not vacuous.
  EXPECT_GT(reduced_differs, 0);
  EXPECT_GT(widened_reaches_out, 0);
}

}  // namespace
}  // namespace rwd::spec
