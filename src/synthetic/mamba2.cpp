// mamba2, granitehybrid and falcon-h1 generators: Mamba2 mixers with constants in the ranges the converter produces
// (ssm_a = -exp(A_log) with exp(A_log) in [1, 16), dt_bias so that softplus(dt) starts near 0.02 .. 0.3, D near
// one) and, for granitehybrid, attention layers at fixed positions (per-layer head_count_kv, 0 for Mamba2),
// no positions (rope.scaling.finetuned false, as Granite-4.0-H) and the optional scales set away from 1 so a
// loader that ignores one is caught; falcon-h1 runs attention and a Mamba2 mixer in every layer and, like the
// released checkpoints, has no ssm_norm. tiny uses two B/C groups so the head-to-group mapping is exercised.
#include <cmath>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/mamba2.h"

namespace rwd::synthetic {
namespace {

// mamba2 small is the shape of mamba2-130m; granitehybrid small puts one attention layer in four beside
// Mamba2 layers of the same width, about the size of the qwen35 small preset.
const Mamba2Shape& mamba2_shape(const std::string& preset) {
  static const Mamba2Shape tiny = {128, 4, 512, 256, 8, 16, 2, 4};
  static const Mamba2Shape small = {768, 24, 16384, 1536, 24, 128, 1, 4};
  return preset == "tiny" ? tiny : small;
}

// granitehybrid tiny has experts, as Granite-4.0-H-Tiny (the dense FFN is covered by test_mamba2_reference);
// small is dense, as Granite-4.0-H-1B.
const Mamba2Shape& granite_shape(const std::string& preset) {
  static const Mamba2Shape tiny = {128, 6, 512, 256, 8, 16, 2, 4, 4, 2, 96, {2, 5}, 8, 2, 192};
  static const Mamba2Shape small = {768, 12, 16384, 1536, 24, 128, 1, 4, 12, 4, 2048, {3, 7, 11}};
  return preset == "tiny" ? tiny : small;
}

const Mamba2Shape& falcon_h1_shape(const std::string& preset) {
  static const Mamba2Shape tiny = {128, 4, 512, 256, 8, 16, 2, 4, 4, 2, 384};
  static const Mamba2Shape small = {768, 12, 16384, 1536, 24, 128, 1, 4, 8, 2, 2048};
  return preset == "tiny" ? tiny : small;
}

}  // namespace

void write_ssm_keys(const std::string& arch, const Mamba2Shape& s, gguf::GgufWriter& writer) {
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  writer.set_u32(key(gguf::ArchKey::ssm_conv_kernel), static_cast<uint32_t>(s.d_conv));
  writer.set_u32(key(gguf::ArchKey::ssm_inner_size), static_cast<uint32_t>(s.d_inner));
  writer.set_u32(key(gguf::ArchKey::ssm_state_size), static_cast<uint32_t>(s.d_state));
  writer.set_u32(key(gguf::ArchKey::ssm_time_step_rank), static_cast<uint32_t>(s.n_head));
  writer.set_u32(key(gguf::ArchKey::ssm_group_count), static_cast<uint32_t>(s.n_group));
}

void write_mamba2_mixer(TensorMaker& maker, const Mamba2Shape& s, int il, bool with_norm) {
  auto name = [il](gguf::TensorKind kind, gguf::TensorSuffix suffix = gguf::TensorSuffix::weight) {
    return gguf::tensor_name(kind, il, suffix);
  };
  const int64_t conv_channels = s.d_inner + 2 * s.n_group * s.d_state;
  maker.matrix(name(gguf::TensorKind::ssm_in), s.d_inner + conv_channels + s.n_head, s.n_embd, 1.0f);
  const float tap = 1.0f / std::sqrt(static_cast<float>(s.d_conv));
  maker.uniform(name(gguf::TensorKind::ssm_conv1d), {conv_channels, s.d_conv}, -tap, tap);
  maker.uniform(name(gguf::TensorKind::ssm_conv1d, gguf::TensorSuffix::bias), {conv_channels}, -0.1f, 0.1f);
  maker.uniform(name(gguf::TensorKind::ssm_dt, gguf::TensorSuffix::bias), {s.n_head}, -4.0f, -1.0f);
  std::vector<float> a(static_cast<size_t>(s.n_head));
  for (float& value : a) value = -maker.draw_uniform(1.0f, 16.0f);
  maker.values(name(gguf::TensorKind::ssm_a, gguf::TensorSuffix::none), {s.n_head, 1}, a);
  maker.uniform(name(gguf::TensorKind::ssm_d, gguf::TensorSuffix::none), {s.n_head, 1}, 0.5f, 1.5f);
  if (with_norm) maker.uniform(name(gguf::TensorKind::ssm_norm), {s.n_group, s.d_inner / s.n_group}, 0.95f, 1.05f);
  maker.matrix(name(gguf::TensorKind::ssm_out), s.n_embd, s.d_inner, 1.0f);
}

void write_head(TensorMaker& maker, const Mamba2Shape& s) {
  maker.norm(gguf::tensor_name(gguf::TensorKind::output_norm), s.n_embd);
  const std::vector<bool> printable = printable_rows(s.n_vocab);
  maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
}

Status write_mamba2(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  const Mamba2Shape& s = mamba2_shape(options.preset);
  const std::string arch = "mamba2";
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 1u << 20);  // as the converter writes it: no limit
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), 0);
  writer.set_u32(key(gguf::ArchKey::attention_head_count), 0);
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-5f);
  write_ssm_keys(arch, s, writer);
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    maker.norm(gguf::tensor_name(gguf::TensorKind::attn_norm, il), s.n_embd);
    write_mamba2_mixer(maker, s, il);
  }
  write_head(maker, s);
  return Status::ok();
}

