// Reference rotary position embedding, in float64 with the angle computed directly (no recurrence), and the
// definition of RopeParams/RopeMode that kernels/cpu/rope.h re-exports. Not meant to be fast.
#pragma once

#include <cstdint>

#include "ops/rope.h"

namespace rwd::kernels::ref {

using RopeMode = ops::RopeMode;

using RopeParams = ops::RopeParams;

// x: [n_tokens, n_head, head_dim], rotated in place; pair i of a token at position pos turns by
// theta_i = pos * freq_scale * freq_base^(-2i/n_rot), i in [0, n_rot/2).
void rope(float* x, int64_t n_tokens, const int32_t* positions, const RopeParams& params);

}  // namespace rwd::kernels::ref
