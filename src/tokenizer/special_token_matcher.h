// SpecialTokenMatcher: finds the spellings of special tokens (control, unknown and user-defined types) in
// input text and cuts the text into raw fragments and whole special tokens, before any BPE/SPM work.
// Semantics follow llama.cpp's tokenizer_st_partition: longer spellings are cut out first, anywhere in the
// text, each length's occurrences left to right without overlap. (llama.cpp leaves the order of different
// spellings of equal length unspecified; here the leftmost wins.) Control and unknown tokens are matched only
// when parse_special is on, and never where they overlap a literal range; user-defined ones always.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/text_range.h"

namespace rwd::tokenizer {

// One piece of partitioned text: a special token, or a raw byte range still to be tokenized.
struct Fragment {
  int32_t token = -1;  // >= 0: this fragment is that special token; -1: raw text [begin, end)
  size_t begin = 0;
  size_t end = 0;
};

enum class SpecialKind : uint8_t {
  none,          // an ordinary token: never matched here
  parse_special, // control/unknown: matched only when parse_special is on
  always,        // user-defined: matched always
};

// Which spellings partition() cuts out of a text.
struct PartitionRules {
  bool parse_special = false;  // control and unknown spellings (Tokenizer::encode's parse_special)
  bool user_defined = true;    // user-defined spellings; encoding always matches them
  // Sorted, disjoint byte ranges of literal text: a control or unknown spelling that overlaps one is not matched,
  // whatever parse_special says. Chat prompts mark the caller's text so (spelling_sentinels.h).
  std::span<const TextRange> literal;
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  // `kinds[id]` says how token `id` (spelled `tokens[id]`) is matched; empty spellings are skipped.
  SpecialTokenMatcher(const std::vector<std::string>& tokens, const std::vector<SpecialKind>& kinds);

  // Appends the fragments of `text` in order; raw fragments are never empty.
  void partition(std::string_view text, const PartitionRules& rules, std::vector<Fragment>& out) const;

 private:
  struct Node {
    int32_t token = -1;
    SpecialKind kind = SpecialKind::none;
  };
  // The spelling lengths that match at one position: bit L-1 of `short_lengths` for L <= 64, longer ones
  // listed separately (rare: special spellings are short).
  struct Matches {
    size_t pos;
    uint64_t short_lengths;
  };
  struct LongMatch {
    size_t pos;
    size_t length;
  };

  int32_t child(int32_t node, uint8_t byte) const;
  // The token spelled by text[pos, pos + length), known to be a special spelling.
  int32_t token_at(std::string_view text, size_t pos, size_t length) const;
  void find_matches(std::string_view text, const PartitionRules& rules, std::vector<Matches>& matches,
                    std::vector<LongMatch>& long_matches) const;

  std::vector<Node> nodes_;                       // a byte trie over the special spellings; node 0 is the root
  std::unordered_map<uint64_t, int32_t> edges_;   // (parent << 8 | byte) -> child
  std::vector<bool> starts_;                      // [256]: some spelling begins with this byte
};

}  // namespace rwd::tokenizer
