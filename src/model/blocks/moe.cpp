#include "model/blocks/moe.h"

#include <cmath>
#include <span>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"

namespace rwd::model::blocks {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

}  // namespace

void moe(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;
  const int64_t n_used = hp.n_expert_used;
  const bool gated = hp.ffn_activation != FfnActivation::relu_sqr;
  const ops::RouterParams router_params{hp.expert_gating,
                                        lw.ffn_exp_probs_b.valid() ? lw.ffn_exp_probs_b.f32() : nullptr,
                                        hp.expert_weights_norm, hp.expert_weights_scale};
  compute::Backend& backend = ctx.backend();
  const compute::ConstRows input{x, n_tokens, n_embd};
  const compute::Rows output{out, n_tokens, n_embd};
  const compute::Rows router{ctx.buffer(kBufferHeadParams, n_tokens * hp.n_expert), n_tokens, hp.n_expert};
  backend.matmul(lw.ffn_gate_inp, input, router);
  RoutingScratch& scratch = ctx.routing_scratch();
  scratch.experts.resize(static_cast<size_t>(n_tokens * n_used));
  scratch.weights.resize(static_cast<size_t>(n_tokens * n_used));
  backend.route_experts(router, router_params, n_used, scratch.experts, scratch.weights);
  // [n_tokens * n_used, n_embd]: each token's experts' outputs in routing order.
  const compute::Rows routed{ctx.buffer(kBufferMixed, n_tokens * n_used * n_embd), n_tokens * n_used, n_embd};
  const ops::ExpertWeights experts{gated ? std::span<const tensor::Tensor>(lw.ffn_gate_experts)
                                         : std::span<const tensor::Tensor>(),
                                   lw.ffn_up_experts, lw.ffn_down_experts};
  backend.moe_experts(input, scratch.experts, n_used, experts, routed);
  // Shared expert (when the layer has one), then the routed outputs added in routing order (a fixed order per
  // token): out = mix + shared, as llama.cpp adds ffn_shexp to ffn_moe_out.
  const bool has_shared = lw.ffn_up_shexp.valid();
  if (has_shared) {
    float* shared_gate_up = ctx.buffer(kBufferGate, 2 * n_tokens * hp.n_ff_shexp);
    const compute::Rows shared_gate{shared_gate_up, n_tokens, hp.n_ff_shexp};
    const compute::Rows shared_up{shared_gate_up + n_tokens * hp.n_ff_shexp, n_tokens, hp.n_ff_shexp};
    if (gated) {
      backend.matmul_shared_input({{&lw.ffn_gate_shexp, shared_gate.data}, {&lw.ffn_up_shexp, shared_up.data}}, input);
      backend.swiglu(shared_gate, shared_up, shared_gate);
    } else {
      backend.matmul(lw.ffn_up_shexp, input, shared_gate);
      backend.relu_sqr(shared_gate);
    }
    backend.matmul(lw.ffn_down_shexp, shared_gate, output);
    if (lw.ffn_gate_inp_shexp.valid()) backend.sigmoid_dot_scale(output, input, lw.ffn_gate_inp_shexp.f32());
  }
  backend.moe_mix(routed, scratch.weights, n_used, output, has_shared);
}

