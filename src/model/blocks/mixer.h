// The block a layer runs, chosen by its kind (HParams::layers[il].kind) and the model's FFN layout: the one
// place a layer kind meets its block, so the layer loop (model/pre_norm_layers.h) needs no per-architecture code.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::blocks {

// The token mixer of layer il over x ([n_tokens, n_embd], normed) into out ([n_tokens, n_embd]). An `ffn`
// layer's mixer is its feed-forward; falcon-h1's attention_mamba2 sums the two branches, attention + SSM, in
// llama.cpp's order.
void mixer(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// The feed-forward of layer il: the experts when the model has them and il is past the dense lead layers,
// else the dense FFN.
void feed_forward(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

}  // namespace rwd::model::blocks
