// The GPT-2 byte-level alphabet: each of the 256 byte values is shown as one printable Unicode character
// (printable Latin-1 bytes as themselves, the other 68 as U+0100..U+0143 in byte order), so that BPE vocab
// strings are valid UTF-8 for any byte sequence. Only the mapping lives here, not BPE itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rwd::tokenizer {

// The code point that stands for `byte`.
uint32_t byte_to_code_point(uint8_t byte);

// The byte that `code_point` stands for, or -1 when it is not part of the alphabet.
int code_point_to_byte(uint32_t code_point);

// Appends the alphabet's UTF-8 spelling of every byte of `raw`.
void append_byte_encoded(std::string& out, std::string_view raw);

// Turns a vocab string back into raw bytes. A character outside the alphabet (possible only in hand-made
// vocabs) is kept as its own UTF-8 bytes rather than dropped.
std::string byte_decode(std::string_view encoded);

}  // namespace rwd::tokenizer
