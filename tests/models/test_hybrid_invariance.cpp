// The invariants exact speculation rests on, for every architecture with recurrent layers, f32 and q8_0 (with
// f32 and f16 KV rows), and the other quantized types and q8_0 KV rows on qwen35 and lfm2:
// a token's logits are bit-identical whether it is computed inside a prompt batch, alone, or beside another
// slot's tokens; a slot's recurrent state is never touched by another slot's tokens (poisoned with 0x3e
// bytes); and a reset slot starts a new sequence exactly like a fresh cache. CTest runs it once per kernel set
// (REWIND_ISA), so every set the machine can run keeps these invariants.
// links: rewind_runtime rewind_synthetic rewind_kernels_cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "base/thread_pool.h"
#include "kernels/cpu/vec_dot.h"
#include "model/arch_info.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "state/model_state.h"
#include "synthetic/synthetic_model.h"
#include "tensor/dtype.h"

namespace rwd {
namespace {

struct Variant {
  const char* arch;
  const char* dtype;
  tensor::DType cache_type = tensor::DType::f32;  // how the KV rows of attention layers are stored
};

class HybridInvariance : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (const char* forced = std::getenv("REWIND_ISA"); forced != nullptr && *forced != '\0' &&
                                                        std::string(forced) != kernels::cpu::isa_name()) {
      GTEST_SKIP() << "this CPU cannot run REWIND_ISA=" << forced;
    }
    path_ = (std::filesystem::temp_directory_path() / (std::string("rewind_hybrid_") + GetParam().arch +
                                                       GetParam().dtype + std::to_string(::getpid()) + ".gguf"))
                .string();
    ASSERT_TRUE(make_synthetic_model({GetParam().arch, "tiny", GetParam().dtype, 17, path_}).is_ok());
    auto model = model::Model::load(path_);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    model_ = std::move(model).value();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  std::vector<int32_t> tokens(int n, int salt) const {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(32 + (i * 31 + salt * 7 + 3) % 95);
    return ids;
  }

  // A state of n_slots slots and 64 positions with the variant's KV cache type.
  state::ModelState make_state(int n_slots) const {
    state::StateOptions options;
    options.n_slots = n_slots;
    options.n_ctx = 64;
    options.cache_type_k = GetParam().cache_type;
    options.cache_type_v = GetParam().cache_type;
    return state::ModelState(model_->kv_specs(), model_->recurrent_specs(), options);
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

  state::ModelState alone = make_state(3);
  std::vector<std::vector<float>> expected;
  for (size_t i = 0; i < a.size(); ++i) {
    batch.clear();
    batch.add(a[i], static_cast<int32_t>(i), 0, true);
    ASSERT_TRUE(ctx.forward(batch, alone, logits).is_ok());
    expected.push_back(logits);
  }

  // a's prompt in slot 2 as one batch next to b in slot 0 (prompt split in two chunks); slot 1 is poisoned.
  state::ModelState mixed = make_state(3);
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

// Prompt processed in one batch, in chunks of 7 and token by token: the same final recurrent state (conv
// windows and delta-rule states, byte for byte) and the same next-token logits.
TEST_P(HybridInvariance, PrefillInOneBatchInChunksAndTokenByTokenAgree) {
  const int64_t n_vocab = model_->hparams().n_vocab;
  ThreadPool pool(2);
  model::ForwardContext ctx(*model_, pool, 64);
  const std::vector<int32_t> prompt = tokens(45, 3);
  std::vector<std::vector<float>> final_logits;
  std::vector<std::vector<uint8_t>> final_states;
  for (int64_t chunk : {int64_t{45}, int64_t{7}, int64_t{1}}) {
    state::ModelState state = make_state(1);
    std::vector<float> logits;
    for (int64_t begin = 0; begin < static_cast<int64_t>(prompt.size()); begin += chunk) {
      const int64_t end = std::min<int64_t>(begin + chunk, static_cast<int64_t>(prompt.size()));
      model::Batch batch;
      for (int64_t i = begin; i < end; ++i) batch.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == end);
      ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
    }
    final_logits.push_back(logits);
    std::vector<uint8_t> bytes;
    auto& rec = state.recurrent();
    for (int il = 0; il < rec.n_layers(); ++il) {
      const auto* conv = reinterpret_cast<const uint8_t*>(rec.conv_window(il, 0));
      const auto* ssm = reinterpret_cast<const uint8_t*>(rec.ssm_state(il, 0));
      bytes.insert(bytes.end(), conv, conv + rec.spec(il).conv_floats() * sizeof(float));
      bytes.insert(bytes.end(), ssm, ssm + rec.spec(il).ssm_floats() * sizeof(float));
    }
    final_states.push_back(bytes);
  }
  ASSERT_FALSE(final_states[0].empty());
  for (size_t i = 1; i < final_logits.size(); ++i) {
    EXPECT_EQ(final_states[i], final_states[0]) << "recurrent state differs with chunking " << i;
    EXPECT_EQ(0, std::memcmp(final_logits[i].data(), final_logits[0].data(), n_vocab * sizeof(float)))
        << "next-token logits differ with chunking " << i;
  }
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (std::string_view arch : model::arch_names()) {
    if (!model::find_arch(arch)->recurrent) continue;
    for (const char* dtype : {"f32", "q8_0"}) out.push_back({arch.data(), dtype});  // registry names are literals
    // The KV cache types llama.cpp users pick (f16 is the CLI's default) on the attention layers of each hybrid.
    out.push_back({arch.data(), "q8_0", tensor::DType::f16});
  }
  // Every other quantized weight type, on the Gated DeltaNet and short-convolution hybrids.
  for (const char* dtype : {"q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}) out.push_back({"qwen35", dtype});
  out.push_back({"lfm2", "q4_0"});
  out.push_back({"qwen35", "q8_0", tensor::DType::q8_0});
  out.push_back({"lfm2", "q8_0", tensor::DType::q8_0});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, HybridInvariance, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& param_info) {
                           std::string name = std::string(param_info.param.arch) + "_" + param_info.param.dtype;
                           if (param_info.param.cache_type != tensor::DType::f32) {
                             name += "_kv_" + std::string(tensor::dtype_name(param_info.param.cache_type));
                           }
                           std::replace(name.begin(), name.end(), '-', '_');  // falcon-h1
                           return name;
                         });

}  // namespace
}  // namespace rwd
