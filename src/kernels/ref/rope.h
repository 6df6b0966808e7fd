// Reference rotary position embedding, in float64 with the angle computed directly (no recurrence), and the
// definition of RopeParams/RopeMode that kernels/cpu/rope.h re-exports. Not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

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

// x: [n_tokens, n_head, head_dim], rotated in place; pair i of a token at position pos turns by
// theta_i = pos * freq_scale * freq_base^(-2i/n_rot), i in [0, n_rot/2).
void rope(float* x, int64_t n_tokens, const int32_t* positions, const RopeParams& params);

}  // namespace rwd::kernels::ref
