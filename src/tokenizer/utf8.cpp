// UTF-8 validation and encoding, written to the Unicode standard's table of well-formed byte sequences
// (Table 3-7), so that surrogates and overlong forms count as invalid.
#include "tokenizer/utf8.h"

#include "base/check.h"

namespace rwd::tokenizer {
namespace {

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// The allowed range of the second byte for a given lead byte (Table 3-7); later bytes are plain 80..BF.
struct LeadInfo {
  size_t length;
  uint8_t second_min;
  uint8_t second_max;
};

LeadInfo lead_info(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

size_t utf8_valid_length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const auto lead = static_cast<uint8_t>(text[pos]);
  const LeadInfo info = lead_info(lead);
  if (info.length <= 1) return info.length;
  if (pos + info.length > text.size()) return 0;
  const auto second = static_cast<uint8_t>(text[pos + 1]);
  if (second < info.second_min || second > info.second_max) return 0;
  for (size_t i = 2; i < info.length; ++i) {
    if (!is_continuation(static_cast<uint8_t>(text[pos + i]))) return 0;
  }
  return info.length;
}

size_t utf8_incomplete_tail(std::string_view text) {
  // A lead byte of a sequence needing n bytes may be followed by at most n-2 more bytes and still be
  // incomplete; look back at most 3 bytes for it.
  const size_t n_look = text.size() < 3 ? text.size() : 3;
  for (size_t back = 1; back <= n_look; ++back) {
    const size_t pos = text.size() - back;
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (is_continuation(byte)) continue;
    const LeadInfo info = lead_info(byte);
    if (info.length <= 1 || back >= info.length) return 0;
    if (back >= 2) {
      const auto second = static_cast<uint8_t>(text[pos + 1]);
      if (second < info.second_min || second > info.second_max) return 0;
    }
    return back;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t code_point) {
  REWIND_CHECK(code_point <= 0x10FFFF && (code_point < 0xD800 || code_point > 0xDFFF),
               "code point U+{:X} cannot be encoded", code_point);
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

uint32_t decode_utf8(std::string_view text, size_t pos, size_t length) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i])); };
  switch (length) {
    case 1: return byte(0);
    case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    case 4: return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    default: REWIND_CHECK(false, "decode_utf8 called with length {}", length);
  }
  return 0;
}

}  // namespace rwd::tokenizer
