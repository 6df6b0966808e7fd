#include "model/dense_transformer.h"

#include <fmt/format.h>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"

#include "model/model.h"

namespace rwd::model {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

std::string key(const HParams& hp, ArchKey which) { return gguf::arch_key(hp.arch, which); }

Result<int64_t> positive(const gguf::GgufFile& file, const std::string& name) {
  REWIND_ASSIGN_OR_RETURN(uint64_t value, file.get_u64(name));
  if (value == 0 || value > (1u << 24)) return Status::errorf("{} is {}, expected 1 .. 16777216", name, value);
  return static_cast<int64_t>(value);
}

}  // namespace

Status load_trunk_hparams(const gguf::GgufFile& file, HParams& hp, NormEpsKey eps_key) {
  REWIND_ASSIGN_OR_RETURN(hp.n_embd, positive(file, key(hp, ArchKey::embedding_length)));
  REWIND_ASSIGN_OR_RETURN(hp.n_layer, positive(file, key(hp, ArchKey::block_count)));
  std::string eps_name = key(hp, ArchKey::attention_layer_norm_rms_epsilon);
  if (eps_key == NormEpsKey::rms_or_layer_norm) {
    const std::string layer_norm_name = key(hp, ArchKey::attention_layer_norm_epsilon);
    if (!file.has(layer_norm_name)) return Status::errorf("{} is missing", layer_norm_name);
    if (!file.has(eps_name)) eps_name = layer_norm_name;
  }
  REWIND_ASSIGN_OR_RETURN(hp.rms_eps, file.get_f32(eps_name));
  if (!(hp.rms_eps > 0.0f && hp.rms_eps < 1.0f)) {
    return Status::errorf("{} is {}, expected a small positive number", eps_name, hp.rms_eps);
  }
  REWIND_ASSIGN_OR_RETURN(uint32_t n_ctx_train, file.get_u32_or(key(hp, ArchKey::context_length), 4096));
  hp.n_ctx_train = n_ctx_train;
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerParams{LayerKind::attention, false, 10000.0f, 1.0f});
  REWIND_ASSIGN_OR_RETURN(std::vector<std::string> tokens, file.get_string_array(gguf::kTokenizerTokens));
  hp.n_vocab = static_cast<int64_t>(tokens.size());
  if (file.has(key(hp, ArchKey::vocab_size))) {
    REWIND_ASSIGN_OR_RETURN(uint64_t vocab_size, file.get_u64(key(hp, ArchKey::vocab_size)));
    if (static_cast<int64_t>(vocab_size) < hp.n_vocab) {
      return Status::errorf("{} is {} but tokenizer.ggml.tokens has {} entries", key(hp, ArchKey::vocab_size), vocab_size,
                            hp.n_vocab);
    }
    hp.n_vocab = static_cast<int64_t>(vocab_size);
  }
  return Status::ok();
}

