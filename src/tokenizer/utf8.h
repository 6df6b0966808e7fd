// UTF-8 helpers for the tokenizer: strict sequence validation (no overlongs, no surrogates, nothing above
// U+10FFFF) and the length of an incomplete trailing sequence, which the streaming decoder holds back.
// It does not normalise text or know Unicode categories; PCRE2 owns those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rwd::tokenizer {

// Length (1-4) of the valid UTF-8 sequence that starts at text[pos], or 0 when the bytes there are not one.
size_t utf8_valid_length(std::string_view text, size_t pos);

// How many bytes at the end of `text` are a proper prefix of a valid multi-byte sequence (0-3): bytes that a
// later chunk may complete. Invalid bytes are never held back.
size_t utf8_incomplete_tail(std::string_view text);

// Appends the UTF-8 encoding of `code_point` (which must be <= U+10FFFF and not a surrogate).
void append_utf8(std::string& out, uint32_t code_point);

// Decodes the valid sequence of `length` bytes at text[pos] (as returned by utf8_valid_length).
uint32_t decode_utf8(std::string_view text, size_t pos, size_t length);

}  // namespace rwd::tokenizer
