// Rotary position embedding applied in place to [n_tokens, n_head, head_dim] rows, on the first n_rot
// dimensions of each head (partial rotary leaves the rest untouched).
// normal: rotates pairs (2i, 2i+1) — llama's GGUF layout; neox: rotates pairs (i, i + n_rot/2) — qwen, gemma.
// theta_i = pos * freq_scale * freq_base^(-2i/n_rot), evaluated in float64 (no float recurrence over i), so
// rotations stay accurate at large positions. The parameter types are the reference's (kernels/ref/rope.h).
#pragma once

#include <cstdint>

#include "kernels/ref/rope.h"

namespace rwd::kernels::cpu {

using RopeMode = ref::RopeMode;
using RopeParams = ref::RopeParams;

// A token's result depends only on its own row and position (batch-invariant).
void rope(float* x, int64_t n_tokens, const int32_t* positions, const RopeParams& params);

}  // namespace rwd::kernels::cpu
