// HParams: the shape and constants of a model, read from GGUF metadata by the architecture's loader.
// Per-layer values (sliding window, rope base) are resolved here once so the forward never branches on
// the architecture name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/rope.h"

namespace rwd::model {

enum class FfnActivation { silu, gelu_tanh };

struct LayerParams {
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
  kernels::cpu::RopeMode rope_mode = kernels::cpu::RopeMode::normal;
  FfnActivation ffn_activation = FfnActivation::silu;
  bool qk_norm = false;       // RMSNorm of each q and k head before RoPE (qwen3, gemma3)
  bool post_norms = false;    // sandwich norms after attention and FFN (gemma3)
  std::vector<LayerParams> layers;
};

}  // namespace rwd::model
