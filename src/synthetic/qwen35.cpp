// qwen35 / qwen35moe / qwen3next generator: the trunk's Gated DeltaNet / gated-attention pattern, dense FFN and the MTP (nextn)
// layers, with GDN constants in the ranges the converter produces (ssm_a = -exp(A_log), A_log in [0, log 16)).
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/parts.h"

namespace rwd::synthetic {
namespace {

struct HybridShape {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_vocab;
  int64_t ssm_n_head_k, ssm_n_head_v, ssm_head_dim, ssm_d_conv, n_nextn;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;  // 0 experts: dense FFN
};

// qwen35 tiny is the shape of the shared golden model; small follows ../shared/research/peer-speed.md.
constexpr HybridShape kQwen35Tiny = {128, 4, 4, 2, 64, 16, 384, 512, 2, 4, 32, 4, 1};
constexpr HybridShape kQwen35Small = {768, 12, 8, 2, 128, 64, 2048, 16384, 4, 8, 128, 4, 1};
constexpr HybridShape kQwen35MoeTiny = {128, 4, 4, 2, 64, 16, 384, 512, 2, 4, 32, 4, 1, 8, 2, 96, 192};
constexpr HybridShape kQwen35MoeSmall = {768, 8, 8, 2, 128, 64, 2048, 16384, 4, 8, 128, 4, 1, 16, 4, 256, 512};
constexpr int kFullAttentionInterval = 4;

void write_attention_layer(TensorMaker& maker, const HybridShape& s, int il) {
  auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
  const int64_t q_width = s.n_head * s.head_dim;
  maker.matrix(name(gguf::TensorKind::attn_q), 2 * q_width, s.n_embd, 1.0f);  // per head: query, then gate
  maker.matrix(name(gguf::TensorKind::attn_k), s.n_head_kv * s.head_dim, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::attn_v), s.n_head_kv * s.head_dim, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, q_width, 1.0f);
  maker.norm(name(gguf::TensorKind::attn_q_norm), s.head_dim);
  maker.norm(name(gguf::TensorKind::attn_k_norm), s.head_dim);
}

void write_gated_delta_layer(TensorMaker& maker, const HybridShape& s, int il, bool combined_ba) {
  auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
  const int64_t v_width = s.ssm_n_head_v * s.ssm_head_dim;
  const int64_t n_channels = 2 * s.ssm_n_head_k * s.ssm_head_dim + v_width;
  maker.matrix(name(gguf::TensorKind::attn_qkv), n_channels, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::attn_gate), v_width, s.n_embd, 1.0f);
  const float tap = 1.0f / std::sqrt(static_cast<float>(s.ssm_d_conv));
  maker.uniform(name(gguf::TensorKind::ssm_conv1d), {n_channels, s.ssm_d_conv}, -tap, tap);
  maker.uniform(gguf::tensor_name(gguf::TensorKind::ssm_dt, il, gguf::TensorSuffix::bias), {s.ssm_n_head_v}, -1.0f, 1.0f);
  // Stored as the converter writes it: ssm_a = -exp(A_log), with exp(A_log) in [1, 16).
  std::vector<float> a(static_cast<size_t>(s.ssm_n_head_v));
  for (float& value : a) value = -maker.draw_uniform(1.0f, 16.0f);
  maker.values(gguf::tensor_name(gguf::TensorKind::ssm_a, il, gguf::TensorSuffix::none), {s.ssm_n_head_v}, a);
  if (combined_ba) {
    maker.matrix(name(gguf::TensorKind::ssm_ba), 2 * s.ssm_n_head_v, s.n_embd, 1.0f);
  } else {
    maker.matrix(name(gguf::TensorKind::ssm_beta), s.ssm_n_head_v, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ssm_alpha), s.ssm_n_head_v, s.n_embd, 1.0f);
  }
  maker.norm(name(gguf::TensorKind::ssm_norm), s.ssm_head_dim);
  maker.matrix(name(gguf::TensorKind::ssm_out), s.n_embd, v_width, 1.0f);
}

void write_ffn(TensorMaker& maker, const HybridShape& s, int il) {
  auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
  if (s.n_expert > 0) {
    maker.matrix(name(gguf::TensorKind::ffn_gate_inp), s.n_expert, s.n_embd, 1.0f);
    maker.experts(name(gguf::TensorKind::ffn_gate_exps), s.n_expert, s.n_ff_exp, s.n_embd, 1.0f);
    maker.experts(name(gguf::TensorKind::ffn_up_exps), s.n_expert, s.n_ff_exp, s.n_embd, 1.0f);
    maker.experts(name(gguf::TensorKind::ffn_down_exps), s.n_expert, s.n_embd, s.n_ff_exp, 1.0f);
    maker.uniform(name(gguf::TensorKind::ffn_gate_inp_shexp), {s.n_embd}, -0.1f, 0.1f);
    maker.matrix(name(gguf::TensorKind::ffn_gate_shexp), s.n_ff_shexp, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_up_shexp), s.n_ff_shexp, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_down_shexp), s.n_embd, s.n_ff_shexp, 1.0f);
    return;
  }
  maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
}

