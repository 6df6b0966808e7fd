// The GPT-2 byte alphabet as two constant tables built at compile time.
#include "tokenizer/byte_encoding.h"

#include <array>

#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

constexpr bool is_self_mapped(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<uint16_t, 256> make_byte_to_code_point() {
  std::array<uint16_t, 256> table{};
  int n_shifted = 0;
  for (int byte = 0; byte < 256; ++byte) {
    table[byte] = static_cast<uint16_t>(is_self_mapped(byte) ? byte : 256 + n_shifted++);
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToCodePoint = make_byte_to_code_point();
constexpr uint32_t kMaxCodePoint = 256 + 68;

constexpr std::array<int16_t, kMaxCodePoint> make_code_point_to_byte() {
  std::array<int16_t, kMaxCodePoint> table{};
  for (auto& entry : table) entry = -1;
  for (int byte = 0; byte < 256; ++byte) table[kByteToCodePoint[byte]] = static_cast<int16_t>(byte);
  return table;
}

constexpr std::array<int16_t, kMaxCodePoint> kCodePointToByte = make_code_point_to_byte();

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return kByteToCodePoint[byte]; }

int code_point_to_byte(uint32_t code_point) {
  return code_point < kMaxCodePoint ? kCodePointToByte[code_point] : -1;
}

void append_byte_encoded(std::string& out, std::string_view raw) {
  for (char c : raw) append_utf8(out, kByteToCodePoint[static_cast<uint8_t>(c)]);
}

std::string byte_decode(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  size_t pos = 0;
  while (pos < encoded.size()) {
    const size_t length = utf8_valid_length(encoded, pos);
    if (length == 0) {  // not UTF-8 at all: keep the byte
      out.push_back(encoded[pos++]);
      continue;
    }
    const int byte = code_point_to_byte(decode_utf8(encoded, pos, length));
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(encoded.substr(pos, length));
    }
    pos += length;
  }
  return out;
}

}  // namespace rwd::tokenizer
