// Weights: the model's tensors bound by name (GGUF short names, STYLE habit 1), pointing into the mapped
// file. A tensor not used by an architecture stays invalid (data == nullptr).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace rwd::model {

struct LayerWeights {
  tensor::Tensor attn_norm;
  tensor::Tensor attn_q;
  tensor::Tensor attn_k;
  tensor::Tensor attn_v;
  tensor::Tensor attn_output;
  tensor::Tensor attn_q_bias;  // "attn_q.bias" (qwen2), like attn_k_bias and attn_v_bias: added after the projection
  tensor::Tensor attn_k_bias;
  tensor::Tensor attn_v_bias;
  tensor::Tensor attn_q_norm;
  tensor::Tensor attn_k_norm;
  tensor::Tensor attn_post_norm;
  tensor::Tensor ffn_norm;
  tensor::Tensor ffn_gate;
  tensor::Tensor ffn_up;
  tensor::Tensor ffn_down;
  tensor::Tensor ffn_post_norm;
  // Gated DeltaNet
  tensor::Tensor attn_qkv;   // [2*H_k*S + H_v*S, n_embd]
  tensor::Tensor attn_gate;  // z: [H_v*S, n_embd]
  tensor::Tensor ssm_conv1d; // [channels, d_conv]
  tensor::Tensor ssm_dt;     // dt bias [H_v]
  tensor::Tensor ssm_a;      // -exp(A_log) [H_v]
  tensor::Tensor ssm_beta;   // [H_v, n_embd]
  tensor::Tensor ssm_alpha;  // [H_v, n_embd]
  tensor::Tensor ssm_ba;     // qwen3next: beta and alpha together, per K group [b(r) | a(r)]: [2*H_v, n_embd]
  tensor::Tensor ssm_norm;   // [S]
  tensor::Tensor ssm_out;    // [n_embd, H_v*S]
  // Mamba2 (ssm_conv1d, ssm_dt, ssm_a, ssm_norm and ssm_out as above, with D = d_inner, G groups, N = d_state)
  tensor::Tensor ssm_in;          // [2*D + 2*G*N + H, n_embd]: z, x, B, C, dt
  tensor::Tensor ssm_conv1d_bias; // [D + 2*G*N] (optional in the hybrids)
  tensor::Tensor ssm_d;           // [H, 1]: the skip connection y += D_h x
  // Kimi Delta Attention (attn_q/k/v, ssm_dt [H*S], ssm_a, ssm_beta, ssm_norm [S] and attn_output as above;
  // ssm_conv1d holds the q, k and v conv taps stacked, [3*H*S, d_conv])
  tensor::Tensor ssm_f_a;   // [S, n_embd]: decay, low rank
  tensor::Tensor ssm_f_b;   // [H*S, S]
  tensor::Tensor ssm_g_a;   // [S, n_embd]: output gate, low rank
  tensor::Tensor ssm_g_b;   // [H*S, S]
  // Multi-head latent attention (attn_q [H*(nope+rope), n_embd] and attn_output as above)
  tensor::Tensor attn_kv_a_mqa;   // [kv_lora + rope, n_embd]: the compressed KV and the shared k_pe
  tensor::Tensor attn_kv_a_norm;  // [kv_lora]
  tensor::Tensor attn_k_b;        // [H, kv_lora, nope]: absorbs k_nope's up-projection into q
  tensor::Tensor attn_v_b;        // [H, v_head, kv_lora]: the value up-projection, after attention
  // LFM2 short convolution
  tensor::Tensor shortconv_conv;      // [n_embd, l_cache] taps
  tensor::Tensor shortconv_in_proj;   // [3*n_embd, n_embd]: B, C, x
  tensor::Tensor shortconv_out_proj;  // [n_embd, n_embd]
  // Mixture of experts
  tensor::Tensor ffn_gate_inp;        // router [n_expert, n_embd]
  tensor::Tensor ffn_gate_exps;       // [n_expert, n_ff_exp, n_embd]
  tensor::Tensor ffn_up_exps;         // [n_expert, n_ff_exp, n_embd]
  tensor::Tensor ffn_down_exps;       // [n_expert, n_embd, n_ff_exp]
  tensor::Tensor ffn_gate_inp_shexp;  // shared-expert gate [n_embd]
  tensor::Tensor ffn_gate_shexp;      // [n_ff_shexp, n_embd]
  tensor::Tensor ffn_up_shexp;        // [n_ff_shexp, n_embd]
  tensor::Tensor ffn_down_shexp;      // [n_embd, n_ff_shexp]
  tensor::Tensor ffn_exp_probs_b;     // router selection bias [n_expert] (kimi-linear)
  // ffn_*_exps one 2-D weight per expert and attn_k_b / attn_v_b one per head, made once at load
  // (tensor::matrix_slice): a view made in a step would copy the tensor's name, an allocation per expert.
  std::vector<tensor::Tensor> ffn_gate_experts, ffn_up_experts, ffn_down_experts;
  std::vector<tensor::Tensor> attn_k_b_heads, attn_v_b_heads;
};

// A next-token-prediction (MTP) block's own tensors; its attention and FFN are an ordinary LayerWeights.
// Optional ones fall back to the trunk's: embed_tokens to token_embd, shared_head_norm to output_norm,
// shared_head_head to output.
struct NextnWeights {
  tensor::Tensor eh_proj;           // [n_embd, 2*n_embd]: [enorm(embedding) | hnorm(hidden)] -> n_embd
  tensor::Tensor enorm;
  tensor::Tensor hnorm;
  tensor::Tensor shared_head_norm;
  tensor::Tensor embed_tokens;
  tensor::Tensor shared_head_head;
};

struct Weights {
  tensor::Tensor token_embd;
  tensor::Tensor output_norm;
  tensor::Tensor output;  // token_embd when the embeddings are tied
  // The trunk's layers, then the MTP blocks' (index n_layer + j), so blocks address both by layer index.
  std::vector<LayerWeights> layers;
  std::vector<NextnWeights> nextn;
};

}  // namespace rwd::model
