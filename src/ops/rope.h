// Rotary position embedding on the first n_rot dimensions of each head of [n_tokens, n_head, head_dim] rows
// (partial rotary leaves the rest untouched); the parameter types every implementation shares.
// Contract: pair i of a token at position pos turns by theta_i = pos * freq_scale * freq_base^(-2i/n_rot),
// i in [0, n_rot/2); a token's result depends only on its own row and position.
#pragma once

#include <cstdint>

namespace rwd::ops {

enum class RopeMode {
  normal,  // rotates pairs (2i, 2i+1): llama's GGUF layout
  neox,    // rotates pairs (i, i + n_rot/2): qwen, gemma
};

struct RopeParams {
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // rotated dimensions per head: even, <= head_dim; the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  RopeMode mode = RopeMode::normal;
};

}  // namespace rwd::ops
