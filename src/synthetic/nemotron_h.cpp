// nemotron_h and nemotron_h_moe generators: a layer pattern in the hybrid_override_pattern letters of the HF
// config (M Mamba2, * attention, - MLP or experts), written as the converter writes it: per-layer head_count_kv
// (non-zero on attention layers) and feed_forward_length (non-zero on MLP layers) arrays, key_length apart from
// n_embd / head_count (as Nemotron-Nano-9B-v2's 128 against 4480 / 40), and layer_norm_epsilon with no rms key.
// tiny holds every kind, with an MLP after attention and after Mamba2; nemotron_h small is shaped like a
// 12-layer cut of Nemotron-Nano-9B-v2 (eight B/C groups, attention heads of 128, MLP 3.5 n_embd). The _moe
// models replace each MLP by sigmoid-routed relu² experts with a selection bias, renormalised and scaled by
// 2.5 (Nemotron-3-Nano-30B-A3B's routed_scaling_factor), plus one shared expert.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/mamba2.h"

namespace rwd::synthetic {
namespace {

struct NemotronHShape {
  Mamba2Shape mamba;  // n_embd, n_layer, n_vocab and the Mamba2 mixer
  std::string pattern;
  int64_t n_head, n_head_kv, head_dim;
  int64_t n_ff;  // the MLP width, or each expert's
  int64_t n_expert = 0, n_expert_used = 0, n_ff_shexp = 0;
};

const NemotronHShape& nemotron_h_shape(const std::string& preset) {
  static const NemotronHShape tiny = {{128, 6, 512, 256, 8, 16, 2, 4}, "MM*-M-", 4, 2, 64, 384};
  static const NemotronHShape small = {{768, 12, 16384, 1536, 24, 128, 8, 4}, "M-M-M*-M-M*-", 6, 2, 128, 2688};
  return preset == "tiny" ? tiny : small;
}

const NemotronHShape& nemotron_h_moe_shape(const std::string& preset) {
  static const NemotronHShape tiny = {{128, 6, 512, 256, 8, 16, 2, 4}, "MM*-M-", 4, 2, 64, 96, 8, 2, 192};
  static const NemotronHShape small = {{768, 8, 16384, 1536, 24, 128, 8, 4}, "M-M*-M-M", 6, 2, 128, 256, 16, 4, 512};
  return preset == "tiny" ? tiny : small;
}

Status write_model(const std::string& arch, const NemotronHShape& s, gguf::GgufWriter& writer, TensorMaker& maker) {
  const Mamba2Shape& m = s.mamba;
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  std::vector<int32_t> kv_heads(static_cast<size_t>(m.n_layer), 0);
  std::vector<int32_t> ff_lengths(static_cast<size_t>(m.n_layer), 0);
  for (int il = 0; il < m.n_layer; ++il) {
    if (s.pattern[il] == '*') kv_heads[il] = static_cast<int32_t>(s.n_head_kv);
    if (s.pattern[il] == '-') ff_lengths[il] = static_cast<int32_t>(s.n_ff);
  }
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(m.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 131072);
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(m.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(m.n_layer));
  writer.set_i32_array(key(gguf::ArchKey::feed_forward_length), ff_lengths);
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head));
  writer.set_i32_array(key(gguf::ArchKey::attention_head_count_kv), kv_heads);
  writer.set_u32(key(gguf::ArchKey::attention_key_length), static_cast<uint32_t>(s.head_dim));
  writer.set_u32(key(gguf::ArchKey::attention_value_length), static_cast<uint32_t>(s.head_dim));
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_epsilon), 1e-5f);
  if (s.n_expert > 0) {
    writer.set_u32(key(gguf::ArchKey::expert_count), static_cast<uint32_t>(s.n_expert));
    writer.set_u32(key(gguf::ArchKey::expert_used_count), static_cast<uint32_t>(s.n_expert_used));
    writer.set_u32(key(gguf::ArchKey::expert_feed_forward_length), static_cast<uint32_t>(s.n_ff));
    writer.set_u32(key(gguf::ArchKey::expert_shared_feed_forward_length), static_cast<uint32_t>(s.n_ff_shexp));
    writer.set_u32(key(gguf::ArchKey::expert_shared_count), 1);
    writer.set_bool(key(gguf::ArchKey::expert_weights_norm), true);
    writer.set_f32(key(gguf::ArchKey::expert_weights_scale), 2.5f);
    writer.set_u32(key(gguf::ArchKey::expert_gating_func), 2);  // sigmoid
  }
  write_ssm_keys(arch, m, writer);
  write_tokenizer(writer, m.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), m.n_vocab, m.n_embd, 1.0f);
  for (int il = 0; il < m.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
    maker.norm(name(gguf::TensorKind::attn_norm), m.n_embd);
    if (s.pattern[il] == 'M') {
      write_mamba2_mixer(maker, m, il);
    } else if (s.pattern[il] == '*') {
      maker.matrix(name(gguf::TensorKind::attn_q), s.n_head * s.head_dim, m.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_k), s.n_head_kv * s.head_dim, m.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_v), s.n_head_kv * s.head_dim, m.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_output), m.n_embd, s.n_head * s.head_dim, 1.0f);
    } else if (s.n_expert > 0) {
      maker.matrix(name(gguf::TensorKind::ffn_gate_inp), s.n_expert, m.n_embd, 1.0f);
      maker.uniform(gguf::tensor_name(gguf::TensorKind::ffn_exp_probs_b, il, gguf::TensorSuffix::bias), {s.n_expert},
                    -0.3f, 0.3f);
      maker.experts(name(gguf::TensorKind::ffn_up_exps), s.n_expert, s.n_ff, m.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_down_exps), s.n_expert, m.n_embd, s.n_ff, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_up_shexp), s.n_ff_shexp, m.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_down_shexp), m.n_embd, s.n_ff_shexp, 1.0f);
    } else {
      maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, m.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_down), m.n_embd, s.n_ff, 1.0f);
    }
  }
  write_head(maker, m);
  return Status::ok();
}

}  // namespace

Status write_nemotron_h(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_model("nemotron_h", nemotron_h_shape(options.preset), writer, maker);
}

Status write_nemotron_h_moe(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_model("nemotron_h_moe", nemotron_h_moe_shape(options.preset), writer, maker);
}

}  // namespace rwd::synthetic
