// Kimi Delta Attention (kimi-linear): q, k and v projections, each through its own causal depthwise conv (no
// bias; run here as one conv over the q | k | v channels) and SiLU; q and k L2-normalised per head; a
// per-key-channel decay g = A_h * softplus(f_b(f_a x) + dt_bias) from a low-rank projection; beta =
// sigmoid(W_beta x); the delta rule with the per-channel decay over the slot's state; RMSNorm per head gated by
// sigmoid(g_b(g_a x)); the output projection. Its records are (conv column, k, u, per-channel decay).
#pragma once

#include "base/status.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void kimi_delta_attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

Status bind_kimi_delta_attention_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw);

}  // namespace rwd::model::blocks
