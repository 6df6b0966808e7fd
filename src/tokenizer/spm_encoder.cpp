// SentencePiece merging over byte offsets into the text: a symbol is a [offset, offset + length) slice, so a
// pair's spelling is a contiguous view and needs no copy to look up.
#include "tokenizer/spm_encoder.h"

#include <fmt/format.h>

#include <queue>

#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

struct Symbol {
  size_t offset;
  size_t length;  // 0 once merged into the left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  size_t length;  // of the merged spelling; a mismatch later means one side has changed
  // Highest score first, then leftmost, as in llama.cpp.
  bool operator<(const Candidate& other) const {
    return score != other.score ? score < other.score : left > other.left;
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const VocabData& vocab, const VocabIndex& index)
    : scores_(vocab.scores), unknown_id_(vocab.unknown_id) {
  for (int byte = 0; byte < 256; ++byte) {
    int32_t id = index.find(fmt::format("<0x{:02X}>", byte));
    const char raw = static_cast<char>(byte);
    if (id < 0) id = index.find(std::string_view(&raw, 1));
    byte_tokens_[byte] = id;
  }
}

void SpmEncoder::encode(std::string_view text, const VocabIndex& index, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = utf8_valid_length(text, pos);
    const size_t step = length == 0 ? 1 : length;
    const auto index_now = static_cast<int32_t>(symbols.size());
    symbols.push_back({pos, step, index_now - 1, pos + step < text.size() ? index_now + 1 : -1});
    pos += step;
  }
  if (symbols.empty()) return;

  std::priority_queue<Candidate> queue;
  const auto try_push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = index.find(text.substr(symbols[left].offset, length));
    if (id < 0) return;
    queue.push({score(id), left, right, length});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) try_push(i, i + 1);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_push(left.prev, top.left);
    try_push(top.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view spelled = text.substr(symbols[i].offset, symbols[i].length);
    const int32_t id = index.find(spelled);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : spelled) {
      const int32_t byte_id = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) {
        out.push_back(byte_id);
      } else if (unknown_id_ >= 0) {
        out.push_back(unknown_id_);
      }
    }
  }
}

}  // namespace rwd::tokenizer
