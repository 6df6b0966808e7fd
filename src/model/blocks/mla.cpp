#include "model/blocks/mla.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/dense_transformer.h"

namespace rwd::model::blocks {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

constexpr int64_t kMaxMlaSize = 4096;

}  // namespace

Status load_mla_hparams(const gguf::GgufFile& file, HParams& hp) {
  auto key = [&hp](ArchKey which) { return gguf::arch_key(hp.arch, which); };
  REWIND_ASSIGN_OR_RETURN(hp.mla_key_length, read_count(file, hp, ArchKey::attention_key_length_mla, kMaxMlaSize));
  REWIND_ASSIGN_OR_RETURN(hp.mla_value_length, read_count(file, hp, ArchKey::attention_value_length_mla, kMaxMlaSize));
  REWIND_ASSIGN_OR_RETURN(hp.mla_kv_lora_rank, read_count(file, hp, ArchKey::attention_kv_lora_rank, kMaxMlaSize));
  REWIND_ASSIGN_OR_RETURN(hp.n_rot, read_count(file, hp, ArchKey::rope_dimension_count, kMaxMlaSize));
  if (file.has(key(ArchKey::attention_q_lora_rank))) {
    return Status::errorf("{} is set: MLA with a compressed q (attn_q_a / attn_q_b) is not supported; kimi-linear "
                          "has none", key(ArchKey::attention_q_lora_rank));
  }
  if (hp.n_rot >= hp.mla_key_length) {
    return Status::errorf("{} = {} leaves no non-rotary part of {} = {}", key(ArchKey::rope_dimension_count), hp.n_rot,
                          key(ArchKey::attention_key_length_mla), hp.mla_key_length);
  }
  if (hp.mla_kv_lora_rank + hp.n_rot > 1024) {
    return Status::errorf("{} + {} = {}: the latent row is longer than the 1024 floats attention supports",
                          key(ArchKey::attention_kv_lora_rank), key(ArchKey::rope_dimension_count),
                          hp.mla_kv_lora_rank + hp.n_rot);
  }
  return Status::ok();
}

