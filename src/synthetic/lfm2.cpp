// lfm2 generator: short-convolution layers with attention at fixed positions (as LFM2 places them), a
// per-layer head_count_kv array (0 for convolution layers), tied embeddings and token_embd_norm.
#include <cmath>

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "synthetic/parts.h"

namespace rwd::synthetic {
namespace {

struct Lfm2Shape {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, l_cache;
  std::vector<int> attention_layers;
};

// small follows ../shared/research/peer-speed.md (attention at layers 2, 5, 8, 10).
const Lfm2Shape& shape_for(const std::string& preset) {
  static const Lfm2Shape tiny = {128, 6, 4, 2, 32, 384, 512, 3, {2, 5}};
  static const Lfm2Shape small = {768, 12, 12, 4, 64, 2048, 16384, 3, {2, 5, 8, 10}};
  return preset == "tiny" ? tiny : small;
}

}  // namespace

Status write_lfm2(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker) {
  const Lfm2Shape& s = shape_for(options.preset);
  const std::string arch = "lfm2";
  auto key = [&arch](gguf::ArchKey which) { return gguf::arch_key(arch, which); };
  std::vector<int32_t> kv_heads(static_cast<size_t>(s.n_layer), 0);
  for (int il : s.attention_layers) kv_heads[il] = static_cast<int32_t>(s.n_head_kv);
  writer.set_u32(key(gguf::ArchKey::vocab_size), static_cast<uint32_t>(s.n_vocab));
  writer.set_u32(key(gguf::ArchKey::context_length), 4096);
  writer.set_u32(key(gguf::ArchKey::embedding_length), static_cast<uint32_t>(s.n_embd));
  writer.set_u32(key(gguf::ArchKey::block_count), static_cast<uint32_t>(s.n_layer));
  writer.set_u32(key(gguf::ArchKey::feed_forward_length), static_cast<uint32_t>(s.n_ff));
  writer.set_u32(key(gguf::ArchKey::attention_head_count), static_cast<uint32_t>(s.n_head));
  writer.set_i32_array(key(gguf::ArchKey::attention_head_count_kv), kv_heads);
  writer.set_f32(key(gguf::ArchKey::attention_layer_norm_rms_epsilon), 1e-5f);
  writer.set_f32(key(gguf::ArchKey::rope_freq_base), 1000000.0f);
  writer.set_u32(key(gguf::ArchKey::shortconv_l_cache), static_cast<uint32_t>(s.l_cache));
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd,
                  2.0f / std::sqrt(static_cast<float>(s.n_embd)));
  for (int il = 0; il < s.n_layer; ++il) {
    auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
    maker.norm(name(gguf::TensorKind::attn_norm), s.n_embd);
    if (kv_heads[il] == 0) {
      const float tap = 1.0f / std::sqrt(static_cast<float>(s.l_cache));
      maker.uniform(name(gguf::TensorKind::shortconv_conv), {s.n_embd, s.l_cache}, -tap, tap);
      maker.matrix(name(gguf::TensorKind::shortconv_in_proj), 3 * s.n_embd, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::shortconv_out_proj), s.n_embd, s.n_embd, 1.0f);
    } else {
      maker.matrix(name(gguf::TensorKind::attn_q), s.n_head * s.head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_k), s.n_head_kv * s.head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_v), s.n_head_kv * s.head_dim, s.n_embd, 1.0f);
      maker.matrix(name(gguf::TensorKind::attn_output), s.n_embd, s.n_head * s.head_dim, 1.0f);
      maker.norm(name(gguf::TensorKind::attn_q_norm), s.head_dim);
      maker.norm(name(gguf::TensorKind::attn_k_norm), s.head_dim);
    }
    maker.norm(name(gguf::TensorKind::ffn_norm), s.n_embd);
    maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
    maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
  }
  maker.norm(gguf::tensor_name(gguf::TensorKind::token_embd_norm), s.n_embd);
  return Status::ok();
}

}  // namespace rwd::synthetic
