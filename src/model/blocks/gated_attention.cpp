#include "model/blocks/gated_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
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

  float* q_and_gate = ctx.buffer(kBufferAttnOut, n_tokens * 2 * q_width);  // [n_tokens, n_head, 2, head_dim]
  float* q = ctx.buffer(kBufferQ, n_tokens * q_width);                    // [n_tokens, n_head, head_dim]
  float* k = ctx.buffer(kBufferK, n_tokens * kv_width);                   // [n_tokens, n_head_kv, head_dim]
  float* v = ctx.buffer(kBufferV, n_tokens * kv_width);                   // [n_tokens, n_head_kv, head_dim]
  kernels::cpu::matmul_shared_input({{&lw.attn_q, q_and_gate}, {&lw.attn_k, k}, {&lw.attn_v, v}}, x, n_tokens, ctx.matmul_scratch(), ctx.pool());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < hp.n_head; ++h) {
      std::copy_n(q_and_gate + (t * hp.n_head + h) * 2 * head_dim, head_dim, q + (t * hp.n_head + h) * head_dim);
    }
  }

  kernels::cpu::rms_norm(q, lw.attn_q_norm.f32(), q, n_tokens * hp.n_head, head_dim, hp.rms_eps);
  kernels::cpu::rms_norm(k, lw.attn_k_norm.f32(), k, n_tokens * hp.n_head_kv, head_dim, hp.rms_eps);
  kernels::cpu::RopeParams rope;
  rope.head_dim = head_dim;
  rope.n_rot = hp.n_rot;
  rope.freq_base = lp.rope_freq_base;
  rope.freq_scale = lp.rope_freq_scale;
  rope.mode = kernels::cpu::RopeMode::neox;
  rope.n_head = hp.n_head;
  kernels::cpu::rope(q, n_tokens, batch.positions.data(), rope);
  rope.n_head = hp.n_head_kv;
  kernels::cpu::rope(k, n_tokens, batch.positions.data(), rope);

  kernels::cpu::AttentionParams params;
  params.n_head = hp.n_head;
  params.n_head_kv = hp.n_head_kv;
  params.head_dim = head_dim;
  params.scale = hp.attn_scale;
  float* mixed = ctx.buffer(kBufferMixed, n_tokens * q_width);  // [n_tokens, n_head, head_dim]
  attend_slots(ctx, kv_layer, q, k, v, mixed, params);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < hp.n_head; ++h) {
      const float* gate = q_and_gate + ((t * hp.n_head + h) * 2 + 1) * head_dim;
      float* row = mixed + (t * hp.n_head + h) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) row[d] *= 1.0f / (1.0f + std::exp(-gate[d]));
    }
  }
  kernels::cpu::matmul(lw.attn_output, mixed, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

}  // namespace rwd::model::blocks
