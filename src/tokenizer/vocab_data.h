// VocabData: the tokenizer's inputs exactly as a GGUF stores them (tokenizer.* keys), and load_vocab, which
// reads them from a GgufFile. Interpreting them (defaults, special tokens, end-of-generation set) is the
// Tokenizer's job, so tests can build a VocabData by hand without a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace rwd::gguf {
class GgufFile;
}

namespace rwd::tokenizer {

// tokenizer.ggml.token_type values, numbered as in the format.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

inline constexpr int32_t kNoToken = -1;

struct VocabData {
  std::string model;                  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;                    // tokenizer.ggml.pre: BPE pre-tokenizer name; empty when absent
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens, indexed by id
  std::vector<float> scores;          // tokenizer.ggml.scores: empty, or one per token (SPM merge priority)
  std::vector<TokenType> token_types; // tokenizer.ggml.token_type: empty (all normal), or one per token
  std::vector<std::string> merges;    // tokenizer.ggml.merges: "left right", highest priority first

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t eot_id = kNoToken;
  int32_t eom_id = kNoToken;
  int32_t unknown_id = kNoToken;
  int32_t padding_id = kNoToken;

  // Absent keys stay empty; the Tokenizer then applies the defaults of the model and pre-tokenizer.
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  std::optional<bool> add_space_prefix;

  std::string chat_template;  // tokenizer.chat_template; empty when absent
};

// Reads every tokenizer.* key above from `file`. Errors name the file and key with the expected and found
// type or count; an id key outside [0, n_tokens) is an error too.
Result<VocabData> load_vocab(const gguf::GgufFile& file);

}  // namespace rwd::tokenizer
