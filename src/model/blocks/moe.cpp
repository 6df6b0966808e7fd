#include "model/blocks/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "kernels/cpu/glu.h"
#include "kernels/cpu/matmul.h"
#include "model/blocks/buffers.h"

namespace rwd::model::blocks {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

// The rows of expert e of a [n_expert, rows, cols] tensor, as a 2-D weight.
tensor::Tensor expert_slice(const tensor::Tensor& experts, int64_t e) {
  tensor::Tensor slice = experts;
  slice.n_dims = 2;
  slice.ne = {experts.ne[0], experts.ne[1], 1, 1};
  slice.data = experts.row(e * experts.ne[1]);
  return slice;
}

}  // namespace

void route_token(const float* router_logits, int64_t n_expert, int64_t n_used, int32_t* experts, float* weights) {
  float max_logit = router_logits[0];
  for (int64_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, router_logits[e]);
  double sum = 0.0;
  std::vector<float> probs(static_cast<size_t>(n_expert));
  for (int64_t e = 0; e < n_expert; ++e) sum += (probs[e] = std::exp(router_logits[e] - max_logit));
  for (int64_t e = 0; e < n_expert; ++e) probs[e] = static_cast<float>(probs[e] / sum);
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n_used, order.end(),
                    [&](int32_t a, int32_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  float chosen_sum = 0.0f;
  for (int64_t j = 0; j < n_used; ++j) chosen_sum += probs[order[j]];
  // As llama.cpp: the sum is clamped to the smallest normal fp16 so a degenerate router cannot divide by 0.
  chosen_sum = std::max(chosen_sum, 6.103515625e-5f);
  for (int64_t j = 0; j < n_used; ++j) {
    experts[j] = order[j];
    weights[j] = probs[order[j]] / chosen_sum;
  }
}

void moe(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;
  const int64_t n_used = hp.n_expert_used;

  float* router = ctx.buffer(kBufferHeadParams, n_tokens * hp.n_expert);  // [n_tokens, n_expert]
  kernels::cpu::matmul(lw.ffn_gate_inp, x, n_tokens, router, ctx.matmul_scratch(), ctx.pool());
  std::vector<int32_t> experts(static_cast<size_t>(n_tokens * n_used));
  std::vector<float> weights(static_cast<size_t>(n_tokens * n_used));
  for (int64_t t = 0; t < n_tokens; ++t) {
    route_token(router + t * hp.n_expert, hp.n_expert, n_used, experts.data() + t * n_used, weights.data() + t * n_used);
  }

  // Per expert: gather its tokens' rows, run the expert once over them, scatter into [n_tokens, n_used, n_embd].
  float* routed = ctx.buffer(kBufferMixed, n_tokens * n_used * n_embd);
  float* gathered = ctx.buffer(kBufferConvIn, n_tokens * n_embd);
  float* gate = ctx.buffer(kBufferFfnGate, n_tokens * hp.n_ff_exp);
  float* up = ctx.buffer(kBufferFfnUp, n_tokens * hp.n_ff_exp);
  float* expert_out = ctx.buffer(kBufferConvOut, n_tokens * n_embd);
  std::vector<int64_t> slots;  // index t * n_used + j of each gathered row
  for (int64_t e = 0; e < hp.n_expert; ++e) {
    slots.clear();
    for (int64_t i = 0; i < n_tokens * n_used; ++i) {
      if (experts[i] == e) slots.push_back(i);
    }
    if (slots.empty()) continue;
    const int64_t n_rows = static_cast<int64_t>(slots.size());
    for (int64_t r = 0; r < n_rows; ++r) std::copy_n(x + (slots[r] / n_used) * n_embd, n_embd, gathered + r * n_embd);
    kernels::cpu::matmul(expert_slice(lw.ffn_gate_exps, e), gathered, n_rows, gate, ctx.matmul_scratch(), ctx.pool());
    kernels::cpu::matmul(expert_slice(lw.ffn_up_exps, e), gathered, n_rows, up, ctx.matmul_scratch(), ctx.pool());
    kernels::cpu::swiglu(gate, up, gate, n_rows * hp.n_ff_exp);
    kernels::cpu::matmul(expert_slice(lw.ffn_down_exps, e), gate, n_rows, expert_out, ctx.matmul_scratch(), ctx.pool());
    for (int64_t r = 0; r < n_rows; ++r) std::copy_n(expert_out + r * n_embd, n_embd, routed + slots[r] * n_embd);
  }

  // Shared expert, then the routed outputs added in routing order (a fixed order per token).
  float* shared_gate_up = ctx.buffer(kBufferGate, 2 * n_tokens * hp.n_ff_shexp);
  float* shared_gate = shared_gate_up;
  float* shared_up = shared_gate_up + n_tokens * hp.n_ff_shexp;
  kernels::cpu::matmul(lw.ffn_gate_shexp, x, n_tokens, shared_gate, ctx.matmul_scratch(), ctx.pool());
  kernels::cpu::matmul(lw.ffn_up_shexp, x, n_tokens, shared_up, ctx.matmul_scratch(), ctx.pool());
  kernels::cpu::swiglu(shared_gate, shared_up, shared_gate, n_tokens * hp.n_ff_shexp);
  kernels::cpu::matmul(lw.ffn_down_shexp, shared_gate, n_tokens, out, ctx.matmul_scratch(), ctx.pool());
  const float* gate_inp_shexp = lw.ffn_gate_inp_shexp.f32();
  std::vector<float> mix(static_cast<size_t>(n_embd));
  for (int64_t t = 0; t < n_tokens; ++t) {
    double logit = 0.0;
    for (int64_t i = 0; i < n_embd; ++i) logit += static_cast<double>(gate_inp_shexp[i]) * x[t * n_embd + i];
    const float shared_scale = 1.0f / (1.0f + std::exp(-static_cast<float>(logit)));
    float* row = out + t * n_embd;
    for (int64_t i = 0; i < n_embd; ++i) row[i] *= shared_scale;
    std::fill(mix.begin(), mix.end(), 0.0f);
    for (int64_t j = 0; j < n_used; ++j) {
      const float w = weights[t * n_used + j];
      const float* expert_row = routed + (t * n_used + j) * n_embd;
      for (int64_t i = 0; i < n_embd; ++i) mix[i] += w * expert_row[i];
    }
    for (int64_t i = 0; i < n_embd; ++i) row[i] = mix[i] + row[i];
  }
}

Status load_moe_hparams(const gguf::GgufFile& file, HParams& hp) {
  auto read = [&](ArchKey which, int64_t& value, bool required, int64_t fallback) -> Status {
    const std::string key = gguf::arch_key(hp.arch, which);
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
    return Status::errorf("{} = {} exceeds {} = {}", gguf::arch_key(hp.arch, ArchKey::expert_used_count),
                          hp.n_expert_used, gguf::arch_key(hp.arch, ArchKey::expert_count), hp.n_expert);
  }
  const int64_t default_ff_exp = hp.n_ff > 0 ? hp.n_ff / hp.n_expert_used : 0;
  REWIND_RETURN_IF_ERROR(read(ArchKey::expert_feed_forward_length, hp.n_ff_exp, default_ff_exp == 0, default_ff_exp));
  REWIND_RETURN_IF_ERROR(read(ArchKey::expert_shared_feed_forward_length, hp.n_ff_shexp, hp.n_ff == 0, hp.n_ff));
  return Status::ok();
}

Status bind_moe_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw) {
  auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
  const int64_t n_embd = hp.n_embd;
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_inp, binder.matrix(name(TensorKind::ffn_gate_inp), {hp.n_expert, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_exps,
                          binder.matrix(name(TensorKind::ffn_gate_exps), {hp.n_expert, hp.n_ff_exp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_up_exps, binder.matrix(name(TensorKind::ffn_up_exps), {hp.n_expert, hp.n_ff_exp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_down_exps,
                          binder.matrix(name(TensorKind::ffn_down_exps), {hp.n_expert, n_embd, hp.n_ff_exp}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_inp_shexp, binder.vector(name(TensorKind::ffn_gate_inp_shexp), n_embd));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate_shexp, binder.matrix(name(TensorKind::ffn_gate_shexp), {hp.n_ff_shexp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_up_shexp, binder.matrix(name(TensorKind::ffn_up_shexp), {hp.n_ff_shexp, n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_down_shexp, binder.matrix(name(TensorKind::ffn_down_shexp), {n_embd, hp.n_ff_shexp}));
  return Status::ok();
}

}  // namespace rwd::model::blocks