Status load_moe_hparams(const gguf::GgufFile& file, HParams& hp) {
  auto key_of = [&](ArchKey which) { return gguf::arch_key(hp.arch, which); };
  auto read = [&](ArchKey which, int64_t& value, bool required, int64_t fallback) -> Status {
    const std::string key = key_of(which);
    if (!file.has(key)) {
      if (required) return Status::errorf("{} is missing", key);
      value = fallback;
      return Status::ok();
    }
    REWIND_ASSIGN_OR_RETURN(uint64_t raw, file.get_u64(key));
    if (raw == 0 || raw > (1u << 20)) return Status::errorf("{} is {}, expected 1 .. 1048576", key, raw);
    value = static_cast<int64_t>(raw);
    return Status::ok();
  };
  REWIND_RETURN_IF_ERROR(read(ArchKey::expert_count, hp.n_expert, true, 0));
  REWIND_RETURN_IF_ERROR(read(ArchKey::expert_used_count, hp.n_expert_used, true, 0));
  if (hp.n_expert_used > hp.n_expert) {
    return Status::errorf("{} = {} exceeds {} = {}", key_of(ArchKey::expert_used_count), hp.n_expert_used,
                          key_of(ArchKey::expert_count), hp.n_expert);
  }
  const int64_t default_ff_exp = hp.n_ff > 0 ? hp.n_ff / hp.n_expert_used : 0;
  REWIND_RETURN_IF_ERROR(read(ArchKey::expert_feed_forward_length, hp.n_ff_exp, default_ff_exp == 0, default_ff_exp));

  // Shared expert width. kimi-linear writes only expert_shared_count; llama.cpp then uses
  // n_ff_exp * count, counting 0 as 1 (kimi-linear.cpp load_arch_tensors). qwen35moe writes the length.
  const std::string shared_count_key = key_of(ArchKey::expert_shared_count);
  if (!file.has(key_of(ArchKey::expert_shared_feed_forward_length)) && file.has(shared_count_key)) {
    REWIND_ASSIGN_OR_RETURN(uint32_t n_shared, file.get_u32(shared_count_key));
    if (n_shared > 1024) return Status::errorf("{} is {}, expected 0 .. 1024", shared_count_key, n_shared);
    hp.n_ff_shexp = hp.n_ff_exp * std::max<int64_t>(n_shared, 1);
  } else {
    REWIND_RETURN_IF_ERROR(read(ArchKey::expert_shared_feed_forward_length, hp.n_ff_shexp, hp.n_ff == 0, hp.n_ff));
  }

  // Router: llama.cpp's llama_expert_gating_func_type; 0 (none), 3 (softmax_weight), 4 (sqrt_softplus) are
  // not implemented here.
  const std::string gating_key = key_of(ArchKey::expert_gating_func);
  REWIND_ASSIGN_OR_RETURN(uint32_t gating, file.get_u32_or(gating_key, 1));
  switch (gating) {
    case 1: hp.expert_gating = ExpertGating::softmax; break;
    case 2: hp.expert_gating = ExpertGating::sigmoid; break;
    default: return Status::errorf("{} is {}, expected 1 (softmax) or 2 (sigmoid)", gating_key, gating);
  }
  // qwen35moe and kimi-linear do not write the key; llama.cpp's graphs for both pass norm_w = true.
  REWIND_ASSIGN_OR_RETURN(hp.expert_weights_norm, file.get_bool_or(key_of(ArchKey::expert_weights_norm), true));
  const std::string scale_key = key_of(ArchKey::expert_weights_scale);
  REWIND_ASSIGN_OR_RETURN(hp.expert_weights_scale, file.get_f32_or(scale_key, 1.0f));
  if (!std::isfinite(hp.expert_weights_scale)) {
    return Status::errorf("{} is {}, expected a finite number", scale_key, hp.expert_weights_scale);
  }
  const std::string lead_key = key_of(ArchKey::leading_dense_block_count);
  REWIND_ASSIGN_OR_RETURN(uint32_t n_lead, file.get_u32_or(lead_key, 0));
  if (n_lead > hp.n_layer) {  // equal: every layer dense, as llama.cpp allows
    return Status::errorf("{} is {}, expected at most {} = {}", lead_key, n_lead, key_of(ArchKey::block_count),
                          hp.n_layer);
  }
  hp.n_layer_dense_lead = n_lead;
  return Status::ok();
}

Status bind_moe_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw,
                        const MoeTensorRules& rules) {
  auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
  // Whether to bind a tensor the rule names: required ones are always attempted (the binder names them when
  // missing), optional ones when the file has them.
  auto wanted = [&](TensorPresence presence, const std::string& tensor_name) {
    return presence == TensorPresence::required || (presence == TensorPresence::optional && binder.has(tensor_name));
  };
  const int64_t n_embd = hp.n_embd;
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_inp, binder.matrix(name(TensorKind::ffn_gate_inp), {hp.n_expert, n_embd}));
  const bool gated = hp.ffn_activation != FfnActivation::relu_sqr;
  if (gated) {
    REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_exps,
                            binder.matrix(name(TensorKind::ffn_gate_exps), {hp.n_expert, hp.n_ff_exp, n_embd}));
  }
  REWIND_ASSIGN_OR_RETURN(lw.ffn_up_exps, binder.matrix(name(TensorKind::ffn_up_exps), {hp.n_expert, hp.n_ff_exp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_down_exps,
                          binder.matrix(name(TensorKind::ffn_down_exps), {hp.n_expert, n_embd, hp.n_ff_exp}));
  const std::string bias_name = gguf::tensor_name(TensorKind::ffn_exp_probs_b, il, gguf::TensorSuffix::bias);
  if (wanted(rules.selection_bias, bias_name)) {
    REWIND_ASSIGN_OR_RETURN(lw.ffn_exp_probs_b, binder.floats(bias_name, {hp.n_expert}));
  }
  // The shared expert is present when its up projection is; its gate (when gated) and down are then required.
  if (!wanted(rules.shared_expert, name(TensorKind::ffn_up_shexp))) return Status::ok();
  if (gated) {
    REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_shexp, binder.matrix(name(TensorKind::ffn_gate_shexp), {hp.n_ff_shexp, n_embd}));
  }
  REWIND_ASSIGN_OR_RETURN(lw.ffn_up_shexp, binder.matrix(name(TensorKind::ffn_up_shexp), {hp.n_ff_shexp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_down_shexp, binder.matrix(name(TensorKind::ffn_down_shexp), {n_embd, hp.n_ff_shexp}));
  if (wanted(rules.shared_expert_gate, name(TensorKind::ffn_gate_inp_shexp))) {
    REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_inp_shexp, binder.vector(name(TensorKind::ffn_gate_inp_shexp), n_embd));
  }
  return Status::ok();
}

}  // namespace rwd::model::blocks
