// load_vocab: the tokenizer.* keys of a GGUF file into a VocabData, with every count and id checked.
#include "tokenizer/vocab_data.h"

#include "gguf/gguf_file.h"
#include "gguf/keys.h"

namespace rwd::tokenizer {
namespace {

Result<std::optional<bool>> optional_bool(const gguf::GgufFile& file, std::string_view key) {
  if (!file.has(key)) return std::optional<bool>();
  REWIND_ASSIGN_OR_RETURN(bool value, file.get_bool(key));
  return std::optional<bool>(value);
}

Status read_token_id(const gguf::GgufFile& file, std::string_view key, size_t n_tokens, int32_t& id) {
  if (!file.has(key)) return Status::ok();
  REWIND_ASSIGN_OR_RETURN(uint32_t value, file.get_u32(key));
  if (value >= n_tokens) {
    return Status::errorf("{}: key '{}' is {}, but the vocab has {} tokens", file.path(), key, value, n_tokens);
  }
  id = static_cast<int32_t>(value);
  return Status::ok();
}

// Scores are float32 in files from llama.cpp's converter; a few older writers stored int32.
Result<std::vector<float>> read_scores(const gguf::GgufFile& file, size_t n_tokens) {
  const gguf::Value* value = file.find(gguf::kTokenizerScores);
  if (value == nullptr) return std::vector<float>();
  std::vector<float> scores;
  if (value->type == gguf::ValueType::array && value->element_type != gguf::ValueType::float32 &&
      value->element_type != gguf::ValueType::float64) {
    REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> integers, file.get_i64_array(gguf::kTokenizerScores));
    scores.assign(integers.begin(), integers.end());
  } else {
    REWIND_ASSIGN_OR_RETURN(scores, file.get_f32_array(gguf::kTokenizerScores));
  }
  if (scores.size() < n_tokens) {
    return Status::errorf("{}: key '{}' has {} entries, expected {} (one per token)", file.path(),
                          gguf::kTokenizerScores, scores.size(), n_tokens);
  }
  scores.resize(n_tokens);
  return scores;
}

Result<std::vector<TokenType>> read_token_types(const gguf::GgufFile& file, size_t n_tokens) {
  if (!file.has(gguf::kTokenizerTokenType)) return std::vector<TokenType>();
  REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> raw, file.get_i64_array(gguf::kTokenizerTokenType));
  if (raw.size() < n_tokens) {
    return Status::errorf("{}: key '{}' has {} entries, expected {} (one per token)", file.path(),
                          gguf::kTokenizerTokenType, raw.size(), n_tokens);
  }
  std::vector<TokenType> types(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) {
    // Values the format does not define are read as undefined, as llama.cpp does.
    types[i] = raw[i] >= 0 && raw[i] <= 6 ? static_cast<TokenType>(raw[i]) : TokenType::undefined;
  }
  return types;
}

Result<std::vector<std::string>> read_merges(const gguf::GgufFile& file) {
  const gguf::Value* value = file.find(gguf::kTokenizerMerges);
  // An empty array may carry any element type (writers cannot infer one from no elements).
  if (value == nullptr || (value->type == gguf::ValueType::array && value->count == 0)) {
    return std::vector<std::string>();
  }
  return file.get_string_array(gguf::kTokenizerMerges);
}

}  // namespace

Result<VocabData> load_vocab(const gguf::GgufFile& file) {
  VocabData vocab;
  REWIND_ASSIGN_OR_RETURN(vocab.model, file.get_string(gguf::kTokenizerModel));
  REWIND_ASSIGN_OR_RETURN(vocab.pre, file.get_string_or(gguf::kTokenizerPre, ""));
  REWIND_ASSIGN_OR_RETURN(vocab.tokens, file.get_string_array(gguf::kTokenizerTokens));
  if (vocab.tokens.empty()) {
    return Status::errorf("{}: key '{}' is empty, expected at least one token", file.path(),
                          gguf::kTokenizerTokens);
  }
  const size_t n_tokens = vocab.tokens.size();
  REWIND_ASSIGN_OR_RETURN(vocab.scores, read_scores(file, n_tokens));
  REWIND_ASSIGN_OR_RETURN(vocab.token_types, read_token_types(file, n_tokens));
  REWIND_ASSIGN_OR_RETURN(vocab.merges, read_merges(file));

  REWIND_RETURN_IF_ERROR(read_token_id(file, gguf::kTokenizerBosTokenId, n_tokens, vocab.bos_id));
  REWIND_RETURN_IF_ERROR(read_token_id(file, gguf::kTokenizerEosTokenId, n_tokens, vocab.eos_id));
  REWIND_RETURN_IF_ERROR(read_token_id(file, gguf::kTokenizerEotTokenId, n_tokens, vocab.eot_id));
  REWIND_RETURN_IF_ERROR(read_token_id(file, gguf::kTokenizerEomTokenId, n_tokens, vocab.eom_id));
  REWIND_RETURN_IF_ERROR(read_token_id(file, gguf::kTokenizerUnknownTokenId, n_tokens, vocab.unknown_id));
  // Some converters write a padding id one past the vocab; padding is never used here, so such a value is
  // dropped instead of refusing the file.
  if (!read_token_id(file, gguf::kTokenizerPaddingTokenId, n_tokens, vocab.padding_id).is_ok()) {
    vocab.padding_id = kNoToken;
  }

  REWIND_ASSIGN_OR_RETURN(vocab.add_bos, optional_bool(file, gguf::kTokenizerAddBosToken));
  REWIND_ASSIGN_OR_RETURN(vocab.add_eos, optional_bool(file, gguf::kTokenizerAddEosToken));
  REWIND_ASSIGN_OR_RETURN(vocab.add_space_prefix, optional_bool(file, gguf::kTokenizerAddSpacePrefix));
  REWIND_ASSIGN_OR_RETURN(vocab.chat_template, file.get_string_or(gguf::kTokenizerChatTemplate, ""));
  return vocab;
}

}  // namespace rwd::tokenizer