Status write_granitehybrid(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  const Mamba2Shape& s = granite_shape(options.preset);
  const std::string arch = "granitehybrid";
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  const int64_t head_dim = s.n_embd / s.n_head_attn;
  std::vector<int32_t> kv_heads(static_cast<size_t>(s.n_layer), 0);
  for (int il : s.attention_layers) kv_heads[il] = static_cast<int32_t>(s.n_head_kv);
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 1u << 20);  // no positions: the converter writes 2^20
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head_attn));
  writer.set_i32_array(key(gguf::ArchKey::attention_head_count_kv), kv_heads);
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-5f);
  writer.set_bool(key(gguf::ArchKey::rope_scaling_finetuned), false);
  writer.set_f32(key(gguf::ArchKey::embedding_scale), 2.0f);
  writer.set_f32(key(gguf::ArchKey::residual_scale), 0.5f);
  writer.set_f32(key(gguf::ArchKey::logit_scale), 0.5f);
  writer.set_f32(key(gguf::ArchKey::attention_scale), 0.75f / std::sqrt(static_cast<float>(head_dim)));
  if (s.n_expert > 0) {
    writer.set_u32(key(gguf::ArchKey::expert_count), static_cast<uint32_t>(s.n_expert));
    writer.set_u32(key(gguf::ArchKey::expert_used_count), static_cast<uint32_t>(s.n_expert_used));
    writer.set_u32(key(gguf::ArchKey::expert_shared_feed_forward_length), static_cast<uint32_t>(s.n_ff_shexp));
  }
  write_ssm_keys(arch, s, writer);
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 0.5f);
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
    maker.norm(name(gguf::TensorKind::attn_norm), s.n_embd);
    if (kv_heads[il] == 0) {
      write_mamba2_mixer(maker, s, il);
    } else {
      maker.matrix(name(gguf::TensorKind::attn_q), s.n_head_attn * head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_k), s.n_head_kv * head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_v), s.n_head_kv * head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, s.n_head_attn * head_dim, 1.0f);
    }
    maker.norm(name(gguf::TensorKind::ffn_norm), s.n_embd);
    if (s.n_expert > 0) {
      maker.matrix(name(gguf::TensorKind::ffn_gate_inp), s.n_expert, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_gate_exps), s.n_expert, s.n_ff, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_up_exps), s.n_expert, s.n_ff, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_down_exps), s.n_expert, s.n_embd, s.n_ff, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_gate_shexp), s.n_ff_shexp, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_up_shexp), s.n_ff_shexp, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_down_shexp), s.n_embd, s.n_ff_shexp, 1.0f);
      continue;
    }
    maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
  }
  write_head(maker, s);
  return Status::ok();
}

Status write_falcon_h1(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  const Mamba2Shape& s = falcon_h1_shape(options.preset);
  const std::string arch = "falcon-h1";
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  const int64_t head_dim = s.n_embd / s.n_head_attn;
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 4096);
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head_attn));
  writer.set_u32(key(gguf::ArchKey::attention_head_count_kv), static_cast<uint32_t>(s.n_head_kv));
  writer.set_u32(key(gguf::ArchKey::attention_key_length), static_cast<uint32_t>(head_dim));
  writer.set_u32(key(gguf::ArchKey::attention_value_length), static_cast<uint32_t>(head_dim));
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-5f);
  writer.set_f32(key(gguf::ArchKey::rope_freq_base), 1e11f);  // Falcon-H1's rope_theta
  write_ssm_keys(arch, s, writer);
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
    maker.norm(name(gguf::TensorKind::attn_norm), s.n_embd);
    maker.matrix(name(gguf::TensorKind::attn_q), s.n_head_attn * head_dim, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_k), s.n_head_kv * head_dim, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_v), s.n_head_kv * head_dim, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, s.n_head_attn * head_dim, 1.0f);
    write_mamba2_mixer(maker, s, il, false);
    // The name llama.cpp loads for this architecture: no ".weight".
    maker.norm(gguf::tensor_name(gguf::TensorKind::ffn_norm, il, gguf::TensorSuffix::none), s.n_embd);
    maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
  }
  write_head(maker, s);
  return Status::ok();
}

}  // namespace rwd::synthetic
