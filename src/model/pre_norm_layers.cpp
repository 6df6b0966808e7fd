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

void pre_norm_layer(const Model& model, ForwardContext& ctx, int il, PreNormBuffers buffers) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n = n_tokens * hp.n_embd;
  float* x = ctx.hidden();
  kernels::cpu::rms_norm(x, lw.attn_norm.f32(), buffers.normed, n_tokens, hp.n_embd, hp.rms_eps);
  blocks::mixer(model, ctx, il, buffers.normed, buffers.mixed);
  if (hp.post_norms) {
    kernels::cpu::rms_norm(buffers.mixed, lw.attn_post_norm.f32(), buffers.mixed, n_tokens, hp.n_embd, hp.rms_eps);
  }
  add_scaled(x, buffers.mixed, n, hp.residual_scale);

  const tensor::Tensor& ffn_norm = lw.ffn_norm.valid() || hp.post_norms ? lw.ffn_norm : lw.attn_post_norm;
  if (!ffn_norm.valid()) return;
  kernels::cpu::rms_norm(x, ffn_norm.f32(), buffers.normed, n_tokens, hp.n_embd, hp.rms_eps);
  blocks::feed_forward(model, ctx, il, buffers.normed, buffers.ffn_out);
  if (hp.post_norms) {
    kernels::cpu::rms_norm(buffers.ffn_out, lw.ffn_post_norm.f32(), buffers.ffn_out, n_tokens, hp.n_embd, hp.rms_eps);
  }
  add_scaled(x, buffers.ffn_out, n, hp.residual_scale);
}

PreNormBuffers pre_norm_buffers(const Model& model, ForwardContext& ctx) {
  const int64_t n = ctx.n_tokens() * model.hparams().n_embd;
  return {ctx.buffer(blocks::kBufferNormed, n), ctx.buffer(blocks::kBufferMixerOut, n),
          ctx.buffer(blocks::kBufferFfnOut, n)};
}

void forward_pre_norm_layers(const Model& model, ForwardContext& ctx) {
  const HParams& hp = model.hparams();
  const PreNormBuffers buffers = pre_norm_buffers(model, ctx);
  for (int il = 0; il < hp.n_layer; ++il) pre_norm_layer(model, ctx, il, buffers);
  kernels::cpu::rms_norm(ctx.hidden(), model.weights().output_norm.f32(), ctx.hidden(), ctx.n_tokens(), hp.n_embd,
                         hp.rms_eps);
}

}  // namespace rwd::model
