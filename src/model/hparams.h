// HParams: the shape and constants of a model, read from GGUF metadata by the architecture's loader.
// Per-layer values (sliding window, rope base) are resolved here once so the forward never branches on
// the architecture name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/gated_delta.h"
#include "ops/moe.h"
#include "ops/rope.h"

namespace rwd::model {

// silu and gelu_tanh gate the up projection (down(act(gate x) * up x)); relu_sqr has no gate:
// down(relu(up x)²) (nemotron_h).
enum class FfnActivation { silu, gelu_tanh, relu_sqr };
using ExpertGating = ops::ExpertGating;

// The mixer of a layer; the state module sizes each slot from the kinds (KV rows or recurrent state).
enum class LayerKind {
  attention,        // softmax attention over KV rows (dense models)
  gated_attention,  // attention with a per-head sigmoid output gate in q (qwen35, qwen3next)
  gated_delta,      // Gated DeltaNet (qwen35, qwen3next)
  short_conv,       // LFM2's gated short convolution
  mamba2,           // Mamba2's selective state space mixer (mamba2, granitehybrid, nemotron_h)
  attention_mamba2, // attention and a Mamba2 mixer side by side on the same input (falcon-h1)
  kimi_delta,       // Kimi Delta Attention: the delta rule with a per-key-channel decay (kimi-linear)
  mla,              // multi-head latent attention: one compressed KV row per position (kimi-linear)
  ffn,              // no mixer: the layer is only its FFN, and keeps no state (nemotron_h's MLP layers)
};

inline bool uses_kv(LayerKind kind) {
  return kind == LayerKind::attention || kind == LayerKind::gated_attention || kind == LayerKind::attention_mamba2 ||
         kind == LayerKind::mla;
}
inline bool uses_recurrent_state(LayerKind kind) {
  return kind == LayerKind::gated_delta || kind == LayerKind::short_conv || kind == LayerKind::mamba2 ||
         kind == LayerKind::attention_mamba2 || kind == LayerKind::kimi_delta;
}

struct LayerParams {
  LayerKind kind = LayerKind::attention;
  bool sliding_window = false;  // attends only to the last `n_swa` positions
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
};

struct HParams {
  std::string arch;
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;       // key and value head size (equal for the dense architectures)
  int64_t n_ff = 0;
  int64_t n_rot = 0;          // rotary dimensions per head (partial rotary when < head_dim)
  int64_t n_swa = 0;          // sliding window size in positions (0: none)
  float rms_eps = 1e-6f;
  float attn_scale = 1.0f;    // multiplies q·k
  float embd_scale = 1.0f;    // multiplies token embeddings (Gemma: sqrt(n_embd))
  float final_logit_softcap = 0.0f;
  float logit_scale = 1.0f;   // divides the logits (granitehybrid)
  float residual_scale = 1.0f;  // multiplies each mixer and FFN output before its residual add (granitehybrid)
  bool use_rope = true;       // false: attention without positions (Granite-4.0-H)
  ops::RopeMode rope_mode = ops::RopeMode::normal;
  FfnActivation ffn_activation = FfnActivation::silu;
  bool qk_norm = false;       // RMSNorm of each q and k head before RoPE (qwen3, gemma3)
  bool post_norms = false;    // sandwich norms after attention and FFN (gemma3)
  std::vector<LayerParams> layers;  // n_layer trunk layers, then n_nextn MTP blocks

  // Gated DeltaNet layers (ssm.* keys): K heads, V heads, head size (S_k = S_v), conv kernel length.
  // Mamba2 layers map onto the same delta-rule shapes: ssm_n_head_k = B/C groups, ssm_n_head_v = heads,
  // ssm_head_dim = the head size P (the value side), ssm_d_state = N (the key side), d_inner = heads * P.
  int64_t ssm_n_head_k = 0;
  int64_t ssm_n_head_v = 0;
  int64_t ssm_head_dim = 0;
  int64_t ssm_d_conv = 0;
  int64_t ssm_d_state = 0;
  ops::KeyHeadMapping ssm_key_head_mapping = ops::KeyHeadMapping::modulo;
  // Mixture of experts (0 experts: dense FFN): routed experts of n_ff_exp, a shared expert of n_ff_shexp.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
  // Router: softmax (qwen35moe, granite) or sigmoid (kimi-linear) scores; the top n_expert_used by score plus
  // the optional per-expert selection bias are chosen; their scores are renormalised to sum 1 when
  // expert_weights_norm, then multiplied by expert_weights_scale. The first n_layer_dense_lead layers keep a
  // dense FFN of n_ff.
  ExpertGating expert_gating = ExpertGating::softmax;
  bool expert_weights_norm = true;
  float expert_weights_scale = 1.0f;
  int64_t n_layer_dense_lead = 0;
  // Multi-head latent attention: per head, q is [nope | rope] (mla_key_length = nope + rope, rope = n_rot) and
  // the value is mla_value_length; the cache keeps one row of kv_lora + rope floats per position.
  int64_t mla_kv_lora_rank = 0;
  int64_t mla_key_length = 0;
  int64_t mla_value_length = 0;
  // LFM2 short convolution: taps per channel (the window keeps n_shortconv_l_cache - 1 inputs).
  int64_t n_shortconv_l_cache = 0;
  // Next-token-prediction layers stored after the trunk (blk.n_layer ..); the trunk forward skips them.
  int64_t n_nextn = 0;
};

}  // namespace rwd::model