Status bind_mla_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw) {
  auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
  const int64_t n_head = hp.n_head;
  const int64_t nope = hp.mla_key_length - hp.n_rot;
  const int64_t kv_lora = hp.mla_kv_lora_rank;
  if (binder.has(name(TensorKind::attn_kv_b))) {
    return binder.refuse("tensor '{}' (the unsplit KV up-projection of older conversions) is not supported; convert "
                          "again with a current llama.cpp, which writes '{}' and '{}'",
                          name(TensorKind::attn_kv_b), name(TensorKind::attn_k_b), name(TensorKind::attn_v_b));
  }
  REWIND_ASSIGN_OR_RETURN(lw.attn_q, binder.matrix(name(TensorKind::attn_q), {n_head * hp.mla_key_length, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_kv_a_mqa, binder.matrix(name(TensorKind::attn_kv_a_mqa), {kv_lora + hp.n_rot, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_kv_a_norm, binder.vector(name(TensorKind::attn_kv_a_norm), kv_lora));
  REWIND_ASSIGN_OR_RETURN(lw.attn_k_b, binder.matrix(name(TensorKind::attn_k_b), {n_head, kv_lora, nope}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_v_b, binder.matrix(name(TensorKind::attn_v_b), {n_head, hp.mla_value_length, kv_lora}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_output,
                          binder.matrix(name(TensorKind::attn_output), {hp.n_embd, n_head * hp.mla_value_length}));
  return Status::ok();
}

void mla(const Model& model, ForwardContext& ctx, int il, const float* x, float* out) {
  const HParams& hp = model.hparams();
  const LayerWeights& lw = model.weights().layers[il];
  const int kv_layer = model.kv_index(il);
  const Batch& batch = ctx.batch();
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_head = hp.n_head;
  const int64_t rope = hp.n_rot;
  const int64_t nope = hp.mla_key_length - rope;
  const int64_t kv_lora = hp.mla_kv_lora_rank;
  const int64_t row_width = kv_lora + rope;  // one cache row, and one query head in the latent space
  const int64_t v_width = hp.mla_value_length;

  const int64_t q_width = n_head * hp.mla_key_length;
  compute::Backend& backend = ctx.backend();
  const compute::Rows q{ctx.buffer(kBufferQ, n_tokens * q_width), n_tokens, q_width};  // [.., n_head, nope | rope]
  const compute::Rows latent{ctx.buffer(kBufferK, n_tokens * row_width), n_tokens, row_width};  // kv_lora | k_pe
  backend.matmul_shared_input({{&lw.attn_q, q.data}, {&lw.attn_kv_a_mqa, latent.data}},
                              compute::ConstRows{x, n_tokens, hp.n_embd});
  backend.rms_norm(latent.columns(0, kv_lora), lw.attn_kv_a_norm.f32(), latent.columns(0, kv_lora), hp.rms_eps);

  // Queries in the latent space: per head, [attn_k_b q_nope | q_pe].
  const compute::Rows q_latent{ctx.buffer(kBufferMixed, n_tokens * n_head * row_width), n_tokens, n_head * row_width};
  float* gathered = ctx.buffer(kBufferConvIn, n_tokens * std::max(nope, kv_lora));
  float* projected = ctx.buffer(kBufferConvOut, n_tokens * std::max(kv_lora, v_width));
  for (int64_t h = 0; h < n_head; ++h) {
    const compute::Rows q_nope{gathered, n_tokens, nope};
    const compute::Rows q_projected{projected, n_tokens, kv_lora};
    backend.copy(q.columns(h * hp.mla_key_length, nope), q_nope);
    backend.matmul(lw.attn_k_b_heads[h], q_nope, q_projected);
    backend.copy(q_projected, q_latent.columns(h * row_width, kv_lora));
    backend.copy(q.columns(h * hp.mla_key_length + nope, rope), q_latent.columns(h * row_width + kv_lora, rope));
  }

  ops::AttentionParams params;
  params.n_head = n_head;
  params.n_head_kv = 1;
  params.head_dim = row_width;
  params.scale = 1.0f / std::sqrt(static_cast<float>(hp.mla_key_length));
  // Attending with the rows as values too: each head's first kv_lora outputs are the attended latent.
  const compute::Rows attended{ctx.buffer(kBufferAttnOut, n_tokens * n_head * row_width), n_tokens, n_head * row_width};
  state::KvCache& kv = ctx.kv();
  std::vector<ops::AttentionCall>& calls = ctx.attention_calls();
  calls.clear();
  for (size_t si = 0; si < ctx.slot_spans().size(); ++si) {
    const SlotSpan& span = ctx.slot_spans()[si];
    backend.store_kv(latent.rows(span.begin, span.end - span.begin), kv.k_store(kv_layer, span.slot),
                     ctx.kv_rows(span));
    const ops::KvRows rows = kv.k_rows(kv_layer, span.slot);
    calls.push_back({q_latent.row(span.begin), batch.positions.data() + span.begin, span.end - span.begin, rows, rows,
                     ctx.kv_row(span.end - 1) + 1, attended.row(span.begin), ctx.key_paths(static_cast<int64_t>(si))});
  }
  backend.attention_sequences(calls, params);

  const compute::Rows values{ctx.buffer(kBufferRecurrentOut, n_tokens * n_head * v_width), n_tokens, n_head * v_width};
  for (int64_t h = 0; h < n_head; ++h) {
    const compute::Rows latent_values{gathered, n_tokens, kv_lora};
    const compute::Rows projected_values{projected, n_tokens, v_width};
    backend.copy(attended.columns(h * row_width, kv_lora), latent_values);
    backend.matmul(lw.attn_v_b_heads[h], latent_values, projected_values);
    backend.copy(projected_values, values.columns(h * v_width, v_width));
  }
  backend.matmul(lw.attn_output, values, {out, n_tokens, hp.n_embd});
}

}  // namespace rwd::model::blocks
