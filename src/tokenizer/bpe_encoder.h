// BpeEncoder: byte-level BPE over pre-tokenized pieces. Each piece is spelled in the GPT-2 byte alphabet,
// starts as one symbol per byte, and the adjacent pair with the lowest merge rank (leftmost on ties) is merged
// until no ranked pair is left -- a heap over a linked list, O(n log n) per piece. Pre-tokenization and
// special tokens are the caller's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab_data.h"
#include "tokenizer/vocab_index.h"

namespace rwd::tokenizer {

class BpeEncoder {
 public:
  BpeEncoder() = default;
  // Merges whose parts or result are not vocab tokens cannot apply and are dropped.
  // `ignore_merges`: a piece whose whole spelling is a token becomes that token directly (llama-3 family).
  BpeEncoder(const VocabData& vocab, const VocabIndex& index, bool ignore_merges);

  // llama.cpp reads every invalid UTF-8 byte as U+FFFD; rewind keeps invalid bytes the vocab can spell (so
  // they round-trip) and writes U+FFFD only for the others. Returns false, leaving `out` untouched, when
  // `text` has no such byte; otherwise `out` is `text` with those bytes replaced.
  bool replace_unspellable_invalid_bytes(std::string_view text, std::string& out) const;

  // Appends the ids of each piece of `text`, in order.
  void encode(std::string_view text, const std::vector<TextRange>& pieces, const VocabIndex& index,
              std::vector<int32_t>& out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  struct Scratch;

  void encode_piece(std::string_view raw, const VocabIndex& index, Scratch& scratch,
                    std::vector<int32_t>& out) const;

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and merged id
  static constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

  std::array<int32_t, 256> byte_tokens_{};  // id of the token spelling each single byte, or -1
  bool ignore_merges_ = false;
};

}  // namespace rwd::tokenizer
