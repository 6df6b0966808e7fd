// Byte-level BPE merging on token ids: the merge table is keyed by id pairs, so the inner loop never builds
// or hashes strings.
#include "tokenizer/bpe_encoder.h"

#include <functional>
#include <queue>
#include <string>

#include "tokenizer/byte_encoding.h"
#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

constexpr int32_t kMerged = -2;  // symbol id of a symbol absorbed into its left neighbour

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t left_id;
  int32_t right_id;
  int32_t result;
  // Lowest rank first, then leftmost, as in llama.cpp and Hugging Face tokenizers.
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

}  // namespace

struct BpeEncoder::Scratch {
  std::string encoded;
  std::vector<Symbol> symbols;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
};

BpeEncoder::BpeEncoder(const VocabData& vocab, const VocabIndex& index, bool ignore_merges)
    : ignore_merges_(ignore_merges) {
  for (int byte = 0; byte < 256; ++byte) {
    const char raw = static_cast<char>(byte);
    std::string spelled;
    append_byte_encoded(spelled, std::string_view(&raw, 1));
    byte_tokens_[byte] = index.find(spelled);
  }
  merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    // Split at the first space after the first character, as llama.cpp does, so a part may begin with one.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) continue;
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    const int32_t left_id = index.find(left);
    const int32_t right_id = index.find(right);
    const int32_t result = index.find(std::string(left) + std::string(right));
    if (left_id < 0 || right_id < 0 || result < 0) continue;
    merges_.try_emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }
}

bool BpeEncoder::replace_unspellable_invalid_bytes(std::string_view text, std::string& out) const {
  size_t pos = 0;
  size_t copied = 0;
  bool replaced = false;
  while (pos < text.size()) {
    const size_t length = utf8_valid_length(text, pos);
    if (length > 0) {
      pos += length;
      continue;
    }
    if (byte_tokens_[static_cast<uint8_t>(text[pos])] < 0) {
      if (!replaced) out.clear();
      out.append(text.substr(copied, pos - copied));
      out.append(kReplacementCharacter);
      copied = pos + 1;
      replaced = true;
    }
    ++pos;
  }
  if (replaced) out.append(text.substr(copied));
  return replaced;
}

void BpeEncoder::encode(std::string_view text, const std::vector<TextRange>& pieces, const VocabIndex& index,
                        std::vector<int32_t>& out) const {
  Scratch scratch;
  for (const TextRange& piece : pieces) {
    encode_piece(text.substr(piece.begin, piece.end - piece.begin), index, scratch, out);
  }
}

void BpeEncoder::encode_piece(std::string_view raw, const VocabIndex& index, Scratch& scratch,
                              std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  if (ignore_merges_) {
    scratch.encoded.clear();
    append_byte_encoded(scratch.encoded, raw);
    const int32_t whole = index.find(scratch.encoded);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  auto& symbols = scratch.symbols;
  auto& queue = scratch.queue;
  symbols.clear();
  for (char c : raw) {
    // A byte the vocab cannot spell is dropped, as llama.cpp does (vocabs trained on real text may lack rare
    // control characters or lead bytes such as 0xF2).
    const int32_t id = byte_tokens_[static_cast<uint8_t>(c)];
    if (id >= 0) symbols.push_back({id, 0, 0});
  }
  const auto n_symbols = static_cast<int32_t>(symbols.size());
  if (n_symbols == 0) return;
  for (int32_t i = 0; i < n_symbols; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n_symbols ? i + 1 : -1;
  }
  const auto try_push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, symbols[left].id, symbols[right].id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n_symbols; ++i) try_push(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    // Stale when either side has since merged: ids only change by merging (into a longer token).
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.result;
    right.id = kMerged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_push(left.prev);
    try_push(top.left);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace rwd::tokenizer
