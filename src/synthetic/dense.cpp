// Generators for the dense transformer families (llama, qwen2, qwen3, gemma3): one shape table, the same
// tensor set with each family's extras (q/k/v biases, q/k norms, sandwich norms, sliding window).
#include <fmt/format.h>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/parts.h"

namespace rwd::synthetic {
namespace {

struct DenseShape {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  bool tied;
};

struct ArchRecipe {
  const char* arch;
  DenseShape tiny;
  DenseShape small;
  bool qk_norm;
  bool post_norms;
  bool qkv_bias;
};

// small shapes follow ../shared/research/peer-speed.md where it lists one, so figures are comparable.
constexpr ArchRecipe kDenseRecipes[] = {
    {"llama", {128, 2, 4, 2, 32, 384, 512, false}, {768, 12, 12, 4, 64, 2048, 16384, false}, false, false, false},
    // qwen2 small: Qwen2.5-0.5B's trunk (14 q / 2 kv heads of 64, FFN 4864) with the presets' vocabulary.
    {"qwen2", {128, 2, 4, 2, 32, 384, 512, false}, {896, 24, 14, 2, 64, 4864, 16384, false}, false, false, true},
    {"qwen3", {128, 2, 4, 2, 32, 384, 512, false}, {768, 2, 8, 4, 64, 1536, 16384, false}, true, false, false},
    {"gemma3", {128, 6, 2, 1, 64, 384, 512, true}, {640, 6, 4, 1, 256, 2048, 16384, true}, true, true, false},
};

// splitmix64: small, fast and the same on every platform, so a seed names one model everywhere.
Status write_dense(const ArchRecipe& recipe, const SyntheticModelOptions& options, gguf::GgufWriter& writer,
                   TensorMaker& maker) {
  const DenseShape& s = options.preset == "tiny" ? recipe.tiny : recipe.small;
  const std::string arch = recipe.arch;
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::context_length), 4096);
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::attention_head_count_kv), static_cast<uint32_t>(s.n_head_kv));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::attention_key_length), static_cast<uint32_t>(s.head_dim));
  writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::attention_value_length), static_cast<uint32_t>(s.head_dim));
  writer.set_f32(gguf::arch_key(arch, gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-6f);
  writer.set_f32(gguf::arch_key(arch, gguf::ArchKey::rope_freq_base), arch == "llama" ? 10000.0f : 1000000.0f);
  if (arch == "gemma3") writer.set_u32(gguf::arch_key(arch, gguf::ArchKey::attention_sliding_window), options.preset == "tiny" ? 16 : 512);
  write_tokenizer(writer, s.n_vocab);

  const int64_t q_width = s.n_head * s.head_dim;
  const int64_t kv_width = s.n_head_kv * s.head_dim;
  // Tied embeddings double as the output matrix: scaled like it (logits of standard deviation about 2).
  const float embd_stddev = s.tied ? 2.0f / std::sqrt(static_cast<float>(s.n_embd)) : 1.0f;
  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, embd_stddev);
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
    maker.norm(name(gguf::TensorKind::attn_norm), s.n_embd);
    maker.matrix(name(gguf::TensorKind::attn_q), q_width, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_k), kv_width, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_v), kv_width, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, q_width, 1.0f);
    if (recipe.qkv_bias) {
      // Biases as large as the projected values, so a bias left out or added twice is plain in the logits.
      const auto bias = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il, gguf::TensorSuffix::bias); };
      maker.uniform(bias(gguf::TensorKind::attn_q), {q_width}, -1.0f, 1.0f);
      maker.uniform(bias(gguf::TensorKind::attn_k), {kv_width}, -1.0f, 1.0f);
      maker.uniform(bias(gguf::TensorKind::attn_v), {kv_width}, -1.0f, 1.0f);
    }
    if (recipe.qk_norm) {
      maker.norm(name(gguf::TensorKind::attn_q_norm), s.head_dim);
      maker.norm(name(gguf::TensorKind::attn_k_norm), s.head_dim);
    }
    if (recipe.post_norms) {
      maker.norm(name(gguf::TensorKind::attn_post_norm), s.n_embd);
      maker.norm(name(gguf::TensorKind::ffn_post_norm), s.n_embd);
    }
    maker.norm(name(gguf::TensorKind::ffn_norm), s.n_embd);
    maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
  }
  maker.norm(gguf::tensor_name(gguf::TensorKind::output_norm), s.n_embd);
  if (!s.tied) {
    const std::vector<bool> printable = printable_rows(s.n_vocab);
    maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
  }
  return Status::ok();
}

const ArchRecipe& recipe_for(const char* arch) {
  for (const ArchRecipe& recipe : kDenseRecipes) {
    if (std::string_view(recipe.arch) == arch) return recipe;
  }
  return kDenseRecipes[0];
}

}  // namespace

Status write_llama(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_dense(recipe_for("llama"), options, writer, maker);
}

Status write_qwen2(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_dense(recipe_for("qwen2"), options, writer, maker);
}

Status write_qwen3(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_dense(recipe_for("qwen3"), options, writer, maker);
}

Status write_gemma3(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  return write_dense(recipe_for("gemma3"), options, writer, maker);
}

}  // namespace rwd::synthetic
