#include "model/blocks/mamba2.h"

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/blocks/recurrent_io.h"
#include "model/dense_transformer.h"

namespace rwd::model::blocks {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;
using gguf::TensorSuffix;

constexpr int64_t kMaxSsmSize = 1 << 20;

}  // namespace

Status load_mamba2_hparams(const gguf::GgufFile& file, HParams& hp) {
  auto key = [&hp](ArchKey which) { return gguf::arch_key(hp.arch, which); };
  REWIND_ASSIGN_OR_RETURN(hp.ssm_d_conv, read_count(file, hp, ArchKey::ssm_conv_kernel, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(int64_t d_inner, read_count(file, hp, ArchKey::ssm_inner_size, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_d_state, read_count(file, hp, ArchKey::ssm_state_size, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_n_head_v, read_count(file, hp, ArchKey::ssm_time_step_rank, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_n_head_k, read_count(file, hp, ArchKey::ssm_group_count, kMaxSsmSize));
  if (hp.ssm_d_conv < 2 || hp.ssm_d_conv > 16) {
    return Status::errorf("{} is {}, expected 2 .. 16", key(ArchKey::ssm_conv_kernel), hp.ssm_d_conv);
  }
  if (d_inner % hp.ssm_n_head_v != 0) {
    return Status::errorf("{} = {} is not a multiple of {} = {} (the head count)", key(ArchKey::ssm_inner_size), d_inner,
                          key(ArchKey::ssm_time_step_rank), hp.ssm_n_head_v);
  }
  if (hp.ssm_n_head_v % hp.ssm_n_head_k != 0) {
    return Status::errorf("{} = {} is not a multiple of {} = {}", key(ArchKey::ssm_time_step_rank), hp.ssm_n_head_v,
                          key(ArchKey::ssm_group_count), hp.ssm_n_head_k);
  }
  hp.ssm_head_dim = d_inner / hp.ssm_n_head_v;
  for (const auto& [which, value] : {std::pair{ArchKey::ssm_state_size, hp.ssm_d_state},
                                     std::pair{ArchKey::ssm_inner_size, hp.ssm_head_dim}}) {
    if (value > ops::kGatedDeltaMaxHeadDim) {
      return Status::errorf("{} gives a state dimension of {}; rewind supports at most {}", key(which), value,
                            ops::kGatedDeltaMaxHeadDim);
    }
  }
  return Status::ok();
}

Status bind_mamba2_weights(WeightBinder& binder, const HParams& hp, int il, const Mamba2TensorRules& rules,
                           LayerWeights& lw) {
  auto name = [il](TensorKind kind, TensorSuffix suffix = TensorSuffix::weight) {
    return gguf::tensor_name(kind, il, suffix);
  };
  const int64_t n_head = hp.ssm_n_head_v;
  const int64_t n_group = hp.ssm_n_head_k;
  const int64_t d_inner = n_head * hp.ssm_head_dim;
  const int64_t conv_channels = d_inner + 2 * n_group * hp.ssm_d_state;
  REWIND_ASSIGN_OR_RETURN(lw.ssm_in, binder.matrix(name(TensorKind::ssm_in), {d_inner + conv_channels + n_head, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_conv1d, binder.floats(name(TensorKind::ssm_conv1d), {conv_channels, hp.ssm_d_conv}));
  if (rules.conv_bias_required || binder.has(name(TensorKind::ssm_conv1d, TensorSuffix::bias))) {
    REWIND_ASSIGN_OR_RETURN(lw.ssm_conv1d_bias,
                            binder.vector(name(TensorKind::ssm_conv1d, TensorSuffix::bias), conv_channels));
  }
  REWIND_ASSIGN_OR_RETURN(lw.ssm_dt, binder.vector(name(TensorKind::ssm_dt, TensorSuffix::bias), n_head));
  // A and D are written as [H, 1] (ggml {1, H}); ssm_a holds A = -exp(A_log) already.
  REWIND_ASSIGN_OR_RETURN(lw.ssm_a, binder.floats(name(TensorKind::ssm_a, TensorSuffix::none), {n_head, 1}));
  REWIND_ASSIGN_OR_RETURN(lw.ssm_d, binder.floats(name(TensorKind::ssm_d, TensorSuffix::none), {n_head, 1}));
  if (rules.norm_required || binder.has(name(TensorKind::ssm_norm))) {
    REWIND_ASSIGN_OR_RETURN(lw.ssm_norm, binder.floats(name(TensorKind::ssm_norm), {n_group, d_inner / n_group}));
  }
  REWIND_ASSIGN_OR_RETURN(lw.ssm_out, binder.matrix(name(TensorKind::ssm_out), {hp.n_embd, d_inner}));
  return Status::ok();
}

void mamba2(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int rl = model.recurrent_index(il);
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_head = hp.ssm_n_head_v;
  const int64_t n_group = hp.ssm_n_head_k;
  const int64_t head_dim = hp.ssm_head_dim;
  const int64_t d_state = hp.ssm_d_state;
  const int64_t d_inner = n_head * head_dim;
  const int64_t bc_width = n_group * d_state;
  const int64_t n_channels = d_inner + 2 * bc_width;    // x | B | C
  const int64_t n_proj = d_inner + n_channels + n_head;  // z | x | B | C | dt

  compute::Backend& backend = ctx.backend();
  const compute::Rows proj{ctx.buffer(kBufferConvIn, n_tokens * n_proj), n_tokens, n_proj};
  backend.matmul(lw.ssm_in, compute::ConstRows{x, n_tokens, hp.n_embd}, proj);
  // The conv reads its input as contiguous rows, so the x | B | C columns are gathered first.
  const compute::Rows xbc{ctx.buffer(kBufferMixed, n_tokens * n_channels), n_tokens, n_channels};
  backend.copy(proj.columns(d_inner, n_channels), xbc);
  const compute::Rows conv{ctx.buffer(kBufferConvOut, n_tokens * n_channels), n_tokens, n_channels};
  const float* conv_bias = lw.ssm_conv1d_bias.valid() ? lw.ssm_conv1d_bias.f32() : nullptr;
  for (const RecurrentRun& run : ctx.recurrent_runs()) {
    run_conv(ctx, rl, run, xbc.row(run.span.begin), n_channels, lw.ssm_conv1d.f32(), hp.ssm_d_conv, conv_bias,
             conv.row(run.span.begin));
  }
  // The scan as a delta rule: k = B, q = C, v = x, beta = dt, g = dt * A.
  const compute::Rows v{ctx.buffer(kBufferV, n_tokens * d_inner), n_tokens, d_inner};     // [.., n_head, head_dim]
  const compute::Rows k{ctx.buffer(kBufferK, n_tokens * bc_width), n_tokens, bc_width};   // [.., n_group, d_state]
  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * bc_width), n_tokens, bc_width};   // [.., n_group, d_state]
  const compute::Rows dt{ctx.buffer(kBufferHeadParams, n_tokens * n_head), n_tokens, n_head};
  const compute::Rows g{ctx.buffer(kBufferHeadParams2, n_tokens * n_head), n_tokens, n_head};
  backend.silu(conv, conv);
  backend.copy(conv.columns(0, d_inner), v);
  backend.copy(conv.columns(d_inner, bc_width), k);
  backend.copy(conv.columns(d_inner + bc_width, bc_width), q);
  backend.softplus_bias(proj.columns(d_inner + n_channels, n_head), lw.ssm_dt.f32(), dt);
  backend.mul_groups(dt, lw.ssm_a.f32(), 1, g);

  ops::GatedDeltaParams params;
  params.n_head_k = n_group;
  params.n_head_v = n_head;
  params.head_k_dim = d_state;
  params.head_v_dim = head_dim;
  params.mapping = ops::KeyHeadMapping::divide;
  params.scale = 1.0f;
  params.subtract_prediction = false;
  const compute::Rows y{ctx.buffer(kBufferRecurrentOut, n_tokens * d_inner), n_tokens, d_inner};  // [.., n_head, head_dim]
  run_delta_rules(ctx, rl, q.data, k.data, v.data, g.data, dt.data, y.data, params);
  // y + D x, gated by SiLU(z), then normed per group.
  backend.add_mul_groups(y, v, lw.ssm_d.f32(), head_dim);
  backend.swiglu(proj.columns(0, d_inner), y, y);
  if (lw.ssm_norm.valid()) {
    const int64_t group_width = d_inner / n_group;
    for (int64_t group = 0; group < n_group; ++group) {
      const compute::Rows chunk = y.columns(group * group_width, group_width);
      backend.rms_norm(chunk, lw.ssm_norm.f32() + group * group_width, chunk, hp.rms_eps);
    }
  }
  backend.matmul(lw.ssm_out, y, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
