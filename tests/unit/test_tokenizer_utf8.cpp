// links: rewind_tokenizer
// UTF-8 validation against the set of all encodings of all scalar values (enumerated with a reference encoder
// written here), the incomplete-tail rule, the GPT-2 byte alphabet, and StreamDecoder on real vocabs: every
// chunk is whole UTF-8 and the chunks add up to decode().
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <unordered_set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/byte_encoding.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace rwd::tokenizer {
namespace {

// Reference encoder from the bit layout in RFC 3629, section 3.
std::string reference_encode(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 + cp / 64);
    out += static_cast<char>(0x80 + cp % 64);
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 + cp / 4096);
    out += static_cast<char>(0x80 + cp / 64 % 64);
    out += static_cast<char>(0x80 + cp % 64);
  } else {
    out += static_cast<char>(0xF0 + cp / 262144);
    out += static_cast<char>(0x80 + cp / 4096 % 64);
    out += static_cast<char>(0x80 + cp / 64 % 64);
    out += static_cast<char>(0x80 + cp % 64);
  }
  return out;
}

bool is_scalar(uint32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

TEST(Utf8, EveryScalarValueIsValidAndDecodes) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (!is_scalar(cp)) continue;
    const std::string bytes = reference_encode(cp);
    ASSERT_EQ(utf8_valid_length(bytes, 0), bytes.size()) << "U+" << std::hex << cp;
    ASSERT_EQ(decode_utf8(bytes, 0, bytes.size()), cp);
    std::string encoded;
    append_utf8(encoded, cp);
    ASSERT_EQ(encoded, bytes);
    std::string prefixed = "x";
    for (size_t n = 1; n < bytes.size(); ++n) {  // every proper prefix is held back, whole
      prefixed.push_back(bytes[n - 1]);
      ASSERT_EQ(utf8_incomplete_tail(prefixed), n) << "U+" << std::hex << cp;
    }
    prefixed.push_back(bytes.back());
    ASSERT_EQ(utf8_incomplete_tail(prefixed), 0u);
  }
}

TEST(Utf8, ExactlyTheEncodingsAreValid) {
  std::unordered_set<std::string> valid;
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (is_scalar(cp)) valid.insert(reference_encode(cp));
  }
  // All 1-, 2- and 3-byte strings: valid as a whole exactly when they are some code point's encoding.
  std::string bytes(3, '\0');
  for (int a = 0; a < 256; ++a) {
    bytes.resize(1);
    bytes[0] = static_cast<char>(a);
    ASSERT_EQ(utf8_valid_length(bytes, 0) == 1, valid.count(bytes) == 1) << a;
    for (int b = 0; b < 256; ++b) {
      bytes.resize(2);
      bytes[1] = static_cast<char>(b);
      if (a >= 0xC0) {
        ASSERT_EQ(utf8_valid_length(bytes, 0) == 2, valid.count(bytes) == 1) << a << " " << b;
      }
      if (a < 0xE0 || a > 0xEF) continue;
      for (int c = 0; c < 256; ++c) {
        bytes.resize(3);
        bytes[2] = static_cast<char>(c);
        ASSERT_EQ(utf8_valid_length(bytes, 0) == 3, valid.count(bytes) == 1) << a << " " << b << " " << c;
      }
    }
  }
  // Beyond U+10FFFF, surrogates, overlongs and stray bytes are invalid and never held back.
  for (const std::string bad : {"\xF4\x90\x80\x80", "\xED\xA0\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xF0\x80\x80\xAF",
                                "\xF8\x88\x80\x80\x80", "\x80", "\xFF"}) {
    EXPECT_EQ(utf8_valid_length(bad, 0), 0u);
  }
  for (const std::string bad : {"\xFF", "\x80", "\xC0", "\xE0\x80", "\xED\xA0", "\xF4\x90", "\xF5", "a\xBF"}) {
    EXPECT_EQ(utf8_incomplete_tail(bad), 0u);
  }
}

