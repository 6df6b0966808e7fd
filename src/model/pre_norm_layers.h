// The pre-norm residual layer loop every architecture runs (DESIGN §4): per layer, x += mixer(norm(x)), then,
// where the layer has a feed-forward, x += ffn(norm(x)); then the final norm into ctx.hidden(). What differs
// between architectures is data: the layer kinds (blocks/mixer.h), sandwich norms (HParams::post_norms), a
// residual scale (HParams::residual_scale), experts past the dense lead layers.
#pragma once

#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model {

// Scratch rows of one layer, [n_tokens, n_embd] each: the normed input of a sub-layer, the mixer's output and
// the feed-forward's.
struct PreNormBuffers {
  float* normed;
  float* mixed;
  float* ffn_out;
};
PreNormBuffers pre_norm_buffers(const Model& model, ForwardContext& ctx);

// Layer il over ctx.hidden(), in place. The FFN's pre-norm is the layer's ffn_norm, or qwen35's post_attention_norm when it has none; a layer with
// neither (Mamba2 and nemotron_h layers, whose FFN layers are mixers of their own) has no FFN sub-layer.
void pre_norm_layer(const Model& model, ForwardContext& ctx, int il, PreNormBuffers buffers);

// Every layer, then the output norm.
void forward_pre_norm_layers(const Model& model, ForwardContext& ctx);

}  // namespace rwd::model
