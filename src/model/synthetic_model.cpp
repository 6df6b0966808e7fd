// Random-weight GGUF models for tests and benchmarks (`rewind mkmodel`): the shapes of a preset, llama.cpp's
// tensor names and metadata keys, weights scaled so that logits are far from flat, and a byte-level BPE
// vocabulary in which any text is its UTF-8 bytes. Output rows of non-printable tokens are zero (untied
// models), so greedy text is printable ASCII. Speed depends on shapes and types, not values, so a `small`
// model is comparable with a real one of the same shape.
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "gguf/gguf_writer.h"
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch_info.h"
#include "rewind/tools.h"
#include "tensor/dtype.h"

namespace rwd {
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
};

// small shapes follow ../shared/research/peer-speed.md where it lists one, so figures are comparable.
constexpr ArchRecipe kRecipes[] = {
    {"llama", {128, 2, 4, 2, 32, 384, 512, false}, {768, 12, 12, 4, 64, 2048, 16384, false}, false, false},
    {"qwen3", {128, 2, 4, 2, 32, 384, 512, false}, {768, 2, 8, 4, 64, 1536, 16384, false}, true, false},
    {"gemma3", {128, 6, 2, 1, 64, 384, 512, true}, {640, 6, 4, 1, 256, 2048, 16384, true}, true, true},
};

// splitmix64: small, fast and the same on every platform, so a seed names one model everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  float normal() {
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }

 private:
  uint64_t state_;
};

// GPT-2's byte → printable code point map, so byte tokens are stored as their usual strings ("Ġ" = space).
std::string byte_token_text(int byte) {
  uint32_t code_point = static_cast<uint32_t>(byte);
  const bool printable = (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae);
  if (!printable) {
    int n = 0;
    for (int b = 0; b < byte; ++b) {
      const bool p = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
      if (!p) ++n;
    }
    code_point = 256 + static_cast<uint32_t>(n);
  }
  std::string text;
  if (code_point < 0x80) {
    text += static_cast<char>(code_point);
  } else {
    text += static_cast<char>(0xc0 | (code_point >> 6));
    text += static_cast<char>(0x80 | (code_point & 0x3f));
  }
  return text;
}

constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void write_tokenizer(gguf::GgufWriter& writer, int64_t n_vocab) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token_text(b));
    types.push_back(1);
  }
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(special);
    types.push_back(3);
  }
  while (static_cast<int64_t>(tokens.size()) < n_vocab) {
    tokens.push_back(fmt::format("<|filler_{}|>", tokens.size()));
    types.push_back(3);
  }
  writer.set_string(gguf::kTokenizerModel, "gpt2");
  writer.set_string(gguf::kTokenizerPre, "qwen2");
  writer.set_string_array(gguf::kTokenizerTokens, tokens);
  writer.set_i32_array(gguf::kTokenizerTokenType, types);
  writer.set_string_array(gguf::kTokenizerMerges, {});
  writer.set_u32(gguf::kTokenizerBosTokenId, 256);
  writer.set_u32(gguf::kTokenizerEosTokenId, 258);
  writer.set_u32(gguf::kTokenizerPaddingTokenId, 256);
  writer.set_bool(gguf::kTokenizerAddBosToken, false);
  writer.set_string(gguf::kTokenizerChatTemplate, kChatMlTemplate);
}

class TensorMaker {
 public:
  TensorMaker(gguf::GgufWriter& writer, tensor::DType dtype, uint64_t seed) : writer_(writer), dtype_(dtype), rng_(seed) {}

  // Gaussian matrix [n_out, n_in] with standard deviation gain / sqrt(n_in); rows in `zero_rows` are zero.
  void matrix(const std::string& name, int64_t n_out, int64_t n_in, float gain, const std::vector<bool>* keep_row = nullptr) {
    const float scale = gain / std::sqrt(static_cast<float>(n_in));
    std::vector<float> values(static_cast<size_t>(n_out * n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      const bool keep = keep_row == nullptr || (*keep_row)[r];
      for (int64_t c = 0; c < n_in; ++c) values[r * n_in + c] = keep ? rng_.normal() * scale : 0.0f;
    }
    add(name, {n_out, n_in}, values, true);
  }
  void embedding(const std::string& name, int64_t n_vocab, int64_t n_embd, float stddev) {
    std::vector<float> values(static_cast<size_t>(n_vocab * n_embd));
    for (float& v : values) v = rng_.normal() * stddev;
    add(name, {n_vocab, n_embd}, values, true);
  }
  // Norm weights near one, with a little spread so a wrong norm is visible in the output.
  void norm(const std::string& name, int64_t n) { uniform(name, {n}, 0.95f, 1.05f); }
  // f32 values uniform in [lo, hi), never quantized (biases, decay constants, conv taps).
  void uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = lo + static_cast<float>(rng_.uniform()) * (hi - lo);
    add(name, std::move(shape), values, false);
  }
  float draw_uniform(float lo, float hi) { return lo + static_cast<float>(rng_.uniform()) * (hi - lo); }
  void values(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
    add(name, std::move(shape), data, false);
  }