Status write_qwen35_family(const std::string& arch, const HybridShape& s, gguf::GgufWriter& writer,
                           TensorMaker& maker) {
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 4096);
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer + s.n_nextn));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head));
  writer.set_u32(key(gguf::ArchKey::attention_head_count_kv), static_cast<uint32_t>(s.n_head_kv));
  writer.set_u32(key(gguf::ArchKey::attention_key_length), static_cast<uint32_t>(s.head_dim));
  writer.set_u32(key(gguf::ArchKey::attention_value_length), static_cast<uint32_t>(s.head_dim));
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-6f);
  writer.set_f32(key(gguf::ArchKey::rope_freq_base), 10000000.0f);
  writer.set_u32(key(gguf::ArchKey::rope_dimension_count), static_cast<uint32_t>(s.n_rot));
  if (arch != "qwen3next") {
    // M-RoPE sections in rotary pairs (text, height, width, extra), as the converter writes them.
    const int32_t pairs = static_cast<int32_t>(s.n_rot / 2);
    const int32_t third = (pairs + 2) / 3;
    writer.set_i32_array(key(gguf::ArchKey::rope_dimension_sections), {third, third, pairs - 2 * third, 0});
  }
  writer.set_u32(key(gguf::ArchKey::ssm_conv_kernel), static_cast<uint32_t>(s.ssm_d_conv));
  writer.set_u32(key(gguf::ArchKey::ssm_state_size), static_cast<uint32_t>(s.ssm_head_dim));
  writer.set_u32(key(gguf::ArchKey::ssm_group_count), static_cast<uint32_t>(s.ssm_n_head_k));
  writer.set_u32(key(gguf::ArchKey::ssm_time_step_rank), static_cast<uint32_t>(s.ssm_n_head_v));
  writer.set_u32(key(gguf::ArchKey::ssm_inner_size), static_cast<uint32_t>(s.ssm_n_head_v * s.ssm_head_dim));
  writer.set_u32(key(gguf::ArchKey::full_attention_interval), kFullAttentionInterval);
  writer.set_u32(key(gguf::ArchKey::nextn_predict_layers), static_cast<uint32_t>(s.n_nextn));
  if (s.n_expert > 0) {
    writer.set_u32(key(gguf::ArchKey::expert_count), static_cast<uint32_t>(s.n_expert));
    writer.set_u32(key(gguf::ArchKey::expert_used_count), static_cast<uint32_t>(s.n_expert_used));
    writer.set_u32(key(gguf::ArchKey::expert_feed_forward_length), static_cast<uint32_t>(s.n_ff_exp));
    writer.set_u32(key(gguf::ArchKey::expert_shared_feed_forward_length), static_cast<uint32_t>(s.n_ff_shexp));
  }
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 1.0f);
  for (int il = 0; il < s.n_layer + s.n_nextn; ++il) {
    const bool nextn = il >= s.n_layer;
    maker.norm(gguf::tensor_name(gguf::TensorKind::attn_norm, il), s.n_embd);
    maker.norm(gguf::tensor_name(gguf::TensorKind::attn_post_norm, il), s.n_embd);
    if (nextn || (il + 1) % kFullAttentionInterval == 0) {
      write_attention_layer(maker, s, il);
    } else {
      write_gated_delta_layer(maker, s, il, arch == "qwen3next");
    }
    write_ffn(maker, s, il);
    if (nextn) {
      maker.matrix(gguf::tensor_name(gguf::TensorKind::nextn_eh_proj, il), s.n_embd, 2 * s.n_embd, 1.0f);
      maker.norm(gguf::tensor_name(gguf::TensorKind::nextn_enorm, il), s.n_embd);
      maker.norm(gguf::tensor_name(gguf::TensorKind::nextn_hnorm, il), s.n_embd);
      maker.norm(gguf::tensor_name(gguf::TensorKind::nextn_shared_head_norm, il), s.n_embd);
    }
  }
  maker.norm(gguf::tensor_name(gguf::TensorKind::output_norm), s.n_embd);
  const std::vector<bool> printable = printable_rows(s.n_vocab);
  maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
  return Status::ok();
}

}  // namespace

Status write_qwen35(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_qwen35_family("qwen35", options.preset == "tiny" ? kQwen35Tiny : kQwen35Small, writer, maker);
}

Status write_qwen35moe(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_qwen35_family("qwen35moe", options.preset == "tiny" ? kQwen35MoeTiny : kQwen35MoeSmall, writer, maker);
}

Status write_qwen3next(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_qwen35_family("qwen3next", options.preset == "tiny" ? kQwen35MoeTiny : kQwen35MoeSmall, writer, maker);
}

}  // namespace rwd::synthetic
