// The key and tensor-name tables against files written by llama.cpp's gguf-py (every architecture key and
// tensor name in the golden files must come out of the tables) and against names transcribed from
// gguf-py/gguf/constants.py for kinds the golden files do not contain.
// links: rewind_gguf
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/keys.h"
#include "gguf/tensor_names.h"

namespace rwd::gguf {
namespace {

constexpr int kLastArchKey = static_cast<int>(ArchKey::shortconv_l_cache);
constexpr int kLastTensorKind = static_cast<int>(TensorKind::nextn_shared_head_norm);

std::set<std::string> all_arch_keys(std::string_view arch) {
  std::set<std::string> keys;
  for (int key = 0; key <= kLastArchKey; ++key) keys.insert(arch_key(arch, static_cast<ArchKey>(key)));
  return keys;
}

std::set<std::string> all_tensor_names(int n_layers) {
  std::set<std::string> names;
  for (int kind = 0; kind <= kLastTensorKind; ++kind) {
    for (const TensorSuffix suffix : {TensorSuffix::weight, TensorSuffix::bias, TensorSuffix::none}) {
      const auto tensor_kind = static_cast<TensorKind>(kind);
      if (!is_per_layer(tensor_kind)) {
        names.insert(tensor_name(tensor_kind, suffix));
        continue;
      }
      for (int layer = 0; layer < n_layers; ++layer) names.insert(tensor_name(tensor_kind, layer, suffix));
    }
  }
  return names;
}

class GoldenTables : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTables, EveryKeyAndTensorNameComesFromTheTables) {
  auto opened = GgufFile::open(std::string(REWIND_TEST_DATA "/") + GetParam());
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  const std::string arch = file.get_string(kGeneralArchitecture).value();
  const std::set<std::string> arch_keys = all_arch_keys(arch);
  int n_arch_keys = 0;
  for (const auto& [key, value] : file.metadata()) {
    if (key.rfind(arch + ".", 0) != 0) continue;
    EXPECT_TRUE(arch_keys.count(key)) << key << " has no ArchKey";
    ++n_arch_keys;
  }
  EXPECT_GE(n_arch_keys, 11);

  for (const std::string_view key : {kGeneralArchitecture, kGeneralName, kGeneralFileType, kTokenizerModel,
                                     kTokenizerPre, kTokenizerTokens, kTokenizerTokenType, kTokenizerMerges,
                                     kTokenizerBosTokenId, kTokenizerEosTokenId, kTokenizerPaddingTokenId,
                                     kTokenizerAddBosToken, kTokenizerAddEosToken}) {
    EXPECT_TRUE(file.has(key)) << key;
  }

