// Gated attention (qwen35, qwen3next): the q projection carries, per head, the query followed by an output
// gate; q and k heads are RMS-normed, rotated (partial rotary; M-RoPE reduces to NeoX RoPE for text, where
// every section has the same position), attended causally per slot, then multiplied by sigmoid(gate) before
// the output projection.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void gated_attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
