#include "synthetic/parts.h"

#include <fmt/format.h>

#include <map>

#include "gguf/keys.h"

namespace rwd::synthetic {
namespace {

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

}  // namespace

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


void write_general(gguf::GgufWriter& writer, const SyntheticModelOptions& options) {
  writer.set_string(gguf::kGeneralArchitecture, options.arch);
  writer.set_string(gguf::kGeneralName, fmt::format("{}-{}-{}", options.arch, options.preset, options.dtype));
  writer.set_string("general.description", "random-weight test model made by rewind mkmodel (not trained)");
}

std::vector<bool> printable_rows(int64_t n_vocab) {
  std::vector<bool> printable(static_cast<size_t>(n_vocab), false);
  for (int b = 0x20; b <= 0x7e; ++b) printable[b] = true;
  return printable;
}

}  // namespace rwd::synthetic