Status load_dense_hparams(const gguf::GgufFile& file, HParams& hp, NormEpsKey eps_key) {
  REWIND_RETURN_IF_ERROR(load_trunk_hparams(file, hp, eps_key));
  REWIND_ASSIGN_OR_RETURN(hp.n_head, positive(file, key(hp, ArchKey::attention_head_count)));
  hp.n_head_kv = hp.n_head;
  // A per-layer array (LFM2: 0 marks a convolution layer) is left to the architecture to read.
  const gguf::Value* head_count_kv = file.find(key(hp, ArchKey::attention_head_count_kv));
  if (head_count_kv != nullptr && head_count_kv->type != gguf::ValueType::array) {
    REWIND_ASSIGN_OR_RETURN(hp.n_head_kv, positive(file, key(hp, ArchKey::attention_head_count_kv)));
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    return Status::errorf("{} = {} is not a multiple of {} = {}", key(hp, ArchKey::attention_head_count), hp.n_head,
                          key(hp, ArchKey::attention_head_count_kv), hp.n_head_kv);
  }
  hp.head_dim = hp.n_embd / hp.n_head;
  if (file.has(key(hp, ArchKey::attention_key_length))) {
    REWIND_ASSIGN_OR_RETURN(hp.head_dim, positive(file, key(hp, ArchKey::attention_key_length)));
  }
  if (file.has(key(hp, ArchKey::attention_value_length))) {
    REWIND_ASSIGN_OR_RETURN(int64_t value_length, positive(file, key(hp, ArchKey::attention_value_length)));
    if (value_length != hp.head_dim) {
      return Status::errorf("{} = {} differs from the key length {}; not supported for {}",
                            key(hp, ArchKey::attention_value_length), value_length, hp.head_dim, hp.arch);
    }
  }
  // Optional here: mixture-of-experts files may give only the expert sizes; dense users check it. A per-layer
  // array (nemotron_h: 0 marks a layer without FFN) is left to the architecture to read.
  const gguf::Value* feed_forward_length = file.find(key(hp, ArchKey::feed_forward_length));
  if (feed_forward_length != nullptr && feed_forward_length->type != gguf::ValueType::array) {
    REWIND_ASSIGN_OR_RETURN(hp.n_ff, positive(file, key(hp, ArchKey::feed_forward_length)));
  }
  REWIND_ASSIGN_OR_RETURN(uint32_t n_rot, file.get_u32_or(key(hp, ArchKey::rope_dimension_count),
                                                          static_cast<uint32_t>(hp.head_dim)));
  hp.n_rot = n_rot;
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0) {
    return Status::errorf("{} is {}, expected an even number in [2, {}]", key(hp, ArchKey::rope_dimension_count), hp.n_rot,
                          hp.head_dim);
  }
  REWIND_ASSIGN_OR_RETURN(float freq_base, file.get_f32_or(key(hp, ArchKey::rope_freq_base), 10000.0f));
  float freq_scale = 1.0f;
  REWIND_ASSIGN_OR_RETURN(std::string scaling, file.get_string_or(key(hp, ArchKey::rope_scaling_type), "none"));
  if (scaling == "linear") {
    REWIND_ASSIGN_OR_RETURN(float factor, file.get_f32_or(key(hp, ArchKey::rope_scaling_factor), 1.0f));
    if (!(factor > 0.0f)) return Status::errorf("{} is {}, expected > 0", key(hp, ArchKey::rope_scaling_factor), factor);
    freq_scale = 1.0f / factor;
  } else if (scaling != "none") {
    return Status::errorf("{} is '{}'; rewind supports 'none' and 'linear'", key(hp, ArchKey::rope_scaling_type), scaling);
  }
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerParams{LayerKind::attention, false, freq_base, freq_scale});
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  return Status::ok();
}

Status load_layer_pattern(const gguf::GgufFile& file, HParams& hp, LayerKind recurrent) {
  const std::string kv_key = gguf::arch_key(hp.arch, ArchKey::attention_head_count_kv);
  const gguf::Value* kv_value = file.find(kv_key);
  if (kv_value == nullptr || kv_value->type != gguf::ValueType::array) {
    return Status::errorf("{} must be a per-layer array (0 for recurrent layers)", kv_key);
  }
  REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> kv_heads, file.get_i64_array(kv_key));
  if (static_cast<int64_t>(kv_heads.size()) != hp.n_layer) {
    return Status::errorf("{} has {} entries, expected one per layer ({})", kv_key, kv_heads.size(), hp.n_layer);
  }
  hp.n_head_kv = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const int64_t n = kv_heads[il];
    if (n == 0) {
      hp.layers[il].kind = recurrent;
      continue;
    }
    if (n < 0 || hp.n_head % n != 0 || (hp.n_head_kv != 0 && n != hp.n_head_kv)) {
      return Status::errorf("{}[{}] is {}; attention layers must share one KV head count dividing {}", kv_key, il, n,
                            hp.n_head);
    }
    hp.n_head_kv = n;
    hp.layers[il].kind = LayerKind::attention;
  }
  if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;  // no attention layer: the value is unused
  return Status::ok();
}

