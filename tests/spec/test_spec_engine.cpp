// Speculative decoding through the public Engine: for every proposer, every rollback policy and 1 or 4 slots,
// on the golden tiny model of every architecture with recurrent layers (tests/common/registry.h), greedy output
// with speculation is the greedy output without it, token for token, with bit-identical
// log-probabilities at every emitted position (the reference is the same engine with speculation off, which
// never opens a transaction). The oracle proposer is deliberately wrong at seeded positions, so rejections at
// every draft depth happen; the stochastic tests check that sampling with speculation keeps the target's
// distribution (chi-square against the exact distribution).
// links: rewind_runtime
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/registry.h"
#include "common/sanitizer_sample.h"
#include "common/twin_model.h"
#include "rewind/engine.h"
#include "rewind/tools.h"

namespace rwd {
namespace {

constexpr int kTopLogprobs = 8;
constexpr int kNewTokens = 40;

std::string data_path(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/" + name; }

struct Output {
  std::vector<int32_t> ids;
  std::vector<std::vector<TokenLogprob>> top;
  SpecStats spec;
};

// Prompts whose text repeats, so n-gram lookup finds drafts; different lengths, so slots are out of step.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> ids;
    const int period = 5 + p;
    for (int i = 0; i < 18 + 3 * p; ++i) ids.push_back(33 + (i % period) * 7 % 90 + p);
    out.push_back(ids);
  }
  return out;
}

struct RunConfig {
  std::string model;
  std::string mode = "none";
  std::string rollback = "replay";
  int n_slots = 1;
  std::string draft_model;
  bool adaptive = false;
  int64_t draft_vocab = 0;
  int tree_nodes = 0;
  double assumed_verify_token = 0.0;
  double assumed_draft_token = 0.0;
};

std::unique_ptr<Engine> open(const RunConfig& config) {
  EngineOptions options;
  options.model_path = data_path(config.model);
  options.n_threads = 2;
  options.n_slots = config.n_slots;
  options.n_ctx = 256;
  options.n_batch = 64;
  options.spec.mode = config.mode;
  options.spec.rollback = config.rollback;
  options.spec.draft_model = config.draft_model;
  options.spec.draft_vocab = config.draft_vocab;
  options.spec.draft_max = 4;
  options.spec.tree_nodes = config.tree_nodes;
  options.spec.tree_topk = 3;
  options.spec.adaptive = config.adaptive;
  options.spec.assumed_verify_token = config.assumed_verify_token;
  options.spec.assumed_draft_token = config.assumed_draft_token;
  options.spec.oracle_error_rate = 0.35;
  options.spec.oracle_seed = 7;
  // The random tiny models seldom repeat 3 tokens; matches from one token on keep the n-gram drafts (and their
  // rejections, which these tests are about) coming.
  options.spec.ngram_min = 1;
  options.spec.ngram_max = 3;
  auto engine = Engine::open(options);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  return engine.is_ok() ? std::move(engine).value() : nullptr;
}

// Speculation's outputs are plain decoding's: the same ids and, bitwise, the same top logprobs at every
// emitted position (the logits of every position are the plain forward's).
void expect_plain_outputs(const std::vector<Output>& spec, const std::vector<Output>& plain) {
  ASSERT_EQ(spec.size(), plain.size());
  for (size_t p = 0; p < spec.size(); ++p) {
    ASSERT_EQ(spec[p].ids, plain[p].ids) << "prompt " << p;
    ASSERT_EQ(spec[p].top.size(), plain[p].top.size());
    for (size_t t = 0; t < spec[p].top.size(); ++t) {
      ASSERT_EQ(spec[p].top[t].size(), plain[p].top[t].size());
      for (size_t j = 0; j < spec[p].top[t].size(); ++j) {
        ASSERT_EQ(spec[p].top[t][j].id, plain[p].top[t][j].id) << "prompt " << p << " token " << t;
        ASSERT_EQ(std::memcmp(&spec[p].top[t][j].logprob, &plain[p].top[t][j].logprob, sizeof(float)), 0)
            << "prompt " << p << " token " << t << " rank " << j;
      }
    }
  }
}

// Runs every prompt (all submitted at once; they share the slots) and returns their outputs in prompt order.
std::vector<Output> run_all(Engine& engine, const std::vector<std::vector<int32_t>>& inputs,
                            const std::vector<std::vector<int32_t>>& oracle = {}) {
  std::vector<Output> outputs(inputs.size());
  std::vector<int64_t> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Request request;
    request.prompt_ids = inputs[i];
    request.max_tokens = kNewTokens;
    request.sampling.temperature = 0.0f;
    request.ignore_eos = true;
    request.top_logprobs = kTopLogprobs;
    if (!oracle.empty()) request.oracle_ids = oracle[i];
    Output& out = outputs[i];
    auto id = engine.submit(request, [&out](const TokenEvent& event) {
      if (event.token >= 0) {
        out.ids.push_back(event.token);
        out.top.push_back(event.top);
      }
    });
    EXPECT_TRUE(id.is_ok()) << id.status().message();
    ids.push_back(*id);
  }
  while (!engine.idle()) {
    const Status status = engine.step();
    EXPECT_TRUE(status.is_ok()) << status.message();
    if (!status.is_ok()) break;
  }
  for (size_t i = 0; i < inputs.size(); ++i) outputs[i].spec = engine.timings(ids[i]).spec;
  return outputs;
}

