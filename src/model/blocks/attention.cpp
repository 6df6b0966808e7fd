#include "model/blocks/attention.h"

#include <vector>

#include "model/blocks/buffers.h"

namespace rwd::model::blocks {

void attend_slots(ForwardContext& ctx, int kv_layer, const float* q, const float* k, const float* v, float* mixed,
                  const ops::AttentionParams& params) {
  const Batch& batch = ctx.batch();
  const int64_t q_width = params.n_head * params.head_dim;
  const int64_t kv_width = params.n_head_kv * params.head_dim;
  state::KvCache& kv = ctx.kv();
  std::vector<ops::AttentionCall>& calls = ctx.attention_calls();
  calls.clear();
  for (size_t si = 0; si < ctx.slot_spans().size(); ++si) {
    const SlotSpan& span = ctx.slot_spans()[si];
    const int64_t n = span.end - span.begin;
    ctx.backend().store_kv({k + span.begin * kv_width, n, kv_width}, kv.k_store(kv_layer, span.slot), ctx.kv_rows(span));
    ctx.backend().store_kv({v + span.begin * kv_width, n, kv_width}, kv.v_store(kv_layer, span.slot), ctx.kv_rows(span));
    calls.push_back({q + span.begin * q_width, batch.positions.data() + span.begin, span.end - span.begin,
                     kv.k_rows(kv_layer, span.slot), kv.v_rows(kv_layer, span.slot), ctx.kv_row(span.end - 1) + 1,
                     mixed + span.begin * q_width, ctx.key_paths(static_cast<int64_t>(si))});
  }
  // Every slot's tokens in one round.
  ctx.backend().attention_sequences(calls, params);
}

void attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const int kv_layer = model.kv_index(il);
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const LayerParams& lp = hp.layers[il];
  const Batch& batch = ctx.batch();
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t q_width = hp.n_head * hp.head_dim;
  const int64_t kv_width = hp.n_head_kv * hp.head_dim;
  compute::Backend& backend = ctx.backend();

  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * q_width), n_tokens, q_width};      // [.., n_head, head_dim]
  const compute::Rows k{ctx.buffer(kBufferK, n_tokens * kv_width), n_tokens, kv_width};    // [.., n_head_kv, head_dim]
  const compute::Rows v{ctx.buffer(kBufferV, n_tokens * kv_width), n_tokens, kv_width};    // [.., n_head_kv, head_dim]
  float* mixed = ctx.buffer(kBufferAttnOut, n_tokens * q_width);  // [n_tokens, n_head, head_dim]
  backend.matmul_shared_input({{&lw.attn_q, q.data}, {&lw.attn_k, k.data}, {&lw.attn_v, v.data}},
                              compute::ConstRows{x, n_tokens, hp.n_embd});
  if (lw.attn_q_bias.data != nullptr) {
    backend.add_bias(q, lw.attn_q_bias.f32());
    backend.add_bias(k, lw.attn_k_bias.f32());
    backend.add_bias(v, lw.attn_v_bias.f32());
  }

  if (hp.qk_norm) {
    const compute::Rows q_heads{q.data, n_tokens * hp.n_head, hp.head_dim};
    const compute::Rows k_heads{k.data, n_tokens * hp.n_head_kv, hp.head_dim};
    backend.rms_norm(q_heads, lw.attn_q_norm.f32(), q_heads, hp.rms_eps);
    backend.rms_norm(k_heads, lw.attn_k_norm.f32(), k_heads, hp.rms_eps);
  }

  if (hp.use_rope) {
    ops::RopeParams rope;
    rope.head_dim = hp.head_dim;
    rope.n_rot = hp.n_rot;
    rope.freq_base = lp.rope_freq_base;
    rope.freq_scale = lp.rope_freq_scale;
    rope.mode = hp.rope_mode;
    rope.n_head = hp.n_head;
    backend.rope(q, batch.positions, rope);
    rope.n_head = hp.n_head_kv;
    backend.rope(k, batch.positions, rope);
  }

  ops::AttentionParams params;
  params.n_head = hp.n_head;
  params.n_head_kv = hp.n_head_kv;
  params.head_dim = hp.head_dim;
  params.scale = hp.attn_scale;
  params.window = lp.sliding_window ? hp.n_swa : 0;

  attend_slots(ctx, kv_layer, q.data, k.data, v.data, mixed, params);

  backend.matmul(lw.attn_output, compute::ConstRows{mixed, n_tokens, q_width}, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
