// The tensor-name table. Order follows the TensorKind enum; a static_assert keeps them in step.
#include "gguf/tensor_names.h"

#include <fmt/format.h>

#include <array>

#include "base/check.h"

namespace rwd::gguf {
namespace {

struct NameRow {
  TensorKind kind;
  std::string_view base;
  bool per_layer;
};

constexpr auto kNames = std::to_array<NameRow>({
    {TensorKind::token_embd, "token_embd", false},
    {TensorKind::output_norm, "output_norm", false},
    {TensorKind::token_embd_norm, "token_embd_norm", false},
    {TensorKind::output, "output", false},
    {TensorKind::attn_norm, "attn_norm", true},
    {TensorKind::attn_q, "attn_q", true},
    {TensorKind::attn_k, "attn_k", true},
    {TensorKind::attn_v, "attn_v", true},
    {TensorKind::attn_qkv, "attn_qkv", true},
    {TensorKind::attn_gate, "attn_gate", true},
    {TensorKind::attn_output, "attn_output", true},
    {TensorKind::attn_q_norm, "attn_q_norm", true},
    {TensorKind::attn_k_norm, "attn_k_norm", true},
    {TensorKind::attn_post_norm, "post_attention_norm", true},
    {TensorKind::ffn_norm, "ffn_norm", true},
    {TensorKind::ffn_gate, "ffn_gate", true},
    {TensorKind::ffn_up, "ffn_up", true},
    {TensorKind::ffn_down, "ffn_down", true},
    {TensorKind::ffn_post_norm, "post_ffw_norm", true},
    {TensorKind::ffn_gate_inp, "ffn_gate_inp", true},
    {TensorKind::ffn_gate_exps, "ffn_gate_exps", true},
    {TensorKind::ffn_up_exps, "ffn_up_exps", true},
    {TensorKind::ffn_down_exps, "ffn_down_exps", true},
    {TensorKind::ffn_gate_inp_shexp, "ffn_gate_inp_shexp", true},
    {TensorKind::ffn_gate_shexp, "ffn_gate_shexp", true},
    {TensorKind::ffn_up_shexp, "ffn_up_shexp", true},
    {TensorKind::ffn_down_shexp, "ffn_down_shexp", true},
    {TensorKind::ssm_in, "ssm_in", true},
    {TensorKind::ssm_conv1d, "ssm_conv1d", true},
    {TensorKind::ssm_conv1d_q, "ssm_conv1d_q", true},
    {TensorKind::ssm_conv1d_k, "ssm_conv1d_k", true},
    {TensorKind::ssm_conv1d_v, "ssm_conv1d_v", true},
    {TensorKind::ssm_dt, "ssm_dt", true},
    {TensorKind::ssm_a, "ssm_a", true},
    {TensorKind::ssm_d, "ssm_d", true},
    {TensorKind::ssm_alpha, "ssm_alpha", true},
    {TensorKind::ssm_beta, "ssm_beta", true},
    {TensorKind::ssm_ba, "ssm_ba", true},
    {TensorKind::ssm_f_a, "ssm_f_a", true},
    {TensorKind::ssm_f_b, "ssm_f_b", true},
    {TensorKind::ssm_g_a, "ssm_g_a", true},
    {TensorKind::ssm_g_b, "ssm_g_b", true},
    {TensorKind::ssm_norm, "ssm_norm", true},
    {TensorKind::ssm_out, "ssm_out", true},
    {TensorKind::shortconv_conv, "shortconv.conv", true},
    {TensorKind::shortconv_in_proj, "shortconv.in_proj", true},
    {TensorKind::shortconv_out_proj, "shortconv.out_proj", true},
    {TensorKind::nextn_eh_proj, "nextn.eh_proj", true},
    {TensorKind::nextn_embed_tokens, "nextn.embed_tokens", true},
    {TensorKind::nextn_enorm, "nextn.enorm", true},
    {TensorKind::nextn_hnorm, "nextn.hnorm", true},
    {TensorKind::nextn_shared_head_head, "nextn.shared_head_head", true},
    {TensorKind::nextn_shared_head_norm, "nextn.shared_head_norm", true},
    {TensorKind::rope_freqs, "rope_freqs", true},
    {TensorKind::ffn_exp_probs_b, "exp_probs_b", true},
    {TensorKind::attn_q_a, "attn_q_a", true},
    {TensorKind::attn_q_b, "attn_q_b", true},
    {TensorKind::attn_q_a_norm, "attn_q_a_norm", true},
    {TensorKind::attn_kv_a_mqa, "attn_kv_a_mqa", true},
    {TensorKind::attn_kv_a_norm, "attn_kv_a_norm", true},
    {TensorKind::attn_kv_b, "attn_kv_b", true},
    {TensorKind::attn_k_b, "attn_k_b", true},
    {TensorKind::attn_v_b, "attn_v_b", true},
    {TensorKind::ffn_latent_down, "ffn_latent_down", true},
    {TensorKind::ffn_latent_up, "ffn_latent_up", true},
});

constexpr bool table_matches_enum() {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (static_cast<size_t>(kNames[i].kind) != i) return false;
  }
  return kNames.back().kind == TensorKind::ffn_latent_up;
}
static_assert(table_matches_enum(), "kNames must list every TensorKind once, in enum order");

const NameRow& row(TensorKind kind) {
  const auto index = static_cast<size_t>(kind);
  REWIND_CHECK(index < kNames.size(), "TensorKind {} has no table row", index);
  return kNames[index];
}

std::string_view suffix_text(TensorSuffix suffix) {
  switch (suffix) {
    case TensorSuffix::weight: return ".weight";
    case TensorSuffix::bias: return ".bias";
    case TensorSuffix::none: return "";
  }
  return "";
}

}  // namespace

std::string_view tensor_base_name(TensorKind kind) { return row(kind).base; }

bool is_per_layer(TensorKind kind) { return row(kind).per_layer; }

std::string tensor_name(TensorKind kind, TensorSuffix suffix) {
  const NameRow& name = row(kind);
  REWIND_CHECK(!name.per_layer, "tensor '{}' is per layer: pass the layer index", name.base);
  return fmt::format("{}{}", name.base, suffix_text(suffix));
}

std::string tensor_name(TensorKind kind, int layer, TensorSuffix suffix) {
  const NameRow& name = row(kind);
  REWIND_CHECK(name.per_layer, "tensor '{}' is not per layer, but layer {} was given", name.base, layer);
  REWIND_CHECK(layer >= 0, "tensor '{}': layer index {} is negative", name.base, layer);
  return fmt::format("blk.{}.{}{}", layer, name.base, suffix_text(suffix));
}

}  // namespace rwd::gguf