 private:
  void add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values, bool quantize) {
    tensor::DType dtype = quantize ? dtype_ : tensor::DType::f32;
    const int64_t n_in = shape.back();
    // Like llama.cpp's quantizer, fall back to q8_0 for rows that are not a whole number of blocks.
    if (n_in % tensor::dtype_traits(dtype).block_size != 0) dtype = tensor::DType::q8_0;
    if (n_in % tensor::dtype_traits(dtype).block_size != 0) dtype = tensor::DType::f32;
    const auto& traits = tensor::dtype_traits(dtype);
    const int64_t n_rows = static_cast<int64_t>(values.size()) / n_in;
    std::vector<uint8_t> data(tensor::row_bytes(dtype, n_in) * static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      traits.from_float(values.data() + r * n_in, data.data() + r * tensor::row_bytes(dtype, n_in), n_in);
    }
    writer_.add_tensor(name, dtype, shape, std::move(data));
  }

  gguf::GgufWriter& writer_;
  tensor::DType dtype_;
  Rng rng_;
};

Result<tensor::DType> parse_dtype(const std::string& name) {
  static const std::map<std::string, tensor::DType> kTypes = {
      {"f32", tensor::DType::f32},   {"f16", tensor::DType::f16},   {"bf16", tensor::DType::bf16},
      {"q8_0", tensor::DType::q8_0}, {"q4_0", tensor::DType::q4_0}, {"q4_1", tensor::DType::q4_1},
      {"q5_0", tensor::DType::q5_0}, {"q5_1", tensor::DType::q5_1}, {"q4_k", tensor::DType::q4_k},
      {"q5_k", tensor::DType::q5_k}, {"q6_k", tensor::DType::q6_k}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) {
    return Status::errorf("dtype '{}' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k",
                          name);
  }
  return it->second;
}


struct HybridShape {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_vocab;
  int64_t ssm_n_head_k, ssm_n_head_v, ssm_head_dim, ssm_d_conv, n_nextn;
};

// qwen35 tiny is the shape of the shared golden model; small follows ../shared/research/peer-speed.md.
constexpr HybridShape kQwen35Tiny = {128, 4, 4, 2, 64, 16, 384, 512, 2, 4, 32, 4, 1};
constexpr HybridShape kQwen35Small = {768, 12, 8, 2, 128, 64, 2048, 16384, 4, 8, 128, 4, 1};
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

void write_gated_delta_layer(TensorMaker& maker, const HybridShape& s, int il) {
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
  maker.matrix(name(gguf::TensorKind::ssm_beta), s.ssm_n_head_v, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::ssm_alpha), s.ssm_n_head_v, s.n_embd, 1.0f);
  maker.norm(name(gguf::TensorKind::ssm_norm), s.ssm_head_dim);
  maker.matrix(name(gguf::TensorKind::ssm_out), s.n_embd, v_width, 1.0f);
}

void write_ffn(TensorMaker& maker, const HybridShape& s, int il) {
  auto name = [il](gguf::TensorKind kind) { return gguf::tensor_name(kind, il); };
  maker.matrix(name(gguf::TensorKind::ffn_gate), s.n_ff, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::ffn_up), s.n_ff, s.n_embd, 1.0f);
  maker.matrix(name(gguf::TensorKind::ffn_down), s.n_embd, s.n_ff, 1.0f);
}

