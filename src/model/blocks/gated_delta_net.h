// Gated DeltaNet mixer (qwen35, qwen3next): qkv and z projections, beta = sigmoid(W_beta x), decay logits
// g = softplus(W_alpha x + dt_bias) * ssm_a, causal depthwise conv over the qkv channels with the slot's
// window, SiLU, L2-normalised q and k per head, the gated delta rule over the slot's state, gated RMSNorm
// with SiLU(z), output projection. Each slot's tokens run in order over that slot's state only.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void gated_delta_net(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
