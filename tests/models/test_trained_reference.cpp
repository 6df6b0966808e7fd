// A trained Qwen3.5-layout model (tests/data/train, made by tools/train: transformers' Qwen3_5ForCausalLM with
// an MTP block, trained for 30 steps on the Python stdlib, exported by llama.cpp's converter at f32) against the
// training framework's own float64 forward of the same checkpoint: the model definition Qwen publishes, which
// nobody here wrote, on weights an optimizer moved rather than a generator drew. The main head is checked at
// every position, in one batch and token by token; the MTP head at the recorded rows, fed as rewind's MTP
// proposer feeds it (row p reads token p + 1 and the trunk's final hidden state at p, at position p).
// links: rewind_runtime
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"

namespace rwd {
namespace {

// The bound for "agrees with the framework". Nearly all of what it has to absorb is one definition:
// transformers (as FLA) L2-normalizes GDN q and k as x * rsqrt(sum x^2 + 1e-6), llama.cpp and rewind as
// x / max(|x|, 1e-6). Swapping the former for the latter in the framework reproduces rewind's error at every
// position (5.5e-4 at position 0, where the short context keeps |q|, |k| smallest; 1e-5 to 2e-4 elsewhere).
constexpr double kTolerance = 1e-3;
constexpr const char* kName = "stdlib-tiny-f32";

struct Reference {
  std::vector<int32_t> tokens;
  std::vector<std::vector<double>> logits;
  std::vector<int64_t> mtp_positions;
  std::vector<std::vector<double>> mtp_logits;
};

std::string data_path(const std::string& extension) {
  return (std::filesystem::path(REWIND_TEST_DATA) / "train" / (std::string(kName) + extension)).string();
}

Reference load_reference() {
  const std::filesystem::path path = data_path(".json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string() + " (tools/train/README.md says how it is made)");
  const nlohmann::json doc = nlohmann::json::parse(in);
  Reference r;
  r.tokens = doc.at("tokens").get<std::vector<int32_t>>();
  r.logits = doc.at("logits").get<std::vector<std::vector<double>>>();
  r.mtp_positions = doc.at("mtp_positions").get<std::vector<int64_t>>();
  r.mtp_logits = doc.at("mtp_logits").get<std::vector<std::vector<double>>>();
  return r;
}

double max_error(const float* row, const std::vector<double>& expected) {
  double worst = 0;
  for (size_t v = 0; v < expected.size(); ++v) worst = std::max(worst, std::abs(row[v] - expected[v]));
  return worst;
}

class TrainedReference : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_ = load_reference();
    ASSERT_EQ(ref_.logits.size(), ref_.tokens.size());
    ASSERT_EQ(ref_.mtp_logits.size(), ref_.mtp_positions.size());
    auto loaded = model::Model::load(data_path(".gguf"));
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
    model_ = std::move(*loaded);
    ASSERT_EQ(model_->hparams().n_vocab, static_cast<int64_t>(ref_.logits.front().size()));
  }

  state::ModelState new_state() const {
    return state::ModelState(model_->kv_specs(), model_->recurrent_specs(), 1, 256);
  }

  Reference ref_;
  std::unique_ptr<model::Model> model_;
  ThreadPool pool_{2};
};

TEST_F(TrainedReference, MainHeadMatchesTransformersInOneBatch) {
  model::ForwardContext ctx(*model_, pool_, 256);
  state::ModelState state = new_state();
  model::Batch batch;
  for (size_t i = 0; i < ref_.tokens.size(); ++i) batch.add(ref_.tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
  const int64_t n_vocab = model_->hparams().n_vocab;
  double worst = 0;
  for (size_t i = 0; i < ref_.tokens.size(); ++i) {
    const double error = max_error(logits.data() + i * n_vocab, ref_.logits[i]);
    EXPECT_LT(error, kTolerance) << "position " << i;
    worst = std::max(worst, error);
  }
  std::printf("main head, one batch: max |rewind - transformers| = %.3g\n", worst);
}

TEST_F(TrainedReference, MainHeadMatchesTransformersTokenByToken) {
  model::ForwardContext ctx(*model_, pool_, 256);
  state::ModelState state = new_state();
  model::Batch batch;
  std::vector<float> logits;
  for (size_t i = 0; i < ref_.tokens.size(); ++i) {
    batch.clear();
    batch.add(ref_.tokens[i], static_cast<int32_t>(i), 0, true);
    ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
    EXPECT_LT(max_error(logits.data(), ref_.logits[i]), kTolerance) << "position " << i;
  }
}

TEST_F(TrainedReference, MtpHeadMatchesTransformers) {
  ASSERT_FALSE(model_->weights().nextn.empty()) << kName << " has no MTP block";
  model::ForwardContext ctx(*model_, pool_, 256);
  state::ModelState state = new_state();
  const int64_t n_embd = model_->hparams().n_embd;
  const size_t n = ref_.tokens.size();
  model::Batch batch;
  for (size_t i = 0; i < n; ++i) batch.add(ref_.tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
  const std::vector<float> hidden(ctx.hidden_rows(), ctx.hidden_rows() + n * n_embd);
  batch.clear();
  for (size_t p = 0; p + 1 < n; ++p) batch.add(ref_.tokens[p + 1], static_cast<int32_t>(p), 0, true);
  std::vector<float> mtp_logits, mtp_hidden;
  ASSERT_TRUE(ctx.forward_mtp(batch, hidden.data(), state, mtp_logits, mtp_hidden).is_ok());
  const int64_t n_vocab = model_->hparams().n_vocab;
  double worst = 0;
  for (size_t j = 0; j < ref_.mtp_positions.size(); ++j) {
    const int64_t p = ref_.mtp_positions[j];
    ASSERT_LT(p + 1, static_cast<int64_t>(n));
    const double error = max_error(mtp_logits.data() + p * n_vocab, ref_.mtp_logits[j]);
    EXPECT_LT(error, kTolerance) << "MTP row " << p;
    worst = std::max(worst, error);
  }
  std::printf("MTP head: max |rewind - transformers| = %.3g\n", worst);
}

}  // namespace
}  // namespace rwd
