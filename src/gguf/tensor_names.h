// GGUF tensor names, spelled exactly as llama.cpp's converter writes them (gguf-py/gguf/constants.py
// TENSOR_NAMES, src/llama-arch.cpp), through one table. Enumerators are the GGUF short names, which are also
// the weight member names in model/ (STYLE.md); the few exceptions say the GGUF spelling in a comment.
// Which tensors an architecture needs, and their shapes, belong to model/.
#pragma once

#include <string>
#include <string_view>

namespace rwd::gguf {

enum class TensorKind {
  // Whole-model tensors.
  token_embd,
  output_norm,
  token_embd_norm,  // LFM2 writes its final norm under this name
  output,
  // Per layer, "blk.<il>.<name>": attention.
  attn_norm,
  attn_q,
  attn_k,
  attn_v,
  attn_qkv,
  attn_gate,
  attn_output,
  attn_q_norm,
  attn_k_norm,
  attn_post_norm,  // "post_attention_norm": gemma's post-mixer norm, and the pre-FFN norm of qwen35
  // Feed-forward and mixture of experts.
  ffn_norm,
  ffn_gate,
  ffn_up,
  ffn_down,
  ffn_post_norm,  // "post_ffw_norm"
  ffn_gate_inp,
  ffn_gate_exps,
  ffn_up_exps,
  ffn_down_exps,
  ffn_gate_inp_shexp,
  ffn_gate_shexp,
  ffn_up_shexp,
  ffn_down_shexp,
  // Recurrent mixers: Gated DeltaNet, Kimi Delta Attention, Mamba2.
  ssm_in,
  ssm_conv1d,
  ssm_conv1d_q,
  ssm_conv1d_k,
  ssm_conv1d_v,
  ssm_dt,
  ssm_a,
  ssm_d,
  ssm_alpha,
  ssm_beta,
  ssm_ba,
  ssm_f_a,
  ssm_f_b,
  ssm_g_a,
  ssm_g_b,
  ssm_norm,
  ssm_out,
  // Short convolution (LFM2).
  shortconv_conv,      // "shortconv.conv"
  shortconv_in_proj,   // "shortconv.in_proj"
  shortconv_out_proj,  // "shortconv.out_proj"
  // Next-token-prediction (MTP) layers appended after the trunk.
  nextn_eh_proj,               // "nextn.eh_proj"
  nextn_embed_tokens,          // "nextn.embed_tokens"
  nextn_enorm,                 // "nextn.enorm"
  nextn_hnorm,                 // "nextn.hnorm"
  nextn_shared_head_head,      // "nextn.shared_head_head"
  nextn_shared_head_norm,      // "nextn.shared_head_norm"
  // Per-layer RoPE frequency factors (a layer tensor llama.cpp duplicates across layers).
  rope_freqs,
  // Router selection bias ("exp_probs_b.bias": added to the gate scores for choosing experts only).
  ffn_exp_probs_b,
  // Multi-head latent attention (MLA).
  attn_q_a,
  attn_q_b,
  attn_q_a_norm,
  attn_kv_a_mqa,
  attn_kv_a_norm,
  attn_kv_b,
  attn_k_b,
  attn_v_b,
  // Latent projections around the routed experts (Nemotron 3 Super).
  ffn_latent_down,
  ffn_latent_up,
};

// What follows the base name. Most tensors are ".weight"; qwen35 stores "blk.N.ssm_dt.bias" and a bare
// "blk.N.ssm_a".
enum class TensorSuffix { weight, bias, none };

// The name without "blk.<il>." or a suffix, e.g. "post_attention_norm".
std::string_view tensor_base_name(TensorKind kind);
bool is_per_layer(TensorKind kind);

// A whole-model tensor: tensor_name(TensorKind::output_norm) == "output_norm.weight".
std::string tensor_name(TensorKind kind, TensorSuffix suffix = TensorSuffix::weight);
// A per-layer tensor: tensor_name(TensorKind::ssm_dt, 3, TensorSuffix::bias) == "blk.3.ssm_dt.bias".
std::string tensor_name(TensorKind kind, int layer, TensorSuffix suffix = TensorSuffix::weight);

}  // namespace rwd::gguf
