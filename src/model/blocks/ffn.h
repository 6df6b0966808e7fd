// Feed-forward block: down(act(gate(x)) * up(x)) with SiLU (SwiGLU) or tanh-GELU (GeGLU), or the ungated
// down(relu(up(x))²) of nemotron_h, as hparams.ffn_activation says.
// Mixture-of-experts FFNs are a separate block.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void ffn(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