// Plain greedy outputs per model, computed once.
const std::vector<Output>& reference(const std::string& model) {
  static std::map<std::string, std::vector<Output>> cache;
  auto it = cache.find(model);
  if (it == cache.end()) {
    RunConfig config;
    config.model = model;
    auto engine = open(config);
    it = cache.emplace(model, run_all(*engine, prompts())).first;
  }
  return it->second;
}

// Runs config's engine over the prompts, the oracle drafting plain decoding's output, and checks its outputs
// against plain decoding's (expect_plain_outputs).
std::vector<Output> run_against_plain(const RunConfig& config) {
  const std::vector<Output>& plain = reference(config.model);
  std::vector<std::vector<int32_t>> oracle;
  for (const Output& out : plain) oracle.push_back(out.ids);
  auto engine = open(config);
  EXPECT_NE(engine, nullptr);
  if (engine == nullptr) return {};
  std::vector<Output> spec = run_all(*engine, prompts(), oracle);
  expect_plain_outputs(spec, plain);
  return spec;
}

struct Case {
  std::string model;
  std::string mode;
  std::string rollback;
  int n_slots;
  int tree_nodes = 0;  // > 0: tree drafts of this many tokens (ngram, oracle)
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string model = info.param.model.substr(0, info.param.model.find("-tiny"));
  std::replace(model.begin(), model.end(), '-', '_');  // test names allow no '-' (falcon-h1)
  return model + "_" + info.param.mode + (info.param.tree_nodes > 0 ? "_tree" : "") + "_" + info.param.rollback +
         "_" + std::to_string(info.param.n_slots) + "slots";
}

class SpecExactness : public ::testing::TestWithParam<Case> {};

