// Prompt reuse through the public Engine: a conversation's requests on one engine, each starting from the
// state an idle slot (or a checkpoint) holds of its prompt, give the same greedy ids and bit-identical
// log-probabilities as the same requests computed from scratch (cache_prompt = false, a fresh server's
// behaviour). Every architecture of the registry, with and without speculation, under every rollback policy, and
// every way of reusing: extending a slot's tokens, rewinding them to a divergence a few tokens back, restoring a
// checkpoint for one far back, and starting afresh for a prompt that shares nothing.
// links: rewind_runtime
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "common/engine_steps.h"
#include "common/registry.h"
#include "common/sanitizer_sample.h"
#include "common/twin_model.h"
#include "rewind/engine.h"

namespace rwd {
namespace {

constexpr int kNewTokens = 6;
constexpr int kTopLogprobs = 4;

std::string data_path(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/" + name; }
std::string model_file(const std::string& arch) { return arch + "-tiny-f32.gguf"; }

struct Config {
  std::string arch;
  std::string mode = "none";
  std::string rollback = "replay";
  int rewind_depth = 8;
  int64_t cache_ram_mib = 16;
};

std::unique_ptr<Engine> open(const Config& config) {
  EngineOptions options;
  options.model_path = data_path(model_file(config.arch));
  options.n_threads = 2;
  options.n_slots = 2;
  options.n_ctx = 256;
  options.n_batch = 16;  // prompts span several chunks
  options.rewind_depth = config.rewind_depth;
  options.cache_ram_mib = config.cache_ram_mib;
  options.checkpoint_every = 24;
  options.spec.mode = config.mode;
  options.spec.rollback = config.rollback;
  options.spec.draft_max = 3;
  options.spec.ngram_min = 1;  // the random models seldom repeat 3 tokens: short matches keep n-gram drafts coming
  options.spec.ngram_max = 3;
  if (config.mode == "draft") options.spec.draft_model = test::twin_of(model_file(config.arch));
  return test::open_engine(options);
}

struct Output {
  std::vector<int32_t> ids;
  std::vector<std::vector<TokenLogprob>> top;
  RequestTimings timings;
};

Output run(Engine& engine, const std::vector<int32_t>& prompt, bool cache_prompt) {
  Request request;
  request.prompt_ids = prompt;
  request.max_tokens = kNewTokens;
  request.sampling.temperature = 0.0f;
  request.ignore_eos = true;
  request.top_logprobs = kTopLogprobs;
  request.cache_prompt = cache_prompt;
  Output out;
  auto id = engine.submit(request, [&out](const TokenEvent& event) {
    if (event.token >= 0) {
      out.ids.push_back(event.token);
      out.top.push_back(event.top);
    }
  });
  EXPECT_TRUE(id.is_ok()) << id.status().message();
  if (!id.is_ok()) return out;
  test::step_until_idle(engine);
  out.timings = engine.timings(*id);
  return out;
}

std::vector<int32_t> tokens(int32_t first, int n, int period) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(first + (i % period) * 5 % 40);
  return ids;
}

std::vector<int32_t> join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Each turn's prompt is built from the reference outputs of earlier turns (the same as the reused engine's,
// which the comparison checks turn by turn). Expected reuse is checked where it is certain.
void expect_conversation_equal_to_fresh(const Config& config) {
  auto reused = open(config);
  Config fresh_config = config;
  auto fresh = open(fresh_config);
  ASSERT_NE(reused, nullptr);
  ASSERT_NE(fresh, nullptr);
  const bool recurrent = model::find_arch(config.arch)->recurrent;

  std::vector<std::vector<int32_t>> prompts;
  std::vector<Output> outputs;
  outputs.reserve(16);  // turns hold references to earlier outputs
  const auto turn = [&](const std::vector<int32_t>& prompt) -> const Output& {
    const Output expected = run(*fresh, prompt, /*cache_prompt=*/false);
    const Output got = run(*reused, prompt, /*cache_prompt=*/true);
    const size_t index = outputs.size();
    EXPECT_EQ(expected.timings.n_cached_tokens, 0);
    EXPECT_EQ(got.ids, expected.ids) << "turn " << index;
    EXPECT_EQ(got.top.size(), expected.top.size()) << "turn " << index;
    for (size_t t = 0; t < got.top.size() && t < expected.top.size(); ++t) {
      EXPECT_EQ(got.top[t].size(), expected.top[t].size());
      for (size_t j = 0; j < got.top[t].size() && j < expected.top[t].size(); ++j) {
        EXPECT_EQ(got.top[t][j].id, expected.top[t][j].id) << "turn " << index << " token " << t;
        EXPECT_EQ(std::memcmp(&got.top[t][j].logprob, &expected.top[t][j].logprob, sizeof(float)), 0)
            << "turn " << index << " token " << t << " rank " << j;
      }
    }
    prompts.push_back(prompt);
    outputs.push_back(got);
    return outputs.back();
  };

  // 0: a first prompt; 1: the conversation goes on (the slot's whole state is a prefix).
  turn(tokens(3, 30, 7));
  const auto& t1 = turn(join(join(prompts[0], outputs[0].ids), tokens(11, 6, 4)));
  EXPECT_EQ(t1.timings.n_cached_tokens, static_cast<int64_t>(prompts[0].size() + outputs[0].ids.size()) - 1);

  // 2: the history re-tokenized differently near its end: diverges 3 tokens before the slot's last one.
  std::vector<int32_t> history = join(prompts[1], outputs[1].ids);
  history.resize(history.size() - 3);
  const auto& t2 = turn(join(history, tokens(17, 5, 3)));
  const auto n_kept2 = static_cast<int64_t>(history.size());
  if (!recurrent || config.rewind_depth > 0) {
    EXPECT_EQ(t2.timings.n_cached_tokens, n_kept2);
  } else if (config.cache_ram_mib > 0) {
    // The checkpoint at the end of turn 1's prompt.
    EXPECT_EQ(t2.timings.n_cached_tokens, static_cast<int64_t>(prompts[1].size()));
  }

  // 3: an earlier turn re-rendered (thinking text dropped): diverges right after turn 0's prompt.
  const auto& t3 = turn(join(prompts[0], tokens(29, 9, 5)));
  if (!recurrent) {
    EXPECT_EQ(t3.timings.n_cached_tokens, static_cast<int64_t>(prompts[0].size()));
  } else if (config.cache_ram_mib > 0) {
    EXPECT_GE(t3.timings.n_cached_tokens, 24);  // an interval checkpoint of turn 0's 30-token prompt, or its end
  } else {
    EXPECT_EQ(t3.timings.n_cached_tokens, 0);
  }

  // 4: a prompt that shares nothing goes to the other slot; 5: turn 3 again reuses all but its last token
  // (rewound) or the checkpoint of its prompt's prefix, from the slot that still holds it.
  const auto& t4 = turn(tokens(2, 20, 9));
  EXPECT_EQ(t4.timings.n_cached_tokens, 0);
  const auto& t5 = turn(prompts[3]);
  if (!recurrent || config.rewind_depth > 0) {
    EXPECT_EQ(t5.timings.n_cached_tokens, static_cast<int64_t>(prompts[3].size()) - 1);
  }
  // 6: the conversation of turn 2 resumes after the unrelated requests.
  turn(join(join(prompts[2], outputs[2].ids), tokens(7, 4, 2)));

  // 7, 8: two new conversations take both slots; 9: turn 6's conversation resumes after its slot went to one
  // of them: from the archive taken when that happened, into whichever slot (KV rows copied in).
  EXPECT_EQ(turn(tokens(5, 12, 11)).timings.n_cached_tokens, 0);
  EXPECT_EQ(turn(tokens(9, 14, 13)).timings.n_cached_tokens, 0);
  const auto& t9 = turn(join(join(prompts[6], outputs[6].ids), tokens(13, 5, 3)));
  const auto n_held6 = static_cast<int64_t>(prompts[6].size() + outputs[6].ids.size()) - 1;
  EXPECT_EQ(t9.timings.n_cached_tokens, config.cache_ram_mib > 0 ? n_held6 : 0);
}

struct Case {
  std::string arch;
  std::string mode;
  std::string rollback;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.arch << " " << c.mode << " " << c.rollback; }

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::string> archs = test::all_archs();
  for (int a = 0; a < static_cast<int>(archs.size()); ++a) {
    const std::string& arch = archs[a];
    std::vector<Case> of_arch = {{arch, "none", "replay"}, {arch, "ngram", "replay"}};
    if (model::find_arch(arch)->recurrent) {
      of_arch.push_back({arch, "ngram", "snapshot"});
      of_arch.push_back({arch, "ngram", "checkpoint"});
      of_arch.push_back({arch, "draft", "replay"});
      if (test::has_mtp(arch)) of_arch.push_back({arch, "mtp", "replay"});
    }
    for (int c = 0; c < static_cast<int>(of_arch.size()); ++c) {
      if (test::in_sanitizer_sample({a, c}, 2)) out.push_back(of_arch[c]);
    }
  }
  return out;
}

class PromptReuse : public ::testing::TestWithParam<Case> {};

TEST_P(PromptReuse, ConversationEqualsFreshComputation) {
  const Case& c = GetParam();
  // Every reuse path with plain decoding; with speculation, the two that rewind and restore (the third, a
  // fresh start where the prompt leaves the slot far back, does not depend on the proposer).
  std::vector<std::pair<int, int64_t>> settings = {{8, 16}, {0, 16}};
  if (c.mode == "none") settings.push_back({0, 0});
  for (const auto& [depth, cache] : settings) {
    SCOPED_TRACE("rewind depth " + std::to_string(depth) + ", cache " + std::to_string(cache) + " MiB");
    expect_conversation_equal_to_fresh({c.arch, c.mode, c.rollback, depth, cache});
    if (::testing::Test::HasFailure()) return;
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& param) {
  return test::test_name_part(param.param.arch) + "_" + param.param.mode + "_" + param.param.rollback;
}

INSTANTIATE_TEST_SUITE_P(Engine, PromptReuse, ::testing::ValuesIn(cases()), case_name);

TEST(PromptReuseOptions, BadOptionsAreRefusedWithAReason) {
  EngineOptions options;
  options.model_path = data_path(model_file("qwen35"));
  options.cache_ram_mib = -1;
  auto engine = Engine::open(options);
  ASSERT_FALSE(engine.is_ok());
  EXPECT_NE(engine.status().message().find("cache RAM"), std::string::npos) << engine.status().message();
  options.cache_ram_mib = 0;
  options.checkpoint_every = -5;
  engine = Engine::open(options);
  ASSERT_FALSE(engine.is_ok());
  EXPECT_NE(engine.status().message().find("checkpoint interval"), std::string::npos) << engine.status().message();
}

// The checkpoints stay within their budget: the oldest go first, and the status reports what is kept.
TEST(PromptReuseOptions, CheckpointsStayWithinTheirBudget) {
  EngineOptions options;
  options.model_path = data_path(model_file("qwen35"));
  options.n_threads = 2;
  options.n_ctx = 256;
  options.cache_ram_mib = 1;
  options.checkpoint_every = 0;
  auto engine = Engine::open(options);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  for (int p = 0; p < 200; ++p) run(**engine, tokens(1 + p % 50, 12 + p % 7, 3 + p % 5), true);
  const EngineStatus status = (*engine)->status();
  EXPECT_GT(status.n_checkpoints, 0);
  EXPECT_LE(status.checkpoint_bytes, size_t{1} << 20);
}

}  // namespace
}  // namespace rwd
