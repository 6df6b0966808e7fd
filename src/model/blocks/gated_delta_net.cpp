#include "model/blocks/gated_delta_net.h"

#include <cmath>

#include "model/blocks/buffers.h"
#include "model/blocks/recurrent_io.h"

namespace rwd::model::blocks {

void gated_delta_net(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int rl = model.recurrent_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t head_dim = hp.ssm_head_dim;
  const int64_t qk_width = hp.ssm_n_head_k * head_dim;
  const int64_t v_width = hp.ssm_n_head_v * head_dim;
  const int64_t n_channels = 2 * qk_width + v_width;
  const int64_t n_head_v = hp.ssm_n_head_v;

  compute::Backend& backend = ctx.backend();
  const compute::ConstRows input{x, n_tokens, hp.n_embd};
  const compute::Rows mixed{ctx.buffer(kBufferConvIn, n_tokens * n_channels), n_tokens, n_channels};  // q | k | v
  const compute::Rows z{ctx.buffer(kBufferGate, n_tokens * v_width), n_tokens, v_width};  // [.., n_head_v, head_dim]
  const compute::Rows beta{ctx.buffer(kBufferHeadParams, n_tokens * n_head_v), n_tokens, n_head_v};
  const compute::Rows g{ctx.buffer(kBufferHeadParams2, n_tokens * n_head_v), n_tokens, n_head_v};
  if (lw.ssm_ba.valid()) {
    // qwen3next stores beta and alpha logits together, per K group: [b(r) | a(r)] with r = H_v / H_k.
    const int64_t r = n_head_v / hp.ssm_n_head_k;
    const compute::Rows ba{ctx.buffer(kBufferConvOut, n_tokens * 2 * n_head_v), n_tokens * hp.ssm_n_head_k, 2 * r};
    backend.matmul_shared_input({{&lw.attn_qkv, mixed.data}, {&lw.attn_gate, z.data}, {&lw.ssm_ba, ba.data}}, input);
    backend.copy(ba.columns(0, r), {beta.data, n_tokens * hp.ssm_n_head_k, r});
    backend.copy(ba.columns(r, r), {g.data, n_tokens * hp.ssm_n_head_k, r});
  } else {
    backend.matmul_shared_input(
        {{&lw.attn_qkv, mixed.data}, {&lw.attn_gate, z.data}, {&lw.ssm_beta, beta.data}, {&lw.ssm_alpha, g.data}},
        input);
  }
  backend.sigmoid(beta);
  backend.softplus_bias(g, lw.ssm_dt.f32(), g);
  backend.mul_groups(g, lw.ssm_a.f32(), 1, g);

  const compute::Rows conv{ctx.buffer(kBufferConvOut, n_tokens * n_channels), n_tokens, n_channels};
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, mixed.row(run.span.begin), n_channels, lw.ssm_conv1d.f32(), hp.ssm_d_conv, nullptr,
             conv.row(run.span.begin));
  }
  // SiLU, then split the channels into contiguous q, k and v rows for the delta rule.
  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * qk_width), n_tokens, qk_width};  // [.., n_head_k, head_dim]
  const compute::Rows k{ctx.buffer(kBufferK, n_tokens * qk_width), n_tokens, qk_width};  // [.., n_head_k, head_dim]
  const compute::Rows v{ctx.buffer(kBufferV, n_tokens * v_width), n_tokens, v_width};    // [.., n_head_v, head_dim]
  backend.silu(conv, conv);
  backend.copy(conv.columns(0, qk_width), q);
  backend.copy(conv.columns(qk_width, qk_width), k);
  backend.copy(conv.columns(2 * qk_width, v_width), v);
  const compute::Rows q_heads{q.data, n_tokens * hp.ssm_n_head_k, head_dim};
  const compute::Rows k_heads{k.data, n_tokens * hp.ssm_n_head_k, head_dim};
  backend.l2_norm(q_heads, q_heads, hp.rms_eps);
  backend.l2_norm(k_heads, k_heads, hp.rms_eps);

  ops::GatedDeltaParams params;
  params.n_head_k = hp.ssm_n_head_k;
  params.n_head_v = n_head_v;
  params.head_k_dim = head_dim;
  params.head_v_dim = head_dim;
  params.mapping = hp.ssm_key_head_mapping;
  params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const compute::Rows o{ctx.buffer(kBufferRecurrentOut, n_tokens * v_width), n_tokens * n_head_v, head_dim};
  run_delta_rules(ctx, rl, q.data, k.data, v.data, g.data, beta.data, o.data, params);
  backend.gated_rms_norm(o, {z.data, n_tokens * n_head_v, head_dim}, lw.ssm_norm.f32(), o, hp.rms_eps,
                         ops::GateActivation::silu);
  backend.matmul(lw.ssm_out, compute::ConstRows{o.data, n_tokens, v_width}, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