Status bind_embeddings_and_head(WeightBinder& binder, const HParams& hp, TensorKind final_norm, bool may_tie,
                                Weights& w) {
  REWIND_ASSIGN_OR_RETURN(w.token_embd, binder.embeddings(gguf::tensor_name(TensorKind::token_embd), {hp.n_vocab, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(w.output_norm, binder.vector(gguf::tensor_name(final_norm), hp.n_embd));
  if (may_tie && !binder.has(gguf::tensor_name(TensorKind::output))) {
    w.output = w.token_embd;
    return Status::ok();
  }
  REWIND_ASSIGN_OR_RETURN(w.output, binder.matrix(gguf::tensor_name(TensorKind::output), {hp.n_vocab, hp.n_embd}));
  return Status::ok();
}

Status bind_attention_projections(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw) {
  auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
  const int64_t q_width = hp.n_head * hp.head_dim;
  const int64_t kv_width = hp.n_head_kv * hp.head_dim;
  REWIND_ASSIGN_OR_RETURN(lw.attn_q, binder.matrix(name(TensorKind::attn_q), {q_width, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_k, binder.matrix(name(TensorKind::attn_k), {kv_width, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_v, binder.matrix(name(TensorKind::attn_v), {kv_width, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.attn_output, binder.matrix(name(TensorKind::attn_output), {hp.n_embd, q_width}));
  return Status::ok();
}

Status bind_ffn_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw) {
  auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
  REWIND_ASSIGN_OR_RETURN(lw.ffn_gate, binder.matrix(name(TensorKind::ffn_gate), {hp.n_ff, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_up, binder.matrix(name(TensorKind::ffn_up), {hp.n_ff, hp.n_embd}));
  REWIND_ASSIGN_OR_RETURN(lw.ffn_down, binder.matrix(name(TensorKind::ffn_down), {hp.n_embd, hp.n_ff}));
  return Status::ok();
}

Result<int64_t> read_count(const gguf::GgufFile& file, const HParams& hp, ArchKey which, int64_t max) {
  const std::string name = key(hp, which);
  REWIND_ASSIGN_OR_RETURN(uint64_t value, file.get_u64(name));
  if (value == 0 || value > static_cast<uint64_t>(max)) return Status::errorf("{} is {}, expected 1 .. {}", name, value, max);
  return static_cast<int64_t>(value);
}

Status bind_dense_weights(WeightBinder& binder, const HParams& hp, const DenseTensorSet& set, Weights& w) {
  if (hp.n_ff <= 0) return Status::errorf("{} is missing", key(hp, ArchKey::feed_forward_length));
  const int64_t n_embd = hp.n_embd;
  REWIND_ASSIGN_OR_RETURN(w.token_embd, binder.embeddings(gguf::tensor_name(TensorKind::token_embd), {hp.n_vocab, n_embd}));
  if (tensor::dtype_traits(w.token_embd.dtype).to_float == nullptr) {
    return Status::errorf("tensor 'token_embd.weight' has type {}, which rewind cannot read",
                          tensor::dtype_name(w.token_embd.dtype));
  }
  REWIND_ASSIGN_OR_RETURN(w.output_norm, binder.vector(gguf::tensor_name(TensorKind::output_norm), n_embd));
  if (binder.has(gguf::tensor_name(TensorKind::output))) {
    REWIND_ASSIGN_OR_RETURN(w.output, binder.matrix(gguf::tensor_name(TensorKind::output), {hp.n_vocab, n_embd}));
  } else {
    w.output = w.token_embd;
  }
  if (binder.has("rope_freqs.weight")) {
    return Status::error("tensor 'rope_freqs.weight' (llama-3 style rope frequency factors) is not supported yet");
  }
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    REWIND_RETURN_IF_ERROR(bind_attention_projections(binder, hp, il, lw));
    if (set.qkv_bias) {
      const int64_t kv_width = hp.n_head_kv * hp.head_dim;
      const auto bias = [il](TensorKind kind) { return gguf::tensor_name(kind, il, gguf::TensorSuffix::bias); };
      REWIND_ASSIGN_OR_RETURN(lw.attn_q_bias, binder.floats(bias(TensorKind::attn_q), {hp.n_head * hp.head_dim}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_k_bias, binder.floats(bias(TensorKind::attn_k), {kv_width}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_v_bias, binder.floats(bias(TensorKind::attn_v), {kv_width}));
    }
    if (set.qk_norm) {
      REWIND_ASSIGN_OR_RETURN(lw.attn_q_norm, binder.vector(name(TensorKind::attn_q_norm), hp.head_dim));
      REWIND_ASSIGN_OR_RETURN(lw.attn_k_norm, binder.vector(name(TensorKind::attn_k_norm), hp.head_dim));
    }
    if (set.post_norms) {
      REWIND_ASSIGN_OR_RETURN(lw.attn_post_norm, binder.vector(name(TensorKind::attn_post_norm), n_embd));
      REWIND_ASSIGN_OR_RETURN(lw.ffn_post_norm, binder.vector(name(TensorKind::ffn_post_norm), n_embd));
    }
    REWIND_ASSIGN_OR_RETURN(lw.ffn_norm, binder.vector(name(TensorKind::ffn_norm), n_embd));
    REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
  }
  return Status::ok();
}

}  // namespace rwd::model
