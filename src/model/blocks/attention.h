// Self-attention block of the dense architectures: q/k/v projections, optional per-head q/k RMSNorm,
// RoPE, KV rows written at the tokens' positions, causal (optionally sliding-window) attention per slot,
// output projection. Gated attention and MLA are separate blocks.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
