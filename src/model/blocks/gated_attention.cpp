#include "model/blocks/gated_attention.h"

#include "model/blocks/attention.h"
#include "model/blocks/buffers.h"

namespace rwd::model::blocks {

void gated_attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const LayerParams& lp = hp.layers[il];
  const Batch& batch = ctx.batch();
  const int kv_layer = model.kv_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t head_dim = hp.head_dim;
  const int64_t q_width = hp.n_head * head_dim;
  const int64_t kv_width = hp.n_head_kv * head_dim;

  compute::Backend& backend = ctx.backend();
  // [n_tokens * n_head, q | gate]
  const compute::Rows q_and_gate{ctx.buffer(kBufferAttnOut, n_tokens * 2 * q_width), n_tokens * hp.n_head,
                                 2 * head_dim};
  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * q_width), n_tokens, q_width};    // [.., n_head, head_dim]
  const compute::Rows k{ctx.buffer(kBufferK, n_tokens * kv_width), n_tokens, kv_width};  // [.., n_head_kv, head_dim]
  float* v = ctx.buffer(kBufferV, n_tokens * kv_width);                                 // [.., n_head_kv, head_dim]
  backend.matmul_shared_input({{&lw.attn_q, q_and_gate.data}, {&lw.attn_k, k.data}, {&lw.attn_v, v}},
                              compute::ConstRows{x, n_tokens, hp.n_embd});
  const compute::Rows q_heads{q.data, n_tokens * hp.n_head, head_dim};
  const compute::Rows k_heads{k.data, n_tokens * hp.n_head_kv, head_dim};
  backend.copy(q_and_gate.columns(0, head_dim), q_heads);

  backend.rms_norm(q_heads, lw.attn_q_norm.f32(), q_heads, hp.rms_eps);
  backend.rms_norm(k_heads, lw.attn_k_norm.f32(), k_heads, hp.rms_eps);
  ops::RopeParams rope;
  rope.head_dim = head_dim;
  rope.n_rot = hp.n_rot;
  rope.freq_base = lp.rope_freq_base;
  rope.freq_scale = lp.rope_freq_scale;
  rope.mode = ops::RopeMode::neox;
  rope.n_head = hp.n_head;
  backend.rope(q, batch.positions, rope);
  rope.n_head = hp.n_head_kv;
  backend.rope(k, batch.positions, rope);

  ops::AttentionParams params;
  params.n_head = hp.n_head;
  params.n_head_kv = hp.n_head_kv;
  params.head_dim = head_dim;
  params.scale = hp.attn_scale;
  float* mixed = ctx.buffer(kBufferMixed, n_tokens * q_width);  // [n_tokens, n_head, head_dim]
  attend_slots(ctx, kv_layer, q.data, k.data, v, mixed, params);
  backend.sigmoid_mul({mixed, n_tokens * hp.n_head, head_dim}, q_and_gate.columns(head_dim, head_dim));
  backend.matmul(lw.attn_output, compute::ConstRows{mixed, n_tokens, q_width}, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
