#include "model/pre_norm_layers.h"

#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"
#include "model/blocks/mixer.h"

namespace rwd::model {
namespace {

// llama.cpp scales a branch's output, then adds it (granitehybrid): two roundings, as here. A scale of 1 leaves
// the sum bit-identical to a plain add.
void add_scaled(compute::Backend& backend, compute::Rows x, compute::Rows delta, float scale) {
  if (scale != 1.0f) backend.scale(delta, scale);
  backend.add(x, delta);
}

}  // namespace

void pre_norm_layer(const Model& model, ForwardContext& ctx, int il, PreNormBuffers buffers) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  compute::Backend& backend = ctx.backend();
  const compute::Rows x{ctx.hidden(), n_tokens, hp.n_embd};
  const compute::Rows normed{buffers.normed, n_tokens, hp.n_embd};
  const compute::Rows mixed{buffers.mixed, n_tokens, hp.n_embd};
  const compute::Rows ffn_out{buffers.ffn_out, n_tokens, hp.n_embd};
  backend.rms_norm(x, lw.attn_norm.f32(), normed, hp.rms_eps);
  blocks::mixer(model, ctx, il, buffers.normed, buffers.mixed);
  if (hp.post_norms) backend.rms_norm(mixed, lw.attn_post_norm.f32(), mixed, hp.rms_eps);
  add_scaled(backend, x, mixed, hp.residual_scale);
  const tensor::Tensor& ffn_norm = lw.ffn_norm.valid() || hp.post_norms ? lw.ffn_norm : lw.attn_post_norm;
  if (!ffn_norm.valid()) return;
  backend.rms_norm(x, ffn_norm.f32(), normed, hp.rms_eps);
  blocks::feed_forward(model, ctx, il, buffers.normed, buffers.ffn_out);
  if (hp.post_norms) backend.rms_norm(ffn_out, lw.ffn_post_norm.f32(), ffn_out, hp.rms_eps);
  add_scaled(backend, x, ffn_out, hp.residual_scale);
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
  const compute::Rows hidden{ctx.hidden(), ctx.n_tokens(), hp.n_embd};
  ctx.backend().rms_norm(hidden, model.weights().output_norm.f32(), hidden, hp.rms_eps);
}

}  // namespace rwd::model
