#include "model/pre_norm_layers.h"

#include "kernels/cpu/rms_norm.h"
#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"
#include "model/blocks/mixer.h"

namespace rwd::model {
namespace {

// llama.cpp scales a branch's output, then adds it (granitehybrid): two roundings, as here. A scale of 1 leaves
// the sum bit-identical to a plain add.
void add_scaled(float* x, float* delta, int64_t n, float scale) {
  if (scale != 1.0f) {
    for (int64_t i = 0; i < n; ++i) delta[i] *= scale;
  }
  blocks::add_residual(x, delta, n);
}

}  // namespace

void forward_pre_norm_layers(const Model& model, ForwardContext& ctx) {
  const HParams& hp = model.hparams();
  const Weights& w = model.weights();
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n = n_tokens * hp.n_embd;
  float* x = ctx.hidden();                                // [n_tokens, n_embd]
  float* normed = ctx.buffer(blocks::kBufferNormed, n);   // [n_tokens, n_embd]
  float* mixed = ctx.buffer(blocks::kBufferMixerOut, n);  // [n_tokens, n_embd]
  float* ffn_out = ctx.buffer(blocks::kBufferFfnOut, n);  // [n_tokens, n_embd]
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& lw = w.layers[il];
    kernels::cpu::rms_norm(x, lw.attn_norm.f32(), normed, n_tokens, hp.n_embd, hp.rms_eps);
    blocks::mixer(model, ctx, il, normed, mixed);
    if (hp.post_norms) kernels::cpu::rms_norm(mixed, lw.attn_post_norm.f32(), mixed, n_tokens, hp.n_embd, hp.rms_eps);
    add_scaled(x, mixed, n, hp.residual_scale);

    const tensor::Tensor& ffn_norm = lw.ffn_norm.valid() || hp.post_norms ? lw.ffn_norm : lw.attn_post_norm;
    if (!ffn_norm.valid()) continue;
    kernels::cpu::rms_norm(x, ffn_norm.f32(), normed, n_tokens, hp.n_embd, hp.rms_eps);
    blocks::feed_forward(model, ctx, il, normed, ffn_out);
    if (hp.post_norms) kernels::cpu::rms_norm(ffn_out, lw.ffn_post_norm.f32(), ffn_out, n_tokens, hp.n_embd, hp.rms_eps);
    add_scaled(x, ffn_out, n, hp.residual_scale);
  }
  kernels::cpu::rms_norm(x, w.output_norm.f32(), x, n_tokens, hp.n_embd, hp.rms_eps);
}

}  // namespace rwd::model
