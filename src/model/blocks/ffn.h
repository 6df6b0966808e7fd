// Feed-forward block: down(act(gate(x)) * up(x)) with SiLU (SwiGLU) or tanh-GELU (GeGLU), or the ungated
// down(relu(up(x))²) of nemotron_h, as hparams.ffn_activation says.
// Mixture-of-experts FFNs are a separate block.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void ffn(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// x[i] = max(x[i], 0)² in place: the activation of the ungated FFNs and experts.
void relu_sqr(float* x, int64_t n);

// residual[i] += delta[i] over n_tokens rows of n_embd.
void add_residual(float* residual, const float* delta, int64_t n);

}  // namespace rwd::model::blocks
