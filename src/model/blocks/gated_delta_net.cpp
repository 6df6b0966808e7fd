#include "model/blocks/gated_delta_net.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "kernels/cpu/glu.h"
#include "kernels/cpu/l2_norm.h"
#include "kernels/cpu/matmul.h"
#include "model/blocks/activations.h"
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

  float* mixed = ctx.buffer(kBufferConvIn, n_tokens * n_channels);  // [n_tokens, q | k | v channels]
  float* z = ctx.buffer(kBufferGate, n_tokens * v_width);           // [n_tokens, n_head_v, head_dim]
  float* beta = ctx.buffer(kBufferHeadParams, n_tokens * n_head_v);  // [n_tokens, n_head_v]
  float* g = ctx.buffer(kBufferHeadParams2, n_tokens * n_head_v);    // [n_tokens, n_head_v]
  if (lw.ssm_ba.valid()) {
    // qwen3next stores beta and alpha logits together, per K group: [b(r) | a(r)] with r = H_v / H_k.
    float* ba = ctx.buffer(kBufferConvOut, n_tokens * 2 * n_head_v);  // [n_tokens, n_head_k, 2, r]
    kernels::cpu::matmul_shared_input({{&lw.attn_qkv, mixed}, {&lw.attn_gate, z}, {&lw.ssm_ba, ba}}, x, n_tokens,
                                      ctx.matmul_scratch(), ctx.pool());
    const int64_t r = n_head_v / hp.ssm_n_head_k;
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t group = 0; group < hp.ssm_n_head_k; ++group) {
        const float* row = ba + t * 2 * n_head_v + group * 2 * r;
        std::copy_n(row, r, beta + t * n_head_v + group * r);
        std::copy_n(row + r, r, g + t * n_head_v + group * r);
      }
    }
  } else {
    kernels::cpu::matmul_shared_input(
        {{&lw.attn_qkv, mixed}, {&lw.attn_gate, z}, {&lw.ssm_beta, beta}, {&lw.ssm_alpha, g}}, x, n_tokens, ctx.matmul_scratch(), ctx.pool());
  }
  const float* dt_bias = lw.ssm_dt.f32();
  const float* a = lw.ssm_a.f32();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_head_v; ++h) {
      beta[t * n_head_v + h] = sigmoid(beta[t * n_head_v + h]);
      g[t * n_head_v + h] = softplus(g[t * n_head_v + h] + dt_bias[h]) * a[h];
    }
  }

  float* conv = ctx.buffer(kBufferConvOut, n_tokens * n_channels);  // [n_tokens, q | k | v channels]
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, mixed + run.span.begin * n_channels, n_channels, lw.ssm_conv1d.f32(), hp.ssm_d_conv,
             nullptr, conv + run.span.begin * n_channels);
  }
  // SiLU, then split the channels into contiguous q, k and v rows for the delta rule.
  float* q = ctx.buffer(kBufferQ, n_tokens * qk_width);  // [n_tokens, n_head_k, head_dim]
  float* k = ctx.buffer(kBufferK, n_tokens * qk_width);  // [n_tokens, n_head_k, head_dim]
  float* v = ctx.buffer(kBufferV, n_tokens * v_width);   // [n_tokens, n_head_v, head_dim]
  kernels::cpu::silu(conv, conv, n_tokens * n_channels);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = conv + t * n_channels;
    std::copy_n(row, qk_width, q + t * qk_width);
    std::copy_n(row + qk_width, qk_width, k + t * qk_width);
    std::copy_n(row + 2 * qk_width, v_width, v + t * v_width);
  }
  kernels::cpu::l2_norm(q, q, n_tokens * hp.ssm_n_head_k, head_dim, hp.rms_eps);
  kernels::cpu::l2_norm(k, k, n_tokens * hp.ssm_n_head_k, head_dim, hp.rms_eps);

  kernels::cpu::GatedDeltaParams params;
  params.n_head_k = hp.ssm_n_head_k;
  params.n_head_v = n_head_v;
  params.head_k_dim = head_dim;
  params.head_v_dim = head_dim;
  params.mapping = hp.ssm_key_head_mapping;
  params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* o = ctx.buffer(kBufferRecurrentOut, n_tokens * v_width);  // [n_tokens, n_head_v, head_dim]
  run_delta_rules(ctx, rl, q, k, v, g, beta, o, params);
  kernels::cpu::gated_rms_norm(o, z, lw.ssm_norm.f32(), o, n_tokens * n_head_v, head_dim, hp.rms_eps,
                               kernels::cpu::GateActivation::silu);
  kernels::cpu::matmul(lw.ssm_out, o, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

}  // namespace rwd::model::blocks