TEST(ByteAlphabet, IsABijectionOntoPrintableCharacters) {
  std::set<uint32_t> seen;
  for (int byte = 0; byte < 256; ++byte) {
    const uint32_t cp = byte_to_code_point(static_cast<uint8_t>(byte));
    EXPECT_TRUE(seen.insert(cp).second);
    EXPECT_EQ(code_point_to_byte(cp), byte);
    EXPECT_TRUE(cp > 0x20 && cp != 0x7F && !(cp >= 0x80 && cp <= 0xA0) && cp != 0xAD && cp < 0x144) << cp;
  }
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_to_code_point('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(code_point_to_byte(0x144), -1);
  EXPECT_EQ(code_point_to_byte(0x20), -1);

  std::mt19937 rng(17);
  for (int trial = 0; trial < 100; ++trial) {
    std::string raw(rng() % 30, '\0');
    for (char& c : raw) c = static_cast<char>(rng() % 256);
    std::string encoded;
    append_byte_encoded(encoded, raw);
    EXPECT_EQ(byte_decode(encoded), raw);
  }
}

Tokenizer load_tokenizer(const std::string& relative_path) {
  auto file = gguf::GgufFile::open(std::string(REWIND_TEST_DATA) + "/" + relative_path);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  auto tokenizer = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tokenizer.is_ok()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

bool whole_utf8(const std::string& text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = utf8_valid_length(text, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

void check_stream(const Tokenizer& tokenizer, const std::string& text, bool expect_held_back) {
  auto ids = tokenizer.encode(text, false, true);
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  StreamDecoder stream(tokenizer);
  std::string streamed;
  bool held_back = false;
  for (int32_t id : *ids) {
    const std::string chunk = stream.push(id);
    if (chunk.empty() && !tokenizer.token_to_piece(id).empty()) held_back = true;
    EXPECT_TRUE(whole_utf8(chunk)) << "chunk for id " << id;
    streamed += chunk;
  }
  streamed += stream.flush();
  EXPECT_EQ(streamed, *tokenizer.decode(*ids));
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(held_back, expect_held_back);
}

TEST(StreamDecoder, ChunksAreWholeCharactersOnBothVocabKinds) {
  const Tokenizer smollm2 = load_tokenizer("vocab/smollm2-vocab.gguf");
  const Tokenizer gemma3 = load_tokenizer("vocab/gemma3-vocab.gguf");
  // SmolLM2 spells these emoji and CJK characters with byte-level pieces that split characters; Gemma 3
  // falls back to <0xXX> tokens for the rare ones.
  check_stream(smollm2, "Emoji: 😀😂🤖 and 你好，世界 ok", true);
  check_stream(gemma3, "Flags: 🇫🇷 and \xF0\x9F\xAB\xA8 shaking face", true);
  check_stream(smollm2, "plain ascii", false);
}

TEST(StreamDecoder, InvalidBytesPassAndFlushReleasesTheRest) {
  const Tokenizer gemma3 = load_tokenizer("vocab/gemma3-vocab.gguf");
  const int32_t byte_ff = gemma3.find_token("<0xFF>");
  const int32_t byte_f0 = gemma3.find_token("<0xF0>");
  const int32_t byte_9f = gemma3.find_token("<0x9F>");
  ASSERT_GE(byte_ff, 0);
  StreamDecoder stream(gemma3);
  EXPECT_EQ(stream.push(byte_ff), "\xFF");
  EXPECT_EQ(stream.push(byte_f0), "");
  EXPECT_EQ(stream.push(byte_9f), "");
  EXPECT_EQ(stream.push(-7), "");  // out of range: nothing
  EXPECT_EQ(stream.flush(), "\xF0\x9F");
  EXPECT_EQ(stream.flush(), "");
  // A byte that cannot continue the held sequence releases it at once.
  EXPECT_EQ(stream.push(byte_f0), "");
  EXPECT_EQ(stream.push(gemma3.find_token("a")), "\xF0" "a");
}

}  // namespace
}  // namespace rwd::tokenizer
