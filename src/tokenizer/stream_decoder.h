// StreamDecoder: turns generated ids into text chunks one token at a time, holding back the bytes of a UTF-8
// character that a later token will complete, so every chunk it returns ends on a character boundary.
// Invalid bytes are passed through, never held. It keeps a pointer to the Tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace rwd::tokenizer {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}

  // The text that is complete after `id` (possibly empty). An id out of range adds nothing.
  std::string push(int32_t id);
  // Everything still held back (an unfinished character at the end of generation), and a reset.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace rwd::tokenizer
