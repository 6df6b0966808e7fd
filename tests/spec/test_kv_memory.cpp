// KV memory follows use: a 32k-position context with 4 slots allocates KV rows only as requests fill them, and
// outputs do not depend on when the rows grew (the same prompt prefilled in one batch, in chunks of 7 tokens
// and token by token, with growth landing at different steps, gives bit-identical logprobs). The same holds
// for every KV cache type, and so does speculation (n-gram drafts verified in batches give plain decoding's
// logprobs bit for bit); f16 rows take half the bytes of f32 and stay close to its logprobs.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/engine_steps.h"
#include "rewind/engine.h"

namespace rwd {
namespace {

std::unique_ptr<Engine> open(int n_slots, int n_ctx, int n_batch, const std::string& cache_type = "f32",
                             const std::string& spec = "none") {
  EngineOptions options;
  options.cache_type_k = cache_type;
  options.cache_type_v = cache_type;
  options.spec.mode = spec;
  options.model_path = std::string(REWIND_TEST_DATA) + "/qwen35-tiny-f32.gguf";
  options.n_threads = 2;
  options.n_slots = n_slots;
  options.n_ctx = n_ctx;
  options.n_batch = n_batch;
  return test::open_engine(options);
}

struct Output {
  std::vector<int32_t> ids;
  std::vector<std::vector<TokenLogprob>> top;
};

Output generate(Engine& engine, const std::vector<int32_t>& prompt, int max_tokens) {
  Request request;
  request.prompt_ids = prompt;
  request.max_tokens = max_tokens;
  request.sampling.temperature = 0.0f;
  request.ignore_eos = true;
  request.top_logprobs = 4;
  Output out;
  auto id = engine.submit(request, [&out](const TokenEvent& event) {
    if (event.token < 0) return;
    out.ids.push_back(event.token);
    out.top.push_back(event.top);
  });
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  if (id) test::step_until_idle(engine);
  return out;
}

std::vector<int32_t> prompt_of(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(32 + (i * 37 + i / 5) % 90);
  return ids;
}

TEST(KvMemory, LongContextAllocatesOnlyWhatSlotsHold) {
  constexpr int kContext = 32768;
  const auto engine = open(4, kContext, 512);
  ASSERT_NE(engine, nullptr);
  const size_t full = engine->info().kv_bytes_per_slot * 4;
  EXPECT_GT(full, 0u);
  EXPECT_EQ(engine->state_report().kv, 0u) << "KV allocated before any token";
  generate(*engine, prompt_of(300), 20);
  const size_t used = engine->state_report().kv;
  // One slot's 320 positions: its attention layer holds 512 rows, at most 1/64 of one slot's full context (the
  // MTP layer's rows are never written without MTP drafting).
  EXPECT_GT(used, 0u);
  EXPECT_LE(used, engine->info().kv_bytes_per_slot / (kContext / 512));
}

void expect_same_outputs(const Output& got, const Output& expected, const std::string& what) {
  EXPECT_EQ(got.ids, expected.ids) << what;
  ASSERT_EQ(got.top.size(), expected.top.size()) << what;
  for (size_t t = 0; t < got.top.size(); ++t) {
    ASSERT_EQ(got.top[t].size(), expected.top[t].size()) << what;
    for (size_t j = 0; j < got.top[t].size(); ++j) {
      EXPECT_EQ(got.top[t][j].id, expected.top[t][j].id) << what << " token " << t;
      EXPECT_EQ(std::memcmp(&got.top[t][j].logprob, &expected.top[t][j].logprob, sizeof(float)), 0)
          << what << " token " << t << " rank " << j;
    }
  }
}

class KvTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(KvTypes, OutputsDoNotDependOnWhenRowsGrewOrHowTheyWereBatched) {
  const std::vector<int32_t> prompt = prompt_of(700);  // through 256 and 512 rows during prefill
  const auto whole = open(1, 4096, 1024, GetParam());
  ASSERT_NE(whole, nullptr);
  const Output expected = generate(*whole, prompt, 340);  // decoding through 1024 rows
  ASSERT_EQ(expected.ids.size(), 340u);
  for (const int n_batch : {7, 1}) {
    const auto engine = open(1, 4096, n_batch, GetParam());
    ASSERT_NE(engine, nullptr);
    expect_same_outputs(generate(*engine, prompt, 340), expected, "n_batch " + std::to_string(n_batch));
  }
}

TEST_P(KvTypes, SpeculationGivesPlainDecoding) {
  // A repeating prompt, so that n-gram drafts are found and verified in batches.
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(40 + i % 13);
  const auto plain = open(1, 1024, 64, GetParam());
  const auto speculative = open(1, 1024, 64, GetParam(), "ngram");
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(speculative, nullptr);
  expect_same_outputs(generate(*speculative, prompt, 120), generate(*plain, prompt, 120), "ngram");
}

std::string type_name(const ::testing::TestParamInfo<std::string>& param) { return param.param; }

INSTANTIATE_TEST_SUITE_P(Cache, KvTypes, ::testing::Values("f32", "f16", "q8_0"), type_name);

TEST(KvMemory, F16RowsTakeHalfTheBytesAndStayCloseToF32) {
  const std::vector<int32_t> prompt = prompt_of(300);
  const auto f32 = open(2, 2048, 512, "f32");
  const auto f16 = open(2, 2048, 512, "f16");
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(f16, nullptr);
  const Output exact = generate(*f32, prompt, 16);
  const Output rounded = generate(*f16, prompt, 16);
  EXPECT_EQ(f16->state_report().kv * 2, f32->state_report().kv);
  EXPECT_EQ(f16->info().kv_bytes_per_slot * 2, f32->info().kv_bytes_per_slot);
  // The first token's distribution: keys and values rounded to 11 significant bits move logprobs little (two
  // near-equal candidates may swap ranks, so ids are matched, not ranks).
  ASSERT_FALSE(exact.top.empty());
  ASSERT_FALSE(rounded.top.empty());
  int n_matched = 0;
  for (const TokenLogprob& want : exact.top[0]) {
    for (const TokenLogprob& got : rounded.top[0]) {
      if (got.id != want.id) continue;
      EXPECT_NEAR(got.logprob, want.logprob, 1e-2) << "token " << want.id;
      ++n_matched;
    }
  }
  EXPECT_GE(n_matched, 3);
}

TEST(KvMemory, UnknownOrUnfitCacheTypesAreRefusedByName) {
  EngineOptions options;
  options.model_path = std::string(REWIND_TEST_DATA) + "/qwen35-tiny-f32.gguf";
  options.cache_type_k = "q4_0";
  auto refused = Engine::open(options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("cache-type-k must be f32, f16 or q8_0, got 'q4_0'"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace rwd
