// Self-attention block of the dense architectures: q/k/v projections, optional per-head q/k RMSNorm,
// RoPE, KV rows written at the tokens' positions, causal (optionally sliding-window) attention per slot,
// output projection. Gated attention and MLA are separate blocks.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// Writes each token's k and v rows ([n_tokens, n_head_kv, head_dim]) at its position in its slot's KV rows of
// kv_layer, then attends every slot's queries ([n_tokens, n_head, head_dim]) over that slot's rows into mixed,
// all slots in one pool round.
void attend_slots(ForwardContext& ctx, int kv_layer, const float* q, const float* k, const float* v, float* mixed,
                  const ops::AttentionParams& params);

}  // namespace rwd::model::blocks
