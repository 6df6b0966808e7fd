#include "model/blocks/attention.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "model/blocks/buffers.h"

namespace rwd::model::blocks {
namespace {

// rows[t][i] += bias[i] for each of n_rows rows of `width`: per token, so batching leaves each token's sum alone.
void add_row_bias(float* rows, const float* bias, int64_t n_rows, int64_t width) {
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t i = 0; i < width; ++i) rows[t * width + i] += bias[i];
  }
}

}  // namespace

void attend_slots(ForwardContext& ctx, int kv_layer, const float* q, const float* k, const float* v, float* mixed,
                  const kernels::cpu::AttentionParams& params) {
  const Batch& batch = ctx.batch();
  const int64_t q_width = params.n_head * params.head_dim;
  const int64_t kv_width = params.n_head_kv * params.head_dim;
  state::KvCache& kv = ctx.kv();
  std::vector<kernels::cpu::AttentionCall>& calls = ctx.attention_calls();
  calls.clear();
  for (size_t si = 0; si < ctx.slot_spans().size(); ++si) {
    const SlotSpan& span = ctx.slot_spans()[si];
    for (int64_t t = span.begin; t < span.end; ++t) {
      kv.write_k(kv_layer, span.slot, ctx.kv_row(t), k + t * kv_width);
      kv.write_v(kv_layer, span.slot, ctx.kv_row(t), v + t * kv_width);
    }
    calls.push_back({q + span.begin * q_width, batch.positions.data() + span.begin, span.end - span.begin,
                     kv.k_rows(kv_layer, span.slot), kv.v_rows(kv_layer, span.slot), ctx.kv_row(span.end - 1) + 1,
                     mixed + span.begin * q_width, ctx.key_paths(static_cast<int64_t>(si))});
  }
  // Every slot's tokens in one pool round.
  kernels::cpu::attention_sequences(calls, params, &ctx.pool());
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

  float* q = ctx.buffer(kBufferQ, n_tokens * q_width);         // [n_tokens, n_head, head_dim]
  float* k = ctx.buffer(kBufferK, n_tokens * kv_width);        // [n_tokens, n_head_kv, head_dim]
  float* v = ctx.buffer(kBufferV, n_tokens * kv_width);        // [n_tokens, n_head_kv, head_dim]
  float* mixed = ctx.buffer(kBufferAttnOut, n_tokens * q_width);  // [n_tokens, n_head, head_dim]
  kernels::cpu::matmul_shared_input({{&lw.attn_q, q}, {&lw.attn_k, k}, {&lw.attn_v, v}}, x, n_tokens, ctx.matmul_scratch(), ctx.pool());
  if (lw.attn_q_bias.data != nullptr) {
    add_row_bias(q, lw.attn_q_bias.f32(), n_tokens, q_width);
    add_row_bias(k, lw.attn_k_bias.f32(), n_tokens, kv_width);
    add_row_bias(v, lw.attn_v_bias.f32(), n_tokens, kv_width);
  }

  if (hp.qk_norm) {
    kernels::cpu::rms_norm(q, lw.attn_q_norm.f32(), q, n_tokens * hp.n_head, hp.head_dim, hp.rms_eps);
    kernels::cpu::rms_norm(k, lw.attn_k_norm.f32(), k, n_tokens * hp.n_head_kv, hp.head_dim, hp.rms_eps);
  }

  if (hp.use_rope) {
    kernels::cpu::RopeParams rope;
    rope.head_dim = hp.head_dim;
    rope.n_rot = hp.n_rot;
    rope.freq_base = lp.rope_freq_base;
    rope.freq_scale = lp.rope_freq_scale;
    rope.mode = hp.rope_mode;
    rope.n_head = hp.n_head;
    kernels::cpu::rope(q, n_tokens, batch.positions.data(), rope);
    rope.n_head = hp.n_head_kv;
    kernels::cpu::rope(k, n_tokens, batch.positions.data(), rope);
  }

  kernels::cpu::AttentionParams params;
  params.n_head = hp.n_head;
  params.n_head_kv = hp.n_head_kv;
  params.head_dim = hp.head_dim;
  params.scale = hp.attn_scale;
  params.window = lp.sliding_window ? hp.n_swa : 0;

  attend_slots(ctx, kv_layer, q, k, v, mixed, params);

  kernels::cpu::matmul(lw.attn_output, mixed, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

}  // namespace rwd::model::blocks
