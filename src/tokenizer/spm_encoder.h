// SpmEncoder: SentencePiece-style BPE as llama.cpp runs it for "llama" vocabs. The (already space-escaped)
// text starts as one symbol per UTF-8 character; the adjacent pair whose concatenation is a vocab token with
// the highest score (leftmost on ties) is merged until none is left. A final symbol that is not a token is
// spelled with byte tokens <0xXX> (or the unknown token when even those are missing). Invalid UTF-8 bytes are
// single-byte symbols, so they come out as byte tokens. Space escaping and special tokens are the caller's.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab_data.h"
#include "tokenizer/vocab_index.h"

namespace rwd::tokenizer {

class SpmEncoder {
 public:
  SpmEncoder() = default;
  SpmEncoder(const VocabData& vocab, const VocabIndex& index);

  void encode(std::string_view text, const VocabIndex& index, std::vector<int32_t>& out) const;

 private:
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }

  std::vector<float> scores_;
  std::array<int32_t, 256> byte_tokens_{};  // <0xXX> token per byte (or the single-byte token), else -1
  int32_t unknown_id_ = -1;
};

}  // namespace rwd::tokenizer
