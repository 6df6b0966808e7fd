// Golden tests against llama.cpp's outputs for the same random-weight models (tests/data/<arch>-tiny-f32.*, the
// expected values made by another implementation): greedy ids over 64 steps, top-5 log-probabilities and full
// logit vectors within 1e-3, for every architecture of the registry. llama.cpp's CPU GELU reads a table indexed
// by the fp16-rounded input, so on GeGLU models (gemma3) the two engines differ by a few 1e-3 by construction;
// the tolerance there is kGeluTolerance.
// links: rewind_runtime
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "common/registry.h"
#include "rewind/engine.h"

namespace rwd {
namespace {

constexpr double kTolerance = 1e-3;
constexpr double kGeluTolerance = 3e-3;

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  double tolerance() const {
    auto model = model::Model::load(model_path());
    const bool gelu = model.is_ok() && (*model)->hparams().ffn_activation == model::FfnActivation::gelu_tanh;
    return gelu ? kGeluTolerance : kTolerance;
  }
  std::string model_path() const { return std::string(REWIND_TEST_DATA) + "/" + GetParam() + "-tiny-f32.gguf"; }
  nlohmann::json load_golden() const {
    const std::string path = std::string(REWIND_TEST_DATA) + "/" + GetParam() + "-tiny-f32.json";
    std::ifstream in(path);
    EXPECT_TRUE(in) << path << " is missing: every architecture needs a llama.cpp golden (tests/data/README.md)";
    return nlohmann::json::parse(in);
  }
};

TEST_P(Golden, GreedyIdsAndTopLogprobsMatchLlamaCpp) {
  const nlohmann::json golden = load_golden();
  const std::string kModel = model_path();
  const double tolerance = this->tolerance();
  for (int n_threads : {1, 2}) {
    EngineOptions options;
    options.model_path = kModel;
    options.n_threads = n_threads;
    options.n_ctx = 256;
    auto engine = Engine::open(options);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    Request request;
    request.prompt_ids = golden["prompt"]["ids"].get<std::vector<int32_t>>();
    request.max_tokens = golden["greedy"]["n_predict"].get<int>();
    request.sampling.temperature = 0.0f;
    request.ignore_eos = true;
    request.top_logprobs = 5;
    std::vector<TokenEvent> events;
    ASSERT_TRUE((*engine)->submit(request, [&](const TokenEvent& e) {
      if (e.token >= 0) events.push_back(e);
    }).is_ok());
    while (!(*engine)->idle()) ASSERT_TRUE((*engine)->step().is_ok());

    const auto expected_ids = golden["greedy"]["ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(events.size(), expected_ids.size());
    for (size_t i = 0; i < expected_ids.size(); ++i) {
      ASSERT_EQ(events[i].token, expected_ids[i]) << "step " << i << " threads " << n_threads;
      const auto& top = golden["steps"][i]["top"];
      ASSERT_EQ(events[i].top.size(), top.size());
      for (size_t j = 0; j < top.size(); ++j) {
        // Near-ties may order differently; compare the log-probability of each golden id.
        const int32_t id = top[j][0].get<int32_t>();
        const double expected_lp = top[j][1].get<double>();
        bool found = false;
        for (const TokenLogprob& entry : events[i].top) {
          if (entry.id == id) {
            EXPECT_NEAR(entry.logprob, expected_lp, tolerance) << "step " << i << " id " << id;
            found = true;
          }
        }
        if (!found) {
          EXPECT_NEAR(events[i].top.back().logprob, expected_lp, tolerance) << "step " << i << " missing id " << id;
        }
      }
    }
    // The golden text renders control tokens and invalid UTF-8 its own way; compare it where every id is a
    // printable byte (models with masked output rows).
    const bool printable = std::all_of(expected_ids.begin(), expected_ids.end(),
                                       [](int32_t id) { return id >= 0x20 && id <= 0x7e; });
    if (printable) {
      EXPECT_EQ((*engine)->detokenize(expected_ids), golden["greedy"]["text"].get<std::string>());
    }
  }
}

TEST_P(Golden, FullLogitsMatchLlamaCpp) {
  const nlohmann::json golden = load_golden();
  const double tolerance = this->tolerance();
  auto model = model::Model::load(model_path());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  model::ForwardContext ctx(**model, pool, 128);
  state::ModelState model_state((*model)->kv_specs(), (*model)->recurrent_specs(), 1, 256);
  std::vector<int32_t> tokens = golden["prompt"]["ids"].get<std::vector<int32_t>>();
  const auto greedy = golden["greedy"]["ids"].get<std::vector<int32_t>>();
  const auto& values = golden["full_logits"]["values"];
  model::Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i + 1 == tokens.size());
  std::vector<float> logits;
  for (size_t step = 0; step < values.size(); ++step) {
    ASSERT_TRUE(ctx.forward(batch, model_state, logits).is_ok());
    const auto expected = values[step]["logits"].get<std::vector<double>>();
    ASSERT_EQ(logits.size(), expected.size());
    double max_error = 0.0;
    for (size_t v = 0; v < expected.size(); ++v) max_error = std::max(max_error, std::abs(logits[v] - expected[v]));
    EXPECT_LT(max_error, tolerance) << "generated step " << step;
    const int32_t next = greedy[step];
    batch.clear();
    batch.add(next, static_cast<int32_t>(tokens.size()), 0, true);
    tokens.push_back(next);
  }
}

// Every architecture of the registry: a registry row without its golden fails here, naming the missing file.
INSTANTIATE_TEST_SUITE_P(Models, Golden, ::testing::ValuesIn(test::all_archs()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return test::test_name_part(param_info.param);
                         });

}  // namespace
}  // namespace rwd