  const uint32_t n_layers = file.get_u32(arch_key(arch, ArchKey::block_count)).value();
  const std::set<std::string> names = all_tensor_names(static_cast<int>(n_layers));
  for (const TensorInfo& info : file.tensors()) {
    EXPECT_TRUE(names.count(info.tensor.name)) << info.tensor.name << " has no TensorKind";
  }
}

INSTANTIATE_TEST_SUITE_P(Files, GoldenTables, ::testing::Values("qwen3-tiny-f32.gguf", "qwen35-tiny-f32.gguf"));

TEST(GgufTables, ArchKeysAreSpelledAsInLlamaCpp) {
  EXPECT_EQ(arch_key("qwen3", ArchKey::block_count), "qwen3.block_count");
  EXPECT_EQ(arch_key("gemma3", ArchKey::attention_sliding_window), "gemma3.attention.sliding_window");
  EXPECT_EQ(arch_key("gemma2", ArchKey::final_logit_softcapping), "gemma2.final_logit_softcapping");
  EXPECT_EQ(arch_key("gemma2", ArchKey::attn_logit_softcapping), "gemma2.attn_logit_softcapping");
  EXPECT_EQ(arch_key("llama", ArchKey::rope_scaling_type), "llama.rope.scaling.type");
  EXPECT_EQ(arch_key("llama", ArchKey::rope_scaling_factor), "llama.rope.scaling.factor");
  EXPECT_EQ(arch_key("qwen3moe", ArchKey::expert_used_count), "qwen3moe.expert_used_count");
  EXPECT_EQ(arch_key("qwen35moe", ArchKey::expert_shared_feed_forward_length),
            "qwen35moe.expert_shared_feed_forward_length");
  EXPECT_EQ(arch_key("kimi-linear", ArchKey::kda_head_dim), "kimi-linear.kda.head_dim");
  EXPECT_EQ(arch_key("lfm2", ArchKey::shortconv_l_cache), "lfm2.shortconv.l_cache");
  EXPECT_EQ(arch_key("qwen3next", ArchKey::attention_recurrent_layers), "qwen3next.attention.recurrent_layers");
  EXPECT_EQ(arch_key_suffix(ArchKey::attention_layer_norm_rms_epsilon), "attention.layer_norm_rms_epsilon");
  EXPECT_EQ(kTokenizerUnknownTokenId, "tokenizer.ggml.unknown_token_id");
  EXPECT_EQ(kTokenizerEotTokenId, "tokenizer.ggml.eot_token_id");
  EXPECT_EQ(kTokenizerChatTemplate, "tokenizer.chat_template");
  EXPECT_EQ(kGeneralAlignment, "general.alignment");
  // Every suffix is distinct, so no two ArchKeys read the same key.
  EXPECT_EQ(all_arch_keys("a").size(), static_cast<size_t>(kLastArchKey + 1));
}

TEST(GgufTables, TensorNamesAreSpelledAsInLlamaCpp) {
  EXPECT_EQ(tensor_name(TensorKind::token_embd), "token_embd.weight");
  EXPECT_EQ(tensor_name(TensorKind::output), "output.weight");
  EXPECT_EQ(tensor_name(TensorKind::attn_q, 0), "blk.0.attn_q.weight");
  EXPECT_EQ(tensor_name(TensorKind::attn_q, 12, TensorSuffix::bias), "blk.12.attn_q.bias");
  EXPECT_EQ(tensor_name(TensorKind::attn_post_norm, 3), "blk.3.post_attention_norm.weight");
  EXPECT_EQ(tensor_name(TensorKind::ffn_post_norm, 2), "blk.2.post_ffw_norm.weight");
  EXPECT_EQ(tensor_name(TensorKind::ssm_a, 1, TensorSuffix::none), "blk.1.ssm_a");
  EXPECT_EQ(tensor_name(TensorKind::ssm_dt, 1, TensorSuffix::bias), "blk.1.ssm_dt.bias");
  EXPECT_EQ(tensor_name(TensorKind::ssm_ba, 0), "blk.0.ssm_ba.weight");
  EXPECT_EQ(tensor_name(TensorKind::ssm_conv1d_q, 0), "blk.0.ssm_conv1d_q.weight");
  EXPECT_EQ(tensor_name(TensorKind::ssm_g_b, 0), "blk.0.ssm_g_b.weight");
  EXPECT_EQ(tensor_name(TensorKind::ffn_gate_inp_shexp, 4), "blk.4.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(tensor_name(TensorKind::ffn_down_exps, 4), "blk.4.ffn_down_exps.weight");
  EXPECT_EQ(tensor_name(TensorKind::shortconv_in_proj, 5), "blk.5.shortconv.in_proj.weight");
  EXPECT_EQ(tensor_name(TensorKind::nextn_shared_head_head, 40), "blk.40.nextn.shared_head_head.weight");
  EXPECT_EQ(tensor_base_name(TensorKind::attn_post_norm), "post_attention_norm");
  EXPECT_FALSE(is_per_layer(TensorKind::output_norm));
  EXPECT_TRUE(is_per_layer(TensorKind::ssm_out));
  // Every base name is distinct.
  std::set<std::string_view> bases;
  for (int kind = 0; kind <= kLastTensorKind; ++kind) bases.insert(tensor_base_name(static_cast<TensorKind>(kind)));
  EXPECT_EQ(bases.size(), static_cast<size_t>(kLastTensorKind + 1));
}

TEST(GgufTablesDeathTest, LayerIndexMustMatchTheKind) {
  EXPECT_DEATH((void)tensor_name(TensorKind::attn_q), "is per layer");
  EXPECT_DEATH((void)tensor_name(TensorKind::token_embd, 0), "is not per layer");
  EXPECT_DEATH((void)tensor_name(TensorKind::attn_q, -1), "negative");
}

}  // namespace
}  // namespace rwd::gguf
