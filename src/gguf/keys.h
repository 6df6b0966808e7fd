// The GGUF metadata keys rewind reads or writes, spelled exactly as llama.cpp does (src/llama-arch.cpp,
// gguf-py/gguf/constants.py), so files from llama.cpp's converter load unchanged. One table: code never
// spells a key in a string literal. What a key means for a model, and whether it is required, is model/'s job.
#pragma once

#include <string>
#include <string_view>

namespace rwd::gguf {

// Keys that do not depend on the architecture.
inline constexpr std::string_view kGeneralArchitecture = "general.architecture";
inline constexpr std::string_view kGeneralName = "general.name";
inline constexpr std::string_view kGeneralAlignment = "general.alignment";
inline constexpr std::string_view kGeneralFileType = "general.file_type";

inline constexpr std::string_view kTokenizerModel = "tokenizer.ggml.model";
inline constexpr std::string_view kTokenizerPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokenizerTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kTokenizerScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kTokenizerTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kTokenizerMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kTokenizerBosTokenId = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kTokenizerEosTokenId = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kTokenizerUnknownTokenId = "tokenizer.ggml.unknown_token_id";
inline constexpr std::string_view kTokenizerPaddingTokenId = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kTokenizerEotTokenId = "tokenizer.ggml.eot_token_id";
inline constexpr std::string_view kTokenizerEomTokenId = "tokenizer.ggml.eom_token_id";
inline constexpr std::string_view kTokenizerAddBosToken = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kTokenizerAddEosToken = "tokenizer.ggml.add_eos_token";
inline constexpr std::string_view kTokenizerAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
inline constexpr std::string_view kTokenizerChatTemplate = "tokenizer.chat_template";

// Keys prefixed by the architecture name ("qwen35.block_count"); the enumerator names follow the key text.
enum class ArchKey {
  vocab_size,
  context_length,
  embedding_length,
  block_count,
  feed_forward_length,
  expert_feed_forward_length,
  expert_shared_feed_forward_length,
  expert_count,
  expert_used_count,
  nextn_predict_layers,
  full_attention_interval,
  final_logit_softcapping,
  attn_logit_softcapping,
  attention_head_count,
  attention_head_count_kv,
  attention_key_length,
  attention_value_length,
  attention_layer_norm_rms_epsilon,
  attention_sliding_window,
  attention_recurrent_layers,
  rope_dimension_count,
  rope_dimension_sections,
  rope_freq_base,
  rope_scaling_type,
  rope_scaling_factor,
  ssm_conv_kernel,
  ssm_inner_size,
  ssm_state_size,
  ssm_time_step_rank,
  ssm_group_count,
  kda_head_dim,
  shortconv_l_cache,
  logit_scale,
  residual_scale,
  embedding_scale,
  attention_scale,
  rope_scaling_finetuned,
  expert_shared_count,
  expert_weights_scale,
  expert_weights_norm,
  expert_gating_func,
  leading_dense_block_count,
  attention_key_length_mla,
  attention_value_length_mla,
  attention_kv_lora_rank,
  attention_q_lora_rank,
  attention_layer_norm_epsilon,
  moe_latent_size,
};

// The part after "<arch>.", e.g. "attention.head_count_kv".
std::string_view arch_key_suffix(ArchKey key);
// The full key, e.g. arch_key("qwen3", ArchKey::block_count) == "qwen3.block_count".
std::string arch_key(std::string_view arch, ArchKey key);

}  // namespace rwd::gguf