void write_qwen35(gguf::GgufWriter& writer, TensorMaker& maker, const HybridShape& s) {
  const std::string arch = "qwen35";
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
  // M-RoPE sections in rotary pairs (text, height, width, extra), as the converter writes them.
  const int32_t pairs = static_cast<int32_t>(s.n_rot / 2);
  const int32_t third = (pairs + 2) / 3;
  writer.set_i32_array(key(gguf::ArchKey::rope_dimension_sections), {third, third, pairs - 2 * third, 0});
  writer.set_u32(key(gguf::ArchKey::ssm_conv_kernel), static_cast<uint32_t>(s.ssm_d_conv));
  writer.set_u32(key(gguf::ArchKey::ssm_state_size), static_cast<uint32_t>(s.ssm_head_dim));
  writer.set_u32(key(gguf::ArchKey::ssm_group_count), static_cast<uint32_t>(s.ssm_n_head_k));
  writer.set_u32(key(gguf::ArchKey::ssm_time_step_rank), static_cast<uint32_t>(s.ssm_n_head_v));
  writer.set_u32(key(gguf::ArchKey::ssm_inner_size), static_cast<uint32_t>(s.ssm_n_head_v * s.ssm_head_dim));
  writer.set_u32(key(gguf::ArchKey::full_attention_interval), kFullAttentionInterval);
  writer.set_u32(key(gguf::ArchKey::nextn_predict_layers), static_cast<uint32_t>(s.n_nextn));
  write_tokenizer(writer, s.n_vocab);

  maker.embedding(gguf::tensor_name(gguf::TensorKind::token_embd), s.n_vocab, s.n_embd, 1.0f);
  for (int il = 0; il < s.n_layer + s.n_nextn; ++il) {
    const bool nextn = il >= s.n_layer;
    maker.norm(gguf::tensor_name(gguf::TensorKind::attn_norm, il), s.n_embd);
    maker.norm(gguf::tensor_name(gguf::TensorKind::attn_post_norm, il), s.n_embd);
    if (nextn || (il + 1) % kFullAttentionInterval == 0) {
      write_attention_layer(maker, s, il);
    } else {
      write_gated_delta_layer(maker, s, il);
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
  std::vector<bool> printable(static_cast<size_t>(s.n_vocab), false);
  for (int b = 0x20; b <= 0x7e; ++b) printable[b] = true;
  maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
}

}  // namespace

std::vector<std::string> synthetic_arch_names() {
  std::vector<std::string> names;
  for (const ArchRecipe& recipe : kRecipes) names.push_back(recipe.arch);
  names.push_back("qwen35");
  return names;
}

Status make_synthetic_model(const SyntheticModelOptions& options) {
  if (options.preset != "tiny" && options.preset != "small") {
    return Status::errorf("mkmodel: preset '{}' is not 'tiny' or 'small'", options.preset);
  }
  if (options.arch == "qwen35") {
    REWIND_ASSIGN_OR_RETURN(tensor::DType dtype, parse_dtype(options.dtype));
    gguf::GgufWriter writer;
    writer.set_string(gguf::kGeneralArchitecture, options.arch);
    writer.set_string(gguf::kGeneralName, fmt::format("{}-{}-{}", options.arch, options.preset, options.dtype));
    writer.set_string("general.description", "random-weight test model made by rewind mkmodel (not trained)");
    TensorMaker maker(writer, dtype, options.seed);
    write_qwen35(writer, maker, options.preset == "tiny" ? kQwen35Tiny : kQwen35Small);
    return writer.write(options.output_path);
  }
  const ArchRecipe* recipe = nullptr;
  for (const ArchRecipe& candidate : kRecipes) {
    if (options.arch == candidate.arch) recipe = &candidate;
  }
  if (recipe == nullptr) {
    return Status::errorf("mkmodel: architecture '{}' has no generator (available: {})", options.arch,
                          fmt::join(synthetic_arch_names(), ", "));
  }
  REWIND_ASSIGN_OR_RETURN(tensor::DType dtype, parse_dtype(options.dtype));
  const DenseShape& s = options.preset == "tiny" ? recipe->tiny : recipe->small;
  const std::string arch = recipe->arch;

  gguf::GgufWriter writer;
  writer.set_string(gguf::kGeneralArchitecture, arch);
  writer.set_string(gguf::kGeneralName, fmt::format("{}-{}-{}", arch, options.preset, options.dtype));
  writer.set_string("general.description", "random-weight test model made by rewind mkmodel (not trained)");
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

  TensorMaker maker(writer, dtype, options.seed);
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
    if (recipe->qk_norm) {
      maker.norm(name(gguf::TensorKind::attn_q_norm), s.head_dim);
      maker.norm(name(gguf::TensorKind::attn_k_norm), s.head_dim);
    }
    if (recipe->post_norms) {
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
    std::vector<bool> printable(static_cast<size_t>(s.n_vocab), false);
    for (int b = 0x20; b <= 0x7e; ++b) printable[b] = true;
    maker.matrix(gguf::tensor_name(gguf::TensorKind::output), s.n_vocab, s.n_embd, 2.0f, &printable);
  }
  return writer.write(options.output_path);
}

}  // namespace rwd
