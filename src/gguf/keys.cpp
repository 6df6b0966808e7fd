// The architecture-prefixed key table. Order follows the ArchKey enum; a static_assert keeps them in step.
#include "gguf/keys.h"

#include <array>
#include <utility>

#include "base/check.h"

namespace rwd::gguf {
namespace {

constexpr auto kArchKeys = std::to_array<std::pair<ArchKey, std::string_view>>({
    {ArchKey::vocab_size, "vocab_size"},
    {ArchKey::context_length, "context_length"},
    {ArchKey::embedding_length, "embedding_length"},
    {ArchKey::block_count, "block_count"},
    {ArchKey::feed_forward_length, "feed_forward_length"},
    {ArchKey::expert_feed_forward_length, "expert_feed_forward_length"},
    {ArchKey::expert_shared_feed_forward_length, "expert_shared_feed_forward_length"},
    {ArchKey::expert_count, "expert_count"},
    {ArchKey::expert_used_count, "expert_used_count"},
    {ArchKey::nextn_predict_layers, "nextn_predict_layers"},
    {ArchKey::full_attention_interval, "full_attention_interval"},
    {ArchKey::final_logit_softcapping, "final_logit_softcapping"},
    {ArchKey::attn_logit_softcapping, "attn_logit_softcapping"},
    {ArchKey::attention_head_count, "attention.head_count"},
    {ArchKey::attention_head_count_kv, "attention.head_count_kv"},
    {ArchKey::attention_key_length, "attention.key_length"},
    {ArchKey::attention_value_length, "attention.value_length"},
    {ArchKey::attention_layer_norm_rms_epsilon, "attention.layer_norm_rms_epsilon"},
    {ArchKey::attention_sliding_window, "attention.sliding_window"},
    {ArchKey::attention_recurrent_layers, "attention.recurrent_layers"},
    {ArchKey::rope_dimension_count, "rope.dimension_count"},
    {ArchKey::rope_dimension_sections, "rope.dimension_sections"},
    {ArchKey::rope_freq_base, "rope.freq_base"},
    {ArchKey::rope_scaling_type, "rope.scaling.type"},
    {ArchKey::rope_scaling_factor, "rope.scaling.factor"},
    {ArchKey::ssm_conv_kernel, "ssm.conv_kernel"},
    {ArchKey::ssm_inner_size, "ssm.inner_size"},
    {ArchKey::ssm_state_size, "ssm.state_size"},
    {ArchKey::ssm_time_step_rank, "ssm.time_step_rank"},
    {ArchKey::ssm_group_count, "ssm.group_count"},
    {ArchKey::kda_head_dim, "kda.head_dim"},
    {ArchKey::shortconv_l_cache, "shortconv.l_cache"},
    {ArchKey::logit_scale, "logit_scale"},
    {ArchKey::residual_scale, "residual_scale"},
    {ArchKey::embedding_scale, "embedding_scale"},
    {ArchKey::attention_scale, "attention.scale"},
    {ArchKey::rope_scaling_finetuned, "rope.scaling.finetuned"},
    {ArchKey::expert_shared_count, "expert_shared_count"},
    {ArchKey::expert_weights_scale, "expert_weights_scale"},
    {ArchKey::expert_weights_norm, "expert_weights_norm"},
    {ArchKey::expert_gating_func, "expert_gating_func"},
    {ArchKey::leading_dense_block_count, "leading_dense_block_count"},
    {ArchKey::attention_key_length_mla, "attention.key_length_mla"},
    {ArchKey::attention_value_length_mla, "attention.value_length_mla"},
    {ArchKey::attention_kv_lora_rank, "attention.kv_lora_rank"},
    {ArchKey::attention_q_lora_rank, "attention.q_lora_rank"},
    {ArchKey::attention_layer_norm_epsilon, "attention.layer_norm_epsilon"},
    {ArchKey::moe_latent_size, "moe_latent_size"},
});

constexpr bool table_matches_enum() {
  for (size_t i = 0; i < kArchKeys.size(); ++i) {
    if (static_cast<size_t>(kArchKeys[i].first) != i) return false;
  }
  return kArchKeys.back().first == ArchKey::moe_latent_size;
}
static_assert(table_matches_enum(), "kArchKeys must list every ArchKey once, in enum order");

}  // namespace

std::string_view arch_key_suffix(ArchKey key) {
  const auto index = static_cast<size_t>(key);
  REWIND_CHECK(index < kArchKeys.size(), "ArchKey {} has no table row", index);
  return kArchKeys[index].second;
}

std::string arch_key(std::string_view arch, ArchKey key) {
  const std::string_view suffix = arch_key_suffix(key);
  std::string out;
  out.reserve(arch.size() + 1 + suffix.size());
  out.append(arch).append(".").append(suffix);
  return out;
}

}  // namespace rwd::gguf
