// One failing request fails alone: a fault injected into one request at each stage of a step (drafting — a
// failed call for several slots is retried for each alone —, the forward, verification, sampling) ends that request with an error naming the stage, while the requests decoded
// beside it give exactly what they give without the fault, the engine's step never fails, and the slot the
// faulty request held serves later requests exactly (its half-written state was reset, not reused).
// links: rewind_runtime
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/twin_model.h"
#include "rewind/engine.h"

namespace rwd {
namespace {

constexpr int kNewTokens = 12;

std::string data_path(const std::string& name) { return std::string(REWIND_TEST_DATA) + "/" + name; }

struct Output {
  std::vector<int32_t> ids;
  FinishReason reason = FinishReason::none;
  std::string error;
};

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> out;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 14 + 5 * p; ++i) ids.push_back(20 + (i % (4 + p)) * 9 % 70);
    out.push_back(ids);
  }
  return out;
}

std::unique_ptr<Engine> open(const std::string& model, const std::string& mode,
                             std::function<Status(std::string_view, int64_t)> inject_fault = {}) {
  EngineOptions options;
  options.model_path = data_path(model);
  options.n_threads = 2;
  options.n_slots = 2;
  options.n_ctx = 128;
  options.n_batch = 32;
  options.cache_ram_mib = 4;
  options.spec.mode = mode;
  if (mode == "draft") options.spec.draft_model = test::twin_of(model);
  options.spec.draft_max = 3;
  options.spec.adaptive = false;
  options.spec.ngram_min = 1;  // the random model seldom repeats 3 tokens: short matches make the verifies to fault
  options.spec.ngram_max = 3;
  options.inject_fault = std::move(inject_fault);
  auto engine = Engine::open(options);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  return engine.is_ok() ? std::move(engine).value() : nullptr;
}

// All prompts submitted at once (two slots, so requests run beside each other and wait in the queue).
std::vector<Output> run_all(Engine& engine, const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<Output> outputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Request request;
    request.prompt_ids = inputs[i];
    request.max_tokens = kNewTokens;
    request.sampling.temperature = 0.0f;
    request.ignore_eos = true;
    Output& out = outputs[i];
    auto id = engine.submit(request, [&out](const TokenEvent& event) {
      if (event.done) {
        out.reason = event.finish_reason;
        out.error = event.error;
      } else {
        out.ids.push_back(event.token);
      }
    });
    EXPECT_TRUE(id.is_ok()) << id.status().message();
  }
  while (!engine.idle()) {
    const Status status = engine.step();
    EXPECT_TRUE(status.is_ok()) << status.message();
    if (!status.is_ok()) break;
  }
  return outputs;
}

struct Case {
  std::string model;
  std::string mode;
  std::string stage;
  int occurrence;  // the faulty request fails from the n-th time it reaches the stage (later than the first if it can)
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.mode << " " << c.stage << " #" << c.occurrence; }

class StepFaults : public ::testing::TestWithParam<Case> {};

TEST_P(StepFaults, OnlyTheFaultyRequestFails) {
  const Case& c = GetParam();
  auto plain = open(c.model, "none");
  ASSERT_NE(plain, nullptr);
  const std::vector<Output> expected = run_all(*plain, prompts());

  constexpr int64_t kFaulty = 2;
  std::map<std::string, int> reached;
  auto engine = open(c.model, c.mode, [&](std::string_view stage, int64_t request_id) {
    if (request_id != kFaulty || stage != c.stage) return Status::ok();
    return ++reached[std::string(stage)] >= c.occurrence ? Status::error("injected fault") : Status::ok();
  });
  ASSERT_NE(engine, nullptr);
  const std::vector<Output> got = run_all(*engine, prompts());
  ASSERT_GE(reached[c.stage], c.occurrence) << "the stage was reached fewer times than the fault needs";
  for (size_t i = 0; i < got.size(); ++i) {
    if (static_cast<int64_t>(i) + 1 == kFaulty) {
      EXPECT_EQ(got[i].reason, FinishReason::error);
      EXPECT_NE(got[i].error.find(c.stage), std::string::npos) << got[i].error;
      EXPECT_NE(got[i].error.find("injected fault"), std::string::npos) << got[i].error;
      continue;
    }
    EXPECT_EQ(got[i].reason, FinishReason::length) << "request " << i + 1 << ": " << got[i].error;
    EXPECT_EQ(got[i].ids, expected[i].ids) << "request " << i + 1;
  }
  // The same prompts again, on the slots the faulty one left: every output exact, prefixes reused or not.
  const std::vector<Output> again = run_all(*engine, prompts());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].reason, FinishReason::length) << again[i].error;
    EXPECT_EQ(again[i].ids, expected[i].ids) << "request " << i + 1 << " of the second round";
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // Occurrences these prompts reach: mid-prompt or mid-generation where a stage repeats.
  const std::pair<const char*, int> stages[] = {{"propose", 2}, {"forward", 3}, {"verify", 1}, {"sample", 2}};
  for (const auto& [stage, occurrence] : stages) {
    if (std::string(stage) == "forward" || std::string(stage) == "sample") {
      out.push_back({"qwen35-tiny-f32.gguf", "none", stage, occurrence});
    }
    for (const char* mode : {"ngram", "mtp", "draft"}) out.push_back({"qwen35-tiny-f32.gguf", mode, stage, occurrence});
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& param) {
  return param.param.mode + "_" + param.param.stage;
}

INSTANTIATE_TEST_SUITE_P(Engine, StepFaults, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace rwd
