#include "model/blocks/kimi_delta_attention.h"

#include <algorithm>
#include <cmath>

#include "gguf/tensor_names.h"
#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "kernels/cpu/glu.h"
#include "kernels/cpu/l2_norm.h"
#include "kernels/cpu/matmul.h"
#include "model/blocks/activations.h"
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

  float* q = ctx.buffer(kBufferQ, n_tokens * width);  // [n_tokens, n_head, head_dim]
  float* k = ctx.buffer(kBufferK, n_tokens * width);
  float* v = ctx.buffer(kBufferV, n_tokens * width);
  // Every projection of x at once; the low-rank decay and gate projections finish below.
  float* decay_rank = ctx.buffer(kBufferHeadParams, n_tokens * head_dim);
  float* gate_rank = ctx.buffer(kBufferFfnGate, n_tokens * head_dim);
  float* beta = ctx.buffer(kBufferHeadParams2, n_tokens * n_head);
  kernels::cpu::matmul_shared_input({{&lw.attn_q, q}, {&lw.attn_k, k}, {&lw.attn_v, v}, {&lw.ssm_f_a, decay_rank},
                                     {&lw.ssm_g_a, gate_rank}, {&lw.ssm_beta, beta}},
                                    x, n_tokens, ctx.matmul_scratch(), ctx.pool());
  float* qkv = ctx.buffer(kBufferConvIn, n_tokens * n_channels);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::copy_n(q + t * width, width, qkv + t * n_channels);
    std::copy_n(k + t * width, width, qkv + t * n_channels + width);
    std::copy_n(v + t * width, width, qkv + t * n_channels + 2 * width);
  }
  float* conv = ctx.buffer(kBufferConvOut, n_tokens * n_channels);
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, qkv + run.span.begin * n_channels, n_channels, lw.ssm_conv1d.f32(), hp.ssm_d_conv, nullptr,
             conv + run.span.begin * n_channels);
  }
  kernels::cpu::silu(conv, conv, n_tokens * n_channels);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = conv + t * n_channels;
    std::copy_n(row, width, q + t * width);
    std::copy_n(row + width, width, k + t * width);
    std::copy_n(row + 2 * width, width, v + t * width);
  }
  kernels::cpu::l2_norm(q, q, n_tokens * n_head, head_dim, hp.rms_eps);
  kernels::cpu::l2_norm(k, k, n_tokens * n_head, head_dim, hp.rms_eps);

  // Per-channel decay logits through the low-rank f_a, f_b.
  float* g = ctx.buffer(kBufferMixed, n_tokens * width);  // [n_tokens, n_head, head_dim]
  kernels::cpu::matmul(lw.ssm_f_b, decay_rank, n_tokens, g, ctx.matmul_scratch(), ctx.pool());
  const float* dt_bias = lw.ssm_dt.f32();
  const float* a = lw.ssm_a.f32();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < width; ++c) g[t * width + c] = softplus(g[t * width + c] + dt_bias[c]) * a[c / head_dim];
  }
  for (int64_t i = 0; i < n_tokens * n_head; ++i) beta[i] = sigmoid(beta[i]);

  kernels::cpu::GatedDeltaParams params;
  params.n_head_k = n_head;
  params.n_head_v = n_head;
  params.head_k_dim = head_dim;
  params.head_v_dim = head_dim;
  params.per_channel_decay = true;
  params.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* o = ctx.buffer(kBufferRecurrentOut, n_tokens * width);
  run_delta_rules(ctx, rl, q, k, v, g, beta, o, params);

  float* gate = ctx.buffer(kBufferGate, n_tokens * width);
  kernels::cpu::matmul(lw.ssm_g_b, gate_rank, n_tokens, gate, ctx.matmul_scratch(), ctx.pool());
  kernels::cpu::gated_rms_norm(o, gate, lw.ssm_norm.f32(), o, n_tokens * n_head, head_dim, hp.rms_eps,
                               kernels::cpu::GateActivation::sigmoid);
  kernels::cpu::matmul(lw.attn_output, o, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
}

}  // namespace rwd::model::blocks
