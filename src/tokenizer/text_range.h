// TextRange: a byte range of some text, shared by the pre-tokenizer's pieces, the special-token matcher's
// literal ranges and the chat prompt's marks of caller text.
#pragma once

#include <cstddef>

namespace rwd::tokenizer {

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;

  bool operator==(const TextRange&) const = default;
};

}  // namespace rwd::tokenizer
