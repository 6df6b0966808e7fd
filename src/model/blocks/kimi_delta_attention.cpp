#include "model/blocks/kimi_delta_attention.h"

#include <cmath>

#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/blocks/recurrent_io.h"

namespace rwd::model::blocks {
namespace {

using gguf::TensorKind;
using gguf::TensorSuffix;

}  // namespace

Status bind_kimi_delta_attention_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw) {
  auto name = [il](TensorKind kind, TensorSuffix suffix = TensorSuffix::weight) {
    return gguf::tensor_name(kind, il, suffix);
  };
  const int64_t head_dim = hp.ssm_head_dim;
  const int64_t n_head = hp.ssm_n_head_v;
  const int64_t width = n_head * head_dim;
  if (binder.has(name(TensorKind::attn_qkv))) {
    return binder.refuse("tensor '{}' (fused q/k/v) is not supported for kimi-linear; its converter writes attn_q, "
                          "attn_k and attn_v", name(TensorKind::attn_qkv));
  }
  REWIND_ASSIGN_OR_RETURN(lw.attn_q, binder.matrix(name(TensorKind::attn_q), {width, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_k, binder.matrix(name(TensorKind::attn_k), {width, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_v, binder.matrix(name(TensorKind::attn_v), {width, hp.n_embd}));
  // Written as ggml {d_conv, 1, width(, 1)}: each channel's taps are contiguous.
  REWIND_ASSIGN_OR_RETURN(lw.ssm_conv1d, binder.stacked_floats({name(TensorKind::ssm_conv1d_q), name(TensorKind::ssm_conv1d_k),
                                                                 name(TensorKind::ssm_conv1d_v)},
                                                                {width, 1, hp.ssm_d_conv}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_f_a, binder.matrix(name(TensorKind::ssm_f_a), {head_dim, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_f_b, binder.matrix(name(TensorKind::ssm_f_b), {width, head_dim}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_dt, binder.vector(name(TensorKind::ssm_dt, TensorSuffix::bias), width));
  // ssm_a holds A = -exp(A_log), written as ggml {1, H(, 1, 1)}.
  REWIND_ASSIGN_OR_RETURN(lw.ssm_a, binder.floats(name(TensorKind::ssm_a, TensorSuffix::none), {n_head, 1}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_beta, binder.matrix(name(TensorKind::ssm_beta), {n_head, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_g_a, binder.matrix(name(TensorKind::ssm_g_a), {head_dim, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_g_b, binder.matrix(name(TensorKind::ssm_g_b), {width, head_dim}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_norm, binder.vector(name(TensorKind::ssm_norm), head_dim));
  REWIND_ASSIGN_OR_RETURN(lw.attn_output, binder.matrix(name(TensorKind::attn_output), {hp.n_embd, width}));
  return Status::ok();
}

void kimi_delta_attention(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int rl = model.recurrent_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t head_dim = hp.ssm_head_dim;
  const int64_t n_head = hp.ssm_n_head_v;
  const int64_t width = n_head * head_dim;
  const int64_t n_channels = 3 * width;  // q | k | v

  compute::Backend& backend = ctx.backend();
  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * width), n_tokens, width};  // [n_tokens, n_head, head_dim]
  const compute::Rows k{ctx.buffer(kBufferK, n_tokens * width), n_tokens, width};
  const compute::Rows v{ctx.buffer(kBufferV, n_tokens * width), n_tokens, width};
  // Every projection of x at once; the low-rank decay and gate projections finish below.
  const compute::Rows decay_rank{ctx.buffer(kBufferHeadParams, n_tokens * head_dim), n_tokens, head_dim};
  const compute::Rows gate_rank{ctx.buffer(kBufferFfnGate, n_tokens * head_dim), n_tokens, head_dim};
  const compute::Rows beta{ctx.buffer(kBufferHeadParams2, n_tokens * n_head), n_tokens, n_head};
  backend.matmul_shared_input({{&lw.attn_q, q.data}, {&lw.attn_k, k.data}, {&lw.attn_v, v.data},
                               {&lw.ssm_f_a, decay_rank.data}, {&lw.ssm_g_a, gate_rank.data}, {&lw.ssm_beta, beta.data}},
                              compute::ConstRows{x, n_tokens, hp.n_embd});
  const compute::Rows qkv{ctx.buffer(kBufferConvIn, n_tokens * n_channels), n_tokens, n_channels};
  backend.copy(q, qkv.columns(0, width));
  backend.copy(k, qkv.columns(width, width));
  backend.copy(v, qkv.columns(2 * width, width));
  const compute::Rows conv{ctx.buffer(kBufferConvOut, n_tokens * n_channels), n_tokens, n_channels};
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, qkv.row(run.span.begin), n_channels, lw.ssm_conv1d.f32(), hp.ssm_d_conv, nullptr,
             conv.row(run.span.begin));
  }
  backend.silu(conv, conv);
  backend.copy(conv.columns(0, width), q);
  backend.copy(conv.columns(width, width), k);
  backend.copy(conv.columns(2 * width, width), v);
  const compute::Rows q_heads{q.data, n_tokens * n_head, head_dim};
  const compute::Rows k_heads{k.data, n_tokens * n_head, head_dim};
  backend.l2_norm(q_heads, q_heads, hp.rms_eps);
  backend.l2_norm(k_heads, k_heads, hp.rms_eps);
  // Per-channel decay logits through the low-rank f_a, f_b.
  const compute::Rows g{ctx.buffer(kBufferMixed, n_tokens * width), n_tokens, width};  // [n_tokens, n_head, head_dim]
  backend.matmul(lw.ssm_f_b, decay_rank, g);
  backend.softplus_bias(g, lw.ssm_dt.f32(), g);
  backend.mul_groups(g, lw.ssm_a.f32(), head_dim, g);
  backend.sigmoid(beta);

  ops::GatedDeltaParams params;
  params.n_head_k = n_head;
  params.n_head_v = n_head;
  params.head_k_dim = head_dim;
  params.head_v_dim = head_dim;
  params.per_channel_decay = true;
  params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const compute::Rows o{ctx.buffer(kBufferRecurrentOut, n_tokens * width), n_tokens * n_head, head_dim};
  run_delta_rules(ctx, rl, q.data, k.data, v.data, g.data, beta.data, o.data, params);
  const compute::Rows gate{ctx.buffer(kBufferGate, n_tokens * width), n_tokens, width};
  backend.matmul(lw.ssm_g_b, gate_rank, gate);
  backend.gated_rms_norm(o, {gate.data, n_tokens * n_head, head_dim}, lw.ssm_norm.f32(), o, hp.rms_eps,
                         ops::GateActivation::sigmoid);
  backend.matmul(lw.attn_output, compute::ConstRows{o.data, n_tokens, width}, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
