// The invariants exact speculation rests on, for the hybrid qwen35 model (Gated DeltaNet + gated attention):
// a token's logits are bit-identical whether it is computed inside a prompt batch, alone, or beside another
// slot's tokens; a slot's recurrent state is never touched by another slot's tokens (poisoned with 0x3e
// bytes); and a reset slot starts a new sequence exactly like a fresh cache.
// links: rewind_runtime
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/thread_pool.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "rewind/tools.h"

namespace rwd {
namespace {

class HybridInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("rewind_hybrid_" + GetParam() + std::to_string(::getpid()) + ".gguf")).string();
    ASSERT_TRUE(make_synthetic_model({"qwen35", "tiny", GetParam(), 17, path_}).is_ok());
    auto model = model::Model::load(path_);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(model).value();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<int32_t> tokens(int n, int salt) const {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(32 + (i * 31 + salt * 7 + 3) % 95);
    return ids;
  }

  std::string path_;
  std::unique_ptr<model::Model> model_;
};

TEST_P(HybridInvariance, PrefillDecodeAndSlotsAreBitExact) {
  const int64_t n_vocab = model_->hparams().n_vocab;
  ThreadPool pool(2);
  model::ForwardContext ctx(*model_, pool, 64);
  const std::vector<int32_t> a = tokens(23, 1);
  const std::vector<int32_t> b = tokens(30, 2);
  model::Batch batch;
  std::vector<float> logits;

  state::ModelState alone(model_->kv_specs(), model_->recurrent_specs(), 3, 64);
  std::vector<std::vector<float>> expected;
  for (size_t i = 0; i < a.size(); ++i) {
    batch.clear();
    batch.add(a[i], static_cast<int32_t>(i), 0, true);
    ASSERT_TRUE(ctx.forward(batch, alone, logits).is_ok());
    expected.push_back(logits);
  }

  // a's prompt in slot 2 as one batch next to b in slot 0 (prompt split in two chunks); slot 1 is poisoned.
  state::ModelState mixed(model_->kv_specs(), model_->recurrent_specs(), 3, 64);
  auto& rec = mixed.recurrent();
  for (int il = 0; il < rec.n_layers(); ++il) {
    std::memset(rec.conv_window(il, 1), 0x3e, rec.spec(il).conv_floats() * sizeof(float));
    std::memset(rec.ssm_state(il, 1), 0x3e, rec.spec(il).ssm_floats() * sizeof(float));
  }
  std::vector<uint8_t> poison_before;
  for (int il = 0; il < rec.n_layers(); ++il) {
    const auto* conv = reinterpret_cast<const uint8_t*>(rec.conv_window(il, 1));
    const auto* ssm = reinterpret_cast<const uint8_t*>(rec.ssm_state(il, 1));
    poison_before.insert(poison_before.end(), conv, conv + rec.spec(il).conv_floats() * sizeof(float));
    poison_before.insert(poison_before.end(), ssm, ssm + rec.spec(il).ssm_floats() * sizeof(float));
  }
  batch.clear();
  for (int i = 0; i < 12; ++i) batch.add(b[i], i, 0, false);
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<int32_t>(i), 2, true);
  ASSERT_TRUE(ctx.forward(batch, mixed, logits).is_ok());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(logits.data() + i * n_vocab, expected[i].data(), n_vocab * sizeof(float)))
        << "position " << i << " differs between a mixed batch and decoding alone";
  }
  batch.clear();
  for (size_t i = 12; i < b.size(); ++i) batch.add(b[i], static_cast<int32_t>(i), 0, true);
  ASSERT_TRUE(ctx.forward(batch, mixed, logits).is_ok());

  std::vector<uint8_t> poison_after;
  for (int il = 0; il < rec.n_layers(); ++il) {
    const auto* conv = reinterpret_cast<const uint8_t*>(rec.conv_window(il, 1));
    const auto* ssm = reinterpret_cast<const uint8_t*>(rec.ssm_state(il, 1));
    poison_after.insert(poison_after.end(), conv, conv + rec.spec(il).conv_floats() * sizeof(float));
    poison_after.insert(poison_after.end(), ssm, ssm + rec.spec(il).ssm_floats() * sizeof(float));
  }
  EXPECT_EQ(poison_before, poison_after) << "slot 1 was written by other slots' tokens";

  // Reusing slot 2 for a new sequence after a reset gives exactly the fresh-cache logits again.
  mixed.reset_slot(2);
  batch.clear();
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<int32_t>(i), 2, i + 1 == a.size());
  ASSERT_TRUE(ctx.forward(batch, mixed, logits).is_ok());
  EXPECT_EQ(0, std::memcmp(logits.data(), expected.back().data(), n_vocab * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HybridInvariance, ::testing::Values("f32", "q8_0"));

}  // namespace
}  // namespace rwd
