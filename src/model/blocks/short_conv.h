// LFM2's gated short convolution: [B | C | x] = in_proj · h, a causal depthwise convolution of B ∘ x over the
// slot's window of l_cache - 1 previous inputs, y = C ∘ conv, out_proj · y. Its state is the window only.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void short_conv(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
