#include "model/blocks/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"

namespace rwd::model::blocks {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

}  // namespace

void route_token(const float* router_logits, int64_t n_expert, int64_t n_used, const RouterParams& params,
                 int32_t* experts, float* weights, RoutingScratch& scratch) {
  std::vector<float>& probs = scratch.probs;  // the router scores, "ffn_moe_probs"
  probs.resize(static_cast<size_t>(n_expert));
  switch (params.gating) {
    case ExpertGating::softmax: {
      float max_logit = router_logits[0];
      for (int64_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, router_logits[e]);
      double sum = 0.0;
      for (int64_t e = 0; e < n_expert; ++e) sum += (probs[e] = std::exp(router_logits[e] - max_logit));
      for (int64_t e = 0; e < n_expert; ++e) probs[e] = static_cast<float>(probs[e] / sum);
      break;
    }
    case ExpertGating::sigmoid:
      for (int64_t e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + std::exp(-router_logits[e]));
      break;
  }
  // The bias only decides which experts are chosen; the weights stay the unbiased scores (DeepSeek V3).
  std::vector<float>& biased = scratch.biased;
  const float* selection = probs.data();
  if (params.selection_bias != nullptr) {
    biased.resize(probs.size());
    for (int64_t e = 0; e < n_expert; ++e) biased[e] = probs[e] + params.selection_bias[e];
    selection = biased.data();
  }
  std::vector<int32_t>& order = scratch.order;
  order.resize(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n_used, order.end(), [&](int32_t a, int32_t b) {
    return selection[a] > selection[b] || (selection[a] == selection[b] && a < b);
  });
  for (int64_t j = 0; j < n_used; ++j) {
    experts[j] = order[j];
    weights[j] = probs[order[j]];
  }
  // As llama.cpp: renormalise first, then scale; the sum is clamped to the smallest normal fp16 so a
  // degenerate router (sigmoid scores all near 0) cannot divide by 0.
  if (params.norm) {
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < n_used; ++j) chosen_sum += weights[j];
    chosen_sum = std::max(chosen_sum, 6.103515625e-5f);
    for (int64_t j = 0; j < n_used; ++j) weights[j] /= chosen_sum;
  }
  if (params.scale != 0.0f && params.scale != 1.0f) {
    for (int64_t j = 0; j < n_used; ++j) weights[j] *= params.scale;
  }
}

void moe(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;
  const int64_t n_used = hp.n_expert_used;
  const bool gated = hp.ffn_activation != FfnActivation::relu_sqr;
  const RouterParams router_params{hp.expert_gating, lw.ffn_exp_probs_b.valid() ? lw.ffn_exp_probs_b.f32() : nullptr,
                                   hp.expert_weights_norm, hp.expert_weights_scale};

  compute::Backend& backend = ctx.backend();
  const compute::ConstRows input{x, n_tokens, n_embd};
  float* router = ctx.buffer(kBufferHeadParams, n_tokens * hp.n_expert);  // [n_tokens, n_expert]
  backend.matmul(lw.ffn_gate_inp, input, {router, n_tokens, hp.n_expert});
  RoutingScratch& scratch = ctx.routing_scratch();
  std::vector<int32_t>& experts = scratch.experts;
  std::vector<float>& weights = scratch.weights;
  experts.resize(static_cast<size_t>(n_tokens * n_used));
  weights.resize(static_cast<size_t>(n_tokens * n_used));
  for (int64_t t = 0; t < n_tokens; ++t) {
    route_token(router + t * hp.n_expert, hp.n_expert, n_used, router_params, experts.data() + t * n_used,
                weights.data() + t * n_used, scratch);
  }

  // Per expert: gather its tokens' rows, run the expert once over them, scatter into [n_tokens, n_used, n_embd].
  float* routed = ctx.buffer(kBufferMixed, n_tokens * n_used * n_embd);
  float* gathered = ctx.buffer(kBufferConvIn, n_tokens * n_embd);
  float* gate = ctx.buffer(kBufferFfnGate, n_tokens * hp.n_ff_exp);
  float* up = ctx.buffer(kBufferFfnUp, n_tokens * hp.n_ff_exp);
  float* expert_out = ctx.buffer(kBufferConvOut, n_tokens * n_embd);
  std::vector<int64_t>& slots = scratch.rows;  // index t * n_used + j of each gathered row
  for (int64_t e = 0; e < hp.n_expert; ++e) {
    slots.clear();
    for (int64_t i = 0; i < n_tokens * n_used; ++i) {
      if (experts[i] == e) slots.push_back(i);
    }
    if (slots.empty()) continue;
    const int64_t n_rows = static_cast<int64_t>(slots.size());
    for (int64_t r = 0; r < n_rows; ++r) std::copy_n(x + (slots[r] / n_used) * n_embd, n_embd, gathered + r * n_embd);
    const compute::Rows expert_in{gathered, n_rows, n_embd};
    const compute::Rows expert_gate_rows{gate, n_rows, hp.n_ff_exp};
    const tensor::Tensor& expert_up = lw.ffn_up_experts[e];
    if (gated) {
      const tensor::Tensor& expert_gate = lw.ffn_gate_experts[e];
      backend.matmul_shared_input({{&expert_gate, gate}, {&expert_up, up}}, expert_in);
      backend.swiglu(expert_gate_rows, compute::ConstRows{up, n_rows, hp.n_ff_exp}, expert_gate_rows);
    } else {
      backend.matmul(expert_up, expert_in, expert_gate_rows);
      backend.relu_sqr(expert_gate_rows);
    }
    backend.matmul(lw.ffn_down_experts[e], expert_gate_rows, {expert_out, n_rows, n_embd});
    for (int64_t r = 0; r < n_rows; ++r) std::copy_n(expert_out + r * n_embd, n_embd, routed + slots[r] * n_embd);
  }

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
    backend.matmul(lw.ffn_down_shexp, shared_gate, {out, n_tokens, n_embd});
  }
  const float* gate_inp_shexp = has_shared && lw.ffn_gate_inp_shexp.valid() ? lw.ffn_gate_inp_shexp.f32() : nullptr;
  std::vector<float>& mix = scratch.mix;
  mix.resize(static_cast<size_t>(n_embd));
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* row = out + t * n_embd;
    if (gate_inp_shexp != nullptr) {
      double logit = 0.0;
      for (int64_t i = 0; i < n_embd; ++i) logit += static_cast<double>(gate_inp_shexp[i]) * x[t * n_embd + i];
      const float shared_scale = 1.0f / (1.0f + std::exp(-static_cast<float>(logit)));
      for (int64_t i = 0; i < n_embd; ++i) row[i] *= shared_scale;
    }
    std::fill(mix.begin(), mix.end(), 0.0f);
    for (int64_t j = 0; j < n_used; ++j) {
      const float w = weights[t * n_used + j];
      const float* expert_row = routed + (t * n_used + j) * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) mix[i] += w * expert_row[i];
    }
    if (has_shared) {
      for (int64_t i = 0; i < n_embd; ++i) row[i] = mix[i] + row[i];
    } else {
      std::copy(mix.begin(), mix.end(), row);
    }
  }
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
