// The trained models shipped in models/ (models/README.md): their greedy continuation of a held-out code prompt
// against llama.cpp's on the same files (tests/data/reference/stdlib-*.json, from tools/refgen), and
// speculation on them, MTP with the target's own head and the draft model, reproducing plain decoding exactly.
// Both engines quantize activations to 8 bits for q8_0 weights, in different layouts, so ids must agree until
// llama.cpp's top-2 margin first drops below kMinMargin, with the top log-probability within kLogprobTolerance.
// links: rewind_runtime
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/engine_steps.h"
#include "rewind/engine.h"

namespace rwd {
namespace {

constexpr double kMinMargin = 0.05;
constexpr double kLogprobTolerance = 0.05;

std::string shipped_model(const std::string& file) {
  return (std::filesystem::path(REWIND_TEST_DATA) / ".." / ".." / "models" / file).lexically_normal().string();
}

nlohmann::json read_reference(const std::string& file) {
  std::ifstream in(std::string(REWIND_TEST_DATA) + "/reference/" + file);
  return nlohmann::json::parse(in);
}

std::unique_ptr<Engine> open_model(const std::string& model, const std::string& spec, const std::string& draft = "") {
  EngineOptions options;
  options.model_path = model;
  options.n_threads = 2;
  options.n_ctx = 1024;
  options.spec.mode = spec;
  if (spec != "none") {
    options.spec.draft_max = 4;
    options.spec.draft_model = draft;
    // Costs assumed, not timed: on a loaded machine the timed policy may rightly find that drafting does not
    // pay and decode plainly, and these tests are about what speculation outputs when it drafts.
    options.spec.assumed_verify_token = 0.1;
    options.spec.assumed_draft_token = 0.1;
  }
  return test::open_engine(options);
}

std::vector<TokenEvent> generate(Engine& engine, const std::vector<int32_t>& prompt, int n, int top_logprobs,
                                 SpecStats* spec = nullptr) {
  Request request;
  request.prompt_ids = prompt;
  request.max_tokens = n;
  request.sampling.temperature = 0.0f;
  request.ignore_eos = true;
  request.top_logprobs = top_logprobs;
  std::vector<TokenEvent> events;
  auto id = engine.submit(request, [&](const TokenEvent& e) {
    if (e.token >= 0) events.push_back(e);
  });
  EXPECT_TRUE(id.is_ok());
  test::step_until_idle(engine);
  if (spec != nullptr && id.is_ok()) *spec = engine.timings(*id).spec;
  return events;
}

std::vector<int32_t> ids_of(const std::vector<TokenEvent>& events) {
  std::vector<int32_t> ids;
  for (const TokenEvent& e : events) ids.push_back(e.token);
  return ids;
}

class TrainedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainedModel, GreedyContinuationMatchesLlamaCpp) {
  const std::string model = shipped_model(GetParam() + ".gguf");
  ASSERT_TRUE(std::filesystem::exists(model)) << model;
  const nlohmann::json reference = read_reference(GetParam() + ".heldout.json");
  auto engine = open_model(model, "none");
  ASSERT_NE(engine, nullptr);
  const auto expected_prompt = reference["prompt"]["ids"].get<std::vector<int32_t>>();
  auto ids = engine->tokenize(reference["prompt"]["text"], engine->add_bos_default(), false);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, expected_prompt) << "tokenization of the prompt text";

  const auto& steps = reference["steps"];
  const std::vector<TokenEvent> events = generate(*engine, expected_prompt, static_cast<int>(steps.size()), 5);
  ASSERT_EQ(events.size(), steps.size());
  size_t n_compared = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i]["margin"].get<double>() < kMinMargin) break;
    ASSERT_EQ(events[i].token, steps[i]["id"].get<int32_t>()) << GetParam() << " step " << i;
    EXPECT_NEAR(events[i].top[0].logprob, steps[i]["top"][0][1].get<double>(), kLogprobTolerance)
        << GetParam() << " step " << i;
    ++n_compared;
  }
  EXPECT_GE(n_compared, 16u) << "too few steps before a near tie to say the engines agree";
  RecordProperty("steps_compared", static_cast<int>(n_compared));
}

INSTANTIATE_TEST_SUITE_P(Shipped, TrainedModel, ::testing::Values("stdlib-target-q8_0", "stdlib-draft-q8_0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The mission on the shipped pair: the target's MTP head and the draft model both draft and get verified, and
// the output is plain decoding's, token for token.
TEST(TrainedPair, SpeculationReproducesPlainDecoding) {
  const std::string target = shipped_model("stdlib-target-q8_0.gguf");
  const std::string draft = shipped_model("stdlib-draft-q8_0.gguf");
  const auto prompt = read_reference("stdlib-target-q8_0.heldout.json")["prompt"]["ids"].get<std::vector<int32_t>>();
  constexpr int kTokens = 96;
  auto plain_engine = open_model(target, "none");
  ASSERT_NE(plain_engine, nullptr);
  const std::vector<int32_t> plain = ids_of(generate(*plain_engine, prompt, kTokens, 0));
  ASSERT_EQ(plain.size(), static_cast<size_t>(kTokens));
  for (const std::string spec : {"mtp", "draft"}) {
    auto engine = open_model(target, spec, spec == "draft" ? draft : "");
    ASSERT_NE(engine, nullptr);
    SpecStats stats;
    EXPECT_EQ(ids_of(generate(*engine, prompt, kTokens, 0, &stats)), plain) << "--spec " << spec;
    EXPECT_GT(stats.accepted, 0) << "--spec " << spec << ": nothing accepted, so nothing was checked";
    EXPECT_GT(stats.drafted, stats.accepted) << "--spec " << spec << ": no rejection, so no rollback was checked";
  }
}

}  // namespace
}  // namespace rwd