TEST_P(SpecExactness, GreedyOutputAndLogprobsEqualPlainDecoding) {
  const Case& c = GetParam();
  RunConfig config;
  config.model = c.model;
  config.mode = c.mode;
  config.rollback = c.rollback;
  config.n_slots = c.n_slots;
  config.tree_nodes = c.tree_nodes;
  if (c.mode == "draft") config.draft_model = test::twin_of(c.model);
  const std::vector<Output> spec = run_against_plain(config);
  if (HasFatalFailure()) return;
  int64_t drafted = 0;
  int64_t rollbacks = 0;
  for (size_t p = 0; p < spec.size(); ++p) {
    drafted += spec[p].spec.drafted;
    rollbacks += spec[p].spec.rollbacks;
  }
  EXPECT_GT(drafted, 0) << "the proposer never drafted, so nothing was verified";
  if (c.tree_nodes > 0) {
    int64_t tree_rounds = 0;
    for (const Output& out : spec) tree_rounds += out.spec.tree_rounds;
    EXPECT_GT(tree_rounds, 0) << "no draft branched, so no tree was verified";
  }
  if (c.mode == "oracle" && c.tree_nodes == 0) {
    // Fixed draft length 4 with errors at rate 0.35: full acceptance, rejection at the first token and in
    // between all occur.
    int64_t rounds = 0, first_rejected = 0, all_accepted = 0, partial = 0;
    for (const Output& out : spec) {
      const SpecStats& s = out.spec;
      rounds += s.rounds;
      if (s.accepted_by_position.empty()) continue;
      first_rejected += s.drafted_by_position[0] - s.accepted_by_position[0];
      if (s.accepted_by_position.size() >= 4) all_accepted += s.accepted_by_position[3];
      for (size_t i = 0; i + 1 < s.accepted_by_position.size(); ++i) {
        partial += s.accepted_by_position[i] - s.accepted_by_position[i + 1];
      }
    }
    EXPECT_GT(first_rejected, 0);
    EXPECT_GT(all_accepted, 0);
    EXPECT_GT(partial, 0);
    EXPECT_GT(rollbacks, 0);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::string> archs = test::recurrent_archs();
  const std::vector<std::string> modes = {"ngram", "draft", "mtp", "oracle"};
  const std::vector<std::string> rollbacks = {"replay", "snapshot", "checkpoint"};
  const std::vector<int> slot_counts = {1, 4};
  for (int a = 0; a < static_cast<int>(archs.size()); ++a) {
    const std::string model = archs[a] + "-tiny-f32.gguf";
    for (int m = 0; m < static_cast<int>(modes.size()); ++m) {
      if (modes[m] == "mtp" && !test::has_mtp(archs[a])) continue;
      for (int r = 0; r < static_cast<int>(rollbacks.size()); ++r) {
        for (int s = 0; s < static_cast<int>(slot_counts.size()); ++s) {
          if (!test::in_sanitizer_sample({a, m, r, s}, 3)) continue;
          out.push_back({model, modes[m], rollbacks[r], slot_counts[s]});
        }
      }
      // Trees of 8 tokens (depth up to 4, 3 branches) from every proposer, under replay and snapshot (the
      // first two policies; checkpoint refuses trees on recurrent models).
      for (int r = 0; r < 2; ++r) {
        for (int s = 0; s < static_cast<int>(slot_counts.size()); ++s) {
          if (!test::in_sanitizer_sample({a, m, r, s}, 2)) continue;
          out.push_back({model, modes[m], rollbacks[r], slot_counts[s], 8});
        }
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Engine, SpecExactness, ::testing::ValuesIn(cases()), case_name);

// With the adaptive policy choosing each round's shape (chain length, alternatives per depth, plain steps),
// whatever it chooses, greedy output and every emitted position's logits stay plain decoding's. Once from this
// run's timings, whose choices depend on the machine (on a sanitizer build a round of the tiny model never
// pays, and the policy rightly decodes plainly), and once from assumed costs at which rounds pay, so that every
// proposer's rounds, chains and trees, are taken on any machine.
TEST(SpecAdaptiveTrees, EveryShapeThePolicyChoosesEqualsPlainDecoding) {
  const std::string model = "qwen35-tiny-f32.gguf";
  for (const bool assumed : {false, true}) {
    for (const std::string mode : {"mtp", "draft", "ngram", "oracle"}) {
      for (int n_slots : {1, 4}) {
        SCOPED_TRACE(testing::Message() << mode << ", " << n_slots << " slots, " << (assumed ? "assumed" : "timed")
                                        << " costs");
        RunConfig config;
        config.model = model;
        config.mode = mode;
        config.n_slots = n_slots;
        config.adaptive = true;
        config.tree_nodes = 8;
        if (assumed) {
          config.assumed_verify_token = 0.05;
          config.assumed_draft_token = 0.01;
        }
        if (mode == "draft") config.draft_model = test::twin_of(model);
        const std::vector<Output> spec = run_against_plain(config);
        if (HasFatalFailure()) return;
        int64_t drafted = 0;
        int64_t tree_rounds = 0;
        for (size_t p = 0; p < spec.size(); ++p) {
          drafted += spec[p].spec.drafted;
          tree_rounds += spec[p].spec.tree_rounds;
        }
        if (assumed) {
          EXPECT_GT(drafted, 0) << "the policy never drafted where rounds pay";
          EXPECT_GT(tree_rounds, 0) << "the policy never drafted a tree";
        }
      }
    }
  }
}

// The model-based proposers draft for all slots in shared forwards (catch-up rows together, one row per slot
// per chain step): each prompt's drafts, and so its acceptance at every position, are those it gets alone.
TEST(SpecSlotsTogether, ModelProposersDraftAsForEachSlotAlone) {
  for (const std::string mode : {"mtp", "draft"}) {
    SCOPED_TRACE(mode);
    RunConfig config;
    config.model = "qwen35-tiny-f32.gguf";
    config.mode = mode;
    if (mode == "draft") config.draft_model = test::twin_of(config.model);
    auto alone_engine = open(config);
    config.n_slots = 4;
    auto together_engine = open(config);
    ASSERT_NE(alone_engine, nullptr);
    ASSERT_NE(together_engine, nullptr);
    const std::vector<Output> alone = run_all(*alone_engine, prompts());
    const std::vector<Output> together = run_all(*together_engine, prompts());
    int64_t drafted = 0;
    for (size_t p = 0; p < alone.size(); ++p) {
      EXPECT_EQ(together[p].ids, alone[p].ids) << "prompt " << p;
      EXPECT_EQ(together[p].spec.drafted_by_position, alone[p].spec.drafted_by_position) << "prompt " << p;
      EXPECT_EQ(together[p].spec.accepted_by_position, alone[p].spec.accepted_by_position) << "prompt " << p;
      drafted += alone[p].spec.drafted;
    }
    EXPECT_GT(drafted, 0);
  }
}

TEST(SpecOptions, BadOptionsAreRefusedWithAReason) {
  const auto refused = [](const std::function<void(EngineOptions&)>& edit, const std::string& expected) {
    EngineOptions options;
    options.model_path = data_path("qwen35-tiny-f32.gguf");
    options.n_threads = 1;
    options.n_ctx = 64;
    options.n_batch = 64;
    options.spec.mode = "ngram";
    edit(options);
    auto engine = Engine::open(options);
    ASSERT_FALSE(engine.is_ok()) << expected;
    EXPECT_NE(engine.status().message().find(expected), std::string::npos) << engine.status().message();
  };
  refused([](EngineOptions& o) { o.spec.mode = "lookahead"; }, "unknown speculation mode 'lookahead'");
  refused([](EngineOptions& o) { o.spec.rollback = "undo"; }, "unknown rollback policy 'undo'");
  refused([](EngineOptions& o) { o.spec.rollback = "none"; }, "cannot roll back");
  refused([](EngineOptions& o) { o.spec.draft_max = 0; }, "draft-max must be in [1, 32], got 0");
  refused([](EngineOptions& o) { o.spec.draft_min = 5; o.spec.draft_max = 4; }, "draft-min must be in [1, draft-max = 4], got 5");
  refused([](EngineOptions& o) { o.spec.mode = "draft"; }, "needs a draft model");
  refused([](EngineOptions& o) { o.spec.draft_model = "x.gguf"; }, "a draft model was given");
  refused([](EngineOptions& o) { o.n_slots = 4; o.n_batch = 16; }, "cannot hold a verify batch of 9 tokens for each of 4 slots");
  refused([](EngineOptions& o) { o.spec.mode = "draft"; o.spec.draft_model = data_path("missing.gguf"); }, "missing.gguf");
  refused([](EngineOptions& o) { o.model_path = data_path("lfm2-tiny-f32.gguf"); o.spec.mode = "mtp"; }, "no next-token-prediction");
  refused([](EngineOptions& o) { o.spec.mode = "oracle"; o.spec.oracle_error_rate = 1.5; }, "oracle error rate must be in [0, 1], got 1.5");
  refused([](EngineOptions& o) { o.spec.draft_vocab = 100; }, "draft-vocab applies to --spec draft");
  refused([](EngineOptions& o) { o.spec.draft_vocab = -2; }, "must be >= 0 (0: all) or auto, got -2");
  refused([](EngineOptions& o) { o.spec.tree_nodes = 65; }, "draft-tree-nodes must be in [0, 64] (0: chains), got 65");
  refused([](EngineOptions& o) { o.spec.tree_nodes = 8; o.spec.tree_topk = 0; }, "draft-tree-topk must be in [1, 16], got 0");
  refused([](EngineOptions& o) { o.spec.tree_nodes = 8; o.spec.rollback = "checkpoint"; }, "tree drafts need the replay or snapshot");
  refused([](EngineOptions& o) { o.spec.tree_nodes = 20; o.n_slots = 4; }, "cannot hold a verify batch of 21 tokens for each of 4 slots");
  refused([](EngineOptions& o) {
    o.spec.mode = "draft";
    o.spec.draft_model = data_path("qwen35-tiny-f32.gguf");
    o.spec.draft_vocab = 513;
  }, "draft-vocab 513 exceeds the draft model's vocabulary of 512 tokens");
  refused([](EngineOptions& o) { o.spec.assumed_verify_token = -0.5; }, "assumed_verify_token must be in [0, 16] plain steps (0: timed), got -0.5");
  refused([](EngineOptions& o) { o.spec.assumed_verify_token = std::nan(""); }, "assumed_verify_token must be in [0, 16]");
  refused([](EngineOptions& o) { o.spec.assumed_verify_token = 0.1; o.spec.assumed_draft_token = 20; }, "assumed_draft_token must be in [0, 16] plain steps, got 20");
  refused([](EngineOptions& o) { o.spec.assumed_draft_token = 0.1; }, "assumed_draft_token 0.1 needs assumed_verify_token");
}

// With costs assumed, what the policy does follows from them and from acceptance alone. Drafts that are always
// right, at rounds that cost more than the tokens they bring (a verify token 1.5 plain steps), are never taken:
// a round, were it rejected, would lose more than the loss budget's allowance; at cheap rounds they are, and
// the output is plain decoding's either way.
TEST(SpecOptions, AssumedCostsDecideWhetherRoundsAreTaken) {
  const std::string model = "qwen35-tiny-f32.gguf";
  const std::vector<Output>& plain = reference(model);
  std::vector<std::vector<int32_t>> oracle;
  for (const Output& out : plain) oracle.push_back(out.ids);
  for (const double verify_token : {1.5, 0.1}) {
    SCOPED_TRACE(testing::Message() << "verify token " << verify_token);
    EngineOptions options;
    options.model_path = data_path(model);
    options.n_threads = 2;
    options.n_ctx = 256;
    options.n_batch = 64;
    options.spec.mode = "oracle";
    options.spec.draft_max = 4;
    options.spec.assumed_verify_token = verify_token;
    auto engine = Engine::open(options);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    const std::vector<Output> spec = run_all(**engine, prompts(), oracle);
    for (size_t p = 0; p < spec.size(); ++p) {
      EXPECT_EQ(spec[p].ids, plain[p].ids) << "prompt " << p;
      if (verify_token > 1.0) {
        EXPECT_EQ(spec[p].spec.drafted, 0) << "prompt " << p;
        EXPECT_GT(spec[p].spec.plain_steps, 0) << "prompt " << p;
      } else {
        // Every draft right: all but the prompt's first steps, which decide, are rounds that keep their draft.
        EXPECT_EQ(spec[p].spec.accepted, spec[p].spec.drafted) << "prompt " << p;
        EXPECT_GT(spec[p].spec.drafted, kNewTokens / 2) << "prompt " << p;
      }
    }
  }
}

// The model with its perturbed twin as the draft model.
RunConfig draft_model_config(const std::string& model) {
  RunConfig config;
  config.model = model;
  config.mode = "draft";
  config.draft_model = test::twin_of(model);
  return config;
}

// A draft model that scores only the first ids still gives exactly the plain output: the drafts it cannot make
// cost acceptance only. Below 480 of 512, about one token in sixteen of the tiny model's text lies outside and
// rounds stay reduced; below 100, most rounds widen to every id; with 4 slots one round serves slots of both
// kinds (test_draft_vocab checks which rounds are reduced).
TEST(SpecOptions, DraftVocabularyKeepsTheOutputExact) {
  const std::string model = "qwen35-tiny-f32.gguf";
  const std::vector<Output>& plain = reference(model);
  for (const int64_t vocab : {480, 100}) {
    for (const int slots : {1, 4}) {
      RunConfig config = draft_model_config(model);
      config.draft_vocab = vocab;
      config.n_slots = slots;
      auto engine = open(config);
      ASSERT_NE(engine, nullptr);
      const std::vector<Output> restricted = run_all(*engine, prompts());
      ASSERT_EQ(restricted.size(), plain.size());
      int64_t drafted = 0;
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_EQ(restricted[i].ids, plain[i].ids) << "vocab " << vocab << ", " << slots << " slots, prompt " << i;
        drafted += restricted[i].spec.drafted;
      }
      EXPECT_GT(drafted, 0) << "vocab " << vocab << ", " << slots << " slots";
    }
  }
}

// A draft model reads the prompt while the target does (its prefill belongs to the time to the first token, not
// to the first speculative round): a request that ends with its first token, before any round, has already
// written the draft model's KV rows.
TEST(SpecOptions, DraftModelReadsThePromptWithTheTarget) {
  auto engine = open(draft_model_config("qwen35-tiny-f32.gguf"));
  ASSERT_NE(engine, nullptr);
  const size_t before = engine->state_report().draft_model;
  Request request;
  request.prompt_ids = prompts()[0];
  request.max_tokens = 1;
  request.sampling.temperature = 0.0f;
  ASSERT_TRUE(engine->submit(request, [](const TokenEvent&) {}).is_ok());
  while (!engine->idle()) ASSERT_TRUE(engine->step().is_ok());
  EXPECT_GT(engine->state_report().draft_model, before);
}

// A pure-attention model speculates with policy none (KV rows only need truncation).
TEST(SpecOptions, AttentionOnlyModelsNeedNoRecurrentRollback) {
  EngineOptions options;
  options.model_path = data_path("qwen3-tiny-f32.gguf");
  options.n_threads = 1;
  options.n_ctx = 128;
  options.n_batch = 64;
  auto plain_engine = Engine::open(options);
  ASSERT_TRUE(plain_engine.is_ok()) << plain_engine.status().message();
  options.spec.mode = "ngram";
  options.spec.rollback = "none";
  options.spec.adaptive = false;
  auto spec_engine = Engine::open(options);
  ASSERT_TRUE(spec_engine.is_ok()) << spec_engine.status().message();
  const auto plain = run_all(**plain_engine, prompts());
  const auto spec = run_all(**spec_engine, prompts());
  for (size_t p = 0; p < plain.size(); ++p) EXPECT_EQ(spec[p].ids, plain[p].ids);
}

// A tree node costs one record: the replay log holds 1 + the tree budget tokens of records per slot, and one
// token's records are a small fraction of the full recurrent state an engine keeping a state per node would copy.
TEST(SpecOptions, TreeStateIsOneRecordPerNode) {
  for (const std::string& arch : test::recurrent_archs()) {
    EngineOptions options;
    options.model_path = data_path(arch + "-tiny-f32.gguf");
    options.n_threads = 1;
    options.n_slots = 2;
    options.n_ctx = 64;
    options.n_batch = 64;
    options.spec.mode = "ngram";
    options.spec.draft_max = 4;
    options.spec.tree_nodes = 16;
    auto engine = Engine::open(options);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    const StateReport report = (*engine)->state_report();
    EXPECT_EQ(report.tree_nodes, 16);
    ASSERT_GT(report.bytes_per_node, 0u) << arch;
    EXPECT_EQ(report.records, 2u * (1 + 16) * report.bytes_per_node) << arch;
    EXPECT_EQ(report.full_state_per_node, (report.conv + report.recurrent) / 2) << arch;
    EXPECT_LT(report.bytes_per_node, report.full_state_per_node) << arch;
  }
}

// --- sampling keeps the target's distribution -------------------------------------------------------------

// Exact distribution of the sampler at a temperature and top-k k from the top-k log-probabilities (the
// softmax's normaliser cancels), most likely first.
std::vector<std::pair<int32_t, double>> top_k_distribution(const std::vector<TokenLogprob>& top, double temperature) {
  double sum = 0.0;
  for (const TokenLogprob& entry : top) sum += std::exp(static_cast<double>(entry.logprob) / temperature);
  std::vector<std::pair<int32_t, double>> out;
  for (const TokenLogprob& entry : top) {
    out.emplace_back(entry.id, std::exp(static_cast<double>(entry.logprob) / temperature) / sum);
  }
  return out;
}

// Upper tail of the chi-square distribution, by the Wilson–Hilferty normal approximation (good to a few
// percent in the tail for df >= 3, ample for a 1e-4 threshold).
double chi_square_p_value(double x2, int df) {
  const double k = df;
  const double z = (std::cbrt(x2 / k) - (1.0 - 2.0 / (9.0 * k))) / std::sqrt(2.0 / (9.0 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// The first two sampled tokens (t1 from the prefill, t2 from the first verify round) under speculation, over
// many seeds, against the exact joint p(t1) p(t2 | t1) of the target with top-k 4 at temperature 3 (flat
// enough inside the top 4 that drafts from it are accepted often).
void expect_target_distribution(const std::string& mode, const std::string& draft_model, int kSamples,
                                int tree_nodes = 0, const std::string& model = data_path("qwen35-tiny-f32.gguf")) {
  constexpr int kTopK = 4;
  constexpr double kTemperature = 3.0;
  EngineOptions options;
  options.model_path = model;
  options.n_threads = 2;
  options.n_ctx = 512;
  options.n_batch = 512;
  options.n_slots = 4;
  // Every request shares all but the last few tokens with the one before it in its slot: rolling back to there
  // instead of computing the prompt again takes the test from prefill-bound to sampling-bound.
  options.rewind_depth = 8;
  auto plain_engine = Engine::open(options);
  ASSERT_TRUE(plain_engine.is_ok()) << plain_engine.status().message();
  const auto top_of = [&](const std::vector<int32_t>& ids) {
    Request request;
    request.prompt_ids = ids;
    request.max_tokens = 1;
    request.ignore_eos = true;
    request.sampling.temperature = 0.0f;
    request.top_logprobs = kTopK;
    std::vector<TokenLogprob> top;
    EXPECT_TRUE((*plain_engine)->submit(request, [&top](const TokenEvent& e) { if (e.token >= 0) top = e.top; }).is_ok());
    while (!(*plain_engine)->idle()) EXPECT_TRUE((*plain_engine)->step().is_ok());
    return top_k_distribution(top, kTemperature);
  };
  // For n-gram lookup the prompt ends with a pair (c, likely next token) for every printable id c (what the
  // generated model emits), so a draft follows any t1 and is often accepted; a second pass picks the pairs'
  // tokens under the prompt that holds the pairs. A draft model needs no help.
  std::vector<int32_t> base;
  for (int32_t i = 0; i < 16; ++i) base.push_back(32 + (i * 37 + 11) % 95);
  std::vector<int32_t> prompt = base;
  for (int refine = 0; refine < (mode == "ngram" ? 2 : 0); ++refine) {
    std::vector<int32_t> next = base;
    for (int32_t c = 32; c < 127; ++c) {
      std::vector<int32_t> extended = prompt;
      extended.push_back(c);
      next.push_back(c);
      next.push_back(top_of(extended).front().first);
    }
    prompt = next;
  }
  std::map<std::pair<int32_t, int32_t>, double> expected;
  for (const auto& [t1, p1] : top_of(prompt)) {
    std::vector<int32_t> extended = prompt;
    extended.push_back(t1);
    for (const auto& [t2, p2] : top_of(extended)) expected[{t1, t2}] = p1 * p2;
  }

  options.spec.mode = mode;
  options.spec.draft_model = draft_model;
  options.spec.draft_max = 3;
  options.spec.adaptive = false;
  options.spec.ngram_min = 1;  // look up t1 alone: its pair at the end of the prompt
  options.spec.ngram_max = 1;
  options.spec.tree_nodes = tree_nodes;
  auto spec_engine = Engine::open(options);
  ASSERT_TRUE(spec_engine.is_ok()) << spec_engine.status().message();
  std::map<std::pair<int32_t, int32_t>, int64_t> observed;
  std::vector<std::vector<int32_t>> outputs(kSamples);
  int64_t verified = 0;
  std::vector<int64_t> ids(kSamples);
  int64_t accepted = 0;
  for (int s = 0; s < kSamples; ++s) {
    Request request;
    request.prompt_ids = prompt;
    request.max_tokens = 3;  // room for a one-token draft after t1
    request.ignore_eos = true;
    request.sampling.temperature = static_cast<float>(kTemperature);
    request.sampling.top_k = kTopK;
    request.sampling.top_p = 1.0f;
    request.sampling.min_p = 0.0f;
    request.sampling.seed = 1000 + static_cast<uint64_t>(s);
    auto id = (*spec_engine)->submit(request, [&outputs, s](const TokenEvent& e) { if (e.token >= 0) outputs[s].push_back(e.token); });
    ASSERT_TRUE(id.is_ok());
    ids[s] = *id;
  }
  while (!(*spec_engine)->idle()) ASSERT_TRUE((*spec_engine)->step().is_ok());
  int64_t tree_rounds = 0;
  for (int s = 0; s < kSamples; ++s) {
    ASSERT_GE(outputs[s].size(), 2u);
    ++observed[{outputs[s][0], outputs[s][1]}];
    verified += (*spec_engine)->timings(ids[s]).spec.rounds;
    accepted += (*spec_engine)->timings(ids[s]).spec.accepted;
    tree_rounds += (*spec_engine)->timings(ids[s]).spec.tree_rounds;
  }
  if (tree_nodes > 0) {
    EXPECT_GT(tree_rounds, kSamples / 10) << "few drafts branched";
  }
  // Both branches of the rule must have been taken: acceptance (p/q) and resampling from the residual.
  EXPECT_GT(accepted, kSamples / 50);
  EXPECT_LT(accepted, verified - kSamples / 50);
  double x2 = 0.0;
  int cells = 0;
  for (const auto& [pair, p] : expected) {
    const double e = p * kSamples;
    const double o = observed.count(pair) ? static_cast<double>(observed[pair]) : 0.0;
    x2 += (o - e) * (o - e) / e;
    ++cells;
  }
  int64_t outside = 0;
  for (const auto& [pair, count] : observed) outside += expected.count(pair) ? 0 : count;
  EXPECT_EQ(outside, 0) << "tokens outside the target's top-k support were emitted";
  const double p_value = chi_square_p_value(x2, cells - 1);
  // Significance 1e-4 (seeds are fixed, so the outcome is deterministic; the threshold keeps it meaningful).
  EXPECT_GT(p_value, 1e-4) << "chi-square " << x2 << " over " << cells << " cells";
  std::printf("%s: chi-square %.2f, df %d, p = %.3f; %lld rounds, %lld drafts accepted\n", mode.c_str(), x2, cells - 1,
              p_value, static_cast<long long>(verified), static_cast<long long>(accepted));
}

TEST(SpecSampling, NgramKeepsTheTargetDistribution) { expect_target_distribution("ngram", "", 1000); }

// Trees of continuations: t1 recurs in the prompt with other followers, so the root's children are
// alternatives, verified by recursive rejection.
TEST(SpecSampling, NgramTreesKeepTheTargetDistribution) { expect_target_distribution("ngram", "", 1000, 6); }

// MTP trees grown best first: the block's alternatives and the nodes below them, verified by recursive
// rejection. On the trained hybrid, whose block drafts the target's likely tokens (a random block's never are).
TEST(SpecSampling, MtpTreesKeepTheTargetDistribution) {
  const std::string trained =
      (std::filesystem::path(REWIND_TEST_DATA) / ".." / ".." / "models" / "stdlib-target-q8_0.gguf").lexically_normal();
  expect_target_distribution("mtp", "", 2000, 6, trained);
}

TEST(SpecSampling, DraftModelKeepsTheTargetDistribution) {
  expect_target_distribution("draft", test::twin_of("qwen35-tiny-f32.gguf"), 2000);
}

}  // namespace
}  // namespace rwd
