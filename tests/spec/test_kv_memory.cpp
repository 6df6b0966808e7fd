// KV memory follows use: a 32k-position context with 4 slots allocates KV rows only as requests fill them, and
// outputs do not depend on when the rows grew (the same prompt prefilled in one batch, in chunks of 7 tokens
// and token by token, with growth landing at different steps, gives bit-identical logprobs).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rewind/engine.h"

namespace rwd {
namespace {

std::unique_ptr<Engine> open(int n_slots, int n_ctx, int n_batch) {
  EngineOptions options;
  options.model_path = std::string(REWIND_TEST_DATA) + "/qwen35-tiny-f32.gguf";
  options.n_threads = 2;
  options.n_slots = n_slots;
  options.n_ctx = n_ctx;
  options.n_batch = n_batch;
  auto engine = Engine::open(options);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  return engine.is_ok() ? std::move(engine).value() : nullptr;
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
  while (id && !engine.idle()) {
    const Status status = engine.step();
    EXPECT_TRUE(status.is_ok()) << status.message();
    if (!status) break;
  }
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

TEST(KvMemory, OutputsDoNotDependOnWhenRowsGrew) {
  const std::vector<int32_t> prompt = prompt_of(700);  // through 256 and 512 rows during prefill
  const auto whole = open(1, 4096, 1024);
  const auto chunked = open(1, 4096, 7);
  const auto token_by_token = open(1, 4096, 1);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(chunked, nullptr);
  ASSERT_NE(token_by_token, nullptr);
  const Output expected = generate(*whole, prompt, 340);  // decoding through 1024 rows
  ASSERT_EQ(expected.ids.size(), 340u);
  for (Engine* engine : {chunked.get(), token_by_token.get()}) {
    const Output got = generate(*engine, prompt, 340);
    EXPECT_EQ(got.ids, expected.ids);
    ASSERT_EQ(got.top.size(), expected.top.size());
    for (size_t t = 0; t < got.top.size(); ++t) {
      ASSERT_EQ(got.top[t].size(), expected.top[t].size());
      for (size_t j = 0; j < got.top[t].size(); ++j) {
        EXPECT_EQ(got.top[t][j].id, expected.top[t][j].id) << "token " << t;
        EXPECT_EQ(std::memcmp(&got.top[t][j].logprob, &expected.top[t][j].logprob, sizeof(float)), 0)
            << "token " << t << " rank " << j;
      }
    }
  }
}

}  // namespace
}  // namespace rwd
