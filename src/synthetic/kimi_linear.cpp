// kimi-linear generator: Kimi Delta Attention layers with MLA layers at fixed positions (per-layer
// head_count_kv: 1 for MLA, 0 for KDA), the keys the converter writes (attention.key_length is the MLA cache
// row, value_length the config's head_dim), one leading dense FFN layer, then sigmoid-routed experts with a
// selection bias wide enough to change which experts win, routed_scaling_factor 2.446 and one shared expert.
// KDA constants in the converter's ranges: ssm_a = -exp(A_log), dt_bias per channel.
#include <cmath>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/parts.h"

namespace rwd::synthetic {
namespace {

struct KimiShape {
  int64_t n_embd, n_layer, n_head, n_vocab, n_ff;
  int64_t kda_head_dim, d_conv;
  int64_t kv_lora, rope, nope, v_head;
  int64_t n_expert, n_expert_used, n_ff_exp;
  std::vector<int> mla_layers;
};

// small is about the size of the qwen35 small preset, with Kimi-Linear-48B's proportions.
const KimiShape& shape_for(const std::string& preset) {
  static const KimiShape tiny = {128, 4, 4, 512, 384, 32, 4, 64, 16, 32, 32, 8, 2, 64, {2}};
  static const KimiShape small = {768, 12, 8, 16384, 2048, 128, 4, 256, 32, 64, 64, 16, 4, 256, {3, 7, 11}};
  return preset == "tiny" ? tiny : small;
}

}  // namespace

Status write_kimi_linear(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  const KimiShape& s = shape_for(options.preset);
  const std::string arch = "kimi-linear";
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  std::vector<int32_t> kv_heads(static_cast<size_t>(s.n_layer), 0);
  for (int il : s.mla_layers) kv_heads[il] = 1;
  const int64_t width = s.n_head * s.kda_head_dim;
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 4096);
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head));
  writer.set_i32_array(key(gguf::ArchKey::attention_head_count_kv), kv_heads);
  writer.set_u32(key(gguf::ArchKey::attention_key_length), static_cast<uint32_t>(s.kv_lora + s.rope));
  writer.set_u32(key(gguf::ArchKey::attention_value_length), static_cast<uint32_t>(s.n_embd / s.n_head));
  writer.set_u32(key(gguf::ArchKey::attention_key_length_mla), static_cast<uint32_t>(s.nope + s.rope));
  writer.set_u32(key(gguf::ArchKey::attention_value_length_mla), static_cast<uint32_t>(s.v_head));
  writer.set_u32(key(gguf::ArchKey::attention_kv_lora_rank), static_cast<uint32_t>(s.kv_lora));
  writer.set_u32(key(gguf::ArchKey::rope_dimension_count), static_cast<uint32_t>(s.rope));
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-5f);
  writer.set_u32(key(gguf::ArchKey::ssm_conv_kernel), static_cast<uint32_t>(s.d_conv));
  writer.set_u32(key(gguf::ArchKey::kda_head_dim), static_cast<uint32_t>(s.kda_head_dim));
  writer.set_u32(key(gguf::ArchKey::expert_count), static_cast<uint32_t>(s.n_expert));
  writer.set_u32(key(gguf::ArchKey::expert_used_count), static_cast<uint32_t>(s.n_expert_used));
  writer.set_u32(key(gguf::ArchKey::expert_feed_forward_length), static_cast<uint32_t>(s.n_ff_exp));
  writer.set_u32(key(gguf::ArchKey::expert_shared_count), 1);
  writer.set_u32(key(gguf::ArchKey::leading_dense_block_count), 1);
  writer.set_f32(key(gguf::ArchKey::expert_weights_scale), 2.446f);
  writer.set_u32(key(gguf::ArchKey::expert_gating_func), 2);  // sigmoid
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 1.0f);
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind, gguf::TensorSuffix suffix = gguf::TensorSuffix::weight) {
      return gguf::tensor_name(kind, il, suffix);
    };
    maker.norm(name(gguf::TensorKind::attn_norm), s.n_embd);
    if (kv_heads[il] == 0) {
      maker.matrix(name(gguf::TensorKind::attn_q), width, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_k), width, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_v), width, s.n_embd, 1.0f);
      const float tap = 1.0f / std::sqrt(static_cast<float>(s.d_conv));
      for (gguf::TensorKind conv : {gguf::TensorKind::ssm_conv1d_q, gguf::TensorKind::ssm_conv1d_k,
                                    gguf::TensorKind::ssm_conv1d_v}) {
        maker.uniform(name(conv), {1, width, 1, s.d_conv}, -tap, tap);  // as converted: ggml {d_conv, 1, width, 1}
      }
      maker.matrix(name(gguf::TensorKind::ssm_f_a), s.kda_head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ssm_f_b), width, s.kda_head_dim, 1.0f);
      maker.uniform(name(gguf::TensorKind::ssm_dt, gguf::TensorSuffix::bias), {width}, -4.0f, -1.0f);
      std::vector<float> a(static_cast<size_t>(s.n_head));
      for (float& value : a) value = -maker.draw_uniform(1.0f, 16.0f);
      maker.values(name(gguf::TensorKind::ssm_a, gguf::TensorSuffix::none), {1, 1, s.n_head, 1}, a);
      maker.matrix(name(gguf::TensorKind::ssm_beta), s.n_head, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ssm_g_a), s.kda_head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ssm_g_b), width, s.kda_head_dim, 1.0f);
      maker.norm(name(gguf::TensorKind::ssm_norm), s.kda_head_dim);
      maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, width, 1.0f);
    } else {
      maker.matrix(name(gguf::TensorKind::attn_q), s.n_head * (s.nope + s.rope), s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_kv_a_mqa), s.kv_lora + s.rope, s.n_embd, 1.0f);
      maker.norm(name(gguf::TensorKind::attn_kv_a_norm), s.kv_lora);
      maker.experts(name(gguf::TensorKind::attn_k_b), s.n_head, s.kv_lora, s.nope, 1.0f);
      maker.experts(name(gguf::TensorKind::attn_v_b), s.n_head, s.v_head, s.kv_lora, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, s.n_head * s.v_head, 1.0f);
    }
    maker.norm(name(gguf::TensorKind::ffn_norm), s.n_embd);
    if (il == 0) {
      maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
    } else {
      maker.matrix(name(gguf::TensorKind::ffn_gate_inp), s.n_expert, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_gate_exps), s.n_expert, s.n_ff_exp, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_up_exps), s.n_expert, s.n_ff_exp, s.n_embd, 1.0f);
      maker.experts(name(gguf::TensorKind::ffn_down_exps), s.n_expert, s.n_embd, s.n_ff_exp, 1.0f);
      maker.uniform(name(gguf::TensorKind::ffn_exp_probs_b, gguf::TensorSuffix::bias), {s.n_expert}, -0.3f, 0.3f);
      maker.matrix(name(gguf::TensorKind::ffn_gate_shexp), s.n_ff_exp, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_up_shexp), s.n_ff_exp, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::ffn_down_shexp), s.n_embd, s.n_ff_exp, 1.0f);
    }
  }
  maker.norm(gguf::tensor_name(gguf::TensorKind::output_norm), s.n_embd);
  const std::vector<bool> printable = printable_rows(s.n_vocab);
  maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
  return Status::ok();
}

}  // namespace rwd::synthetic
