// RawGguf: writes GGUF bytes field by field, straight from the format description, so the tests can build
// files the GgufWriter would refuse to produce (bad counts, types, offsets) and check the writer's encoding
// against an independent one. It validates nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace rwd::gguf::testing {

// GGUF value type ids, written out here instead of taken from gguf_file.h to keep the builder independent.
enum RawType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// ggml type ids used by the tests.
constexpr uint32_t kGgmlF32 = 0;
constexpr uint32_t kGgmlF16 = 1;
constexpr uint32_t kGgmlQ8_0 = 8;

class RawGguf {
 public:
  template <typename T>
  RawGguf& put(T value) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &value, sizeof(T));
    return *this;
  }
  RawGguf& str(std::string_view text) {
    put<uint64_t>(text.size());
    bytes.insert(bytes.end(), text.begin(), text.end());
    return *this;
  }
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    for (const char c : std::string_view("GGUF")) bytes.push_back(static_cast<uint8_t>(c));
    return put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  // Key and type; the caller then puts the value.
  RawGguf& key(std::string_view name, uint32_t type) { return str(name).put<uint32_t>(type); }
  RawGguf& kv_u32(std::string_view name, uint32_t value) { return key(name, kU32).put<uint32_t>(value); }
  RawGguf& kv_string(std::string_view name, std::string_view value) { return key(name, kString).str(value); }
  RawGguf& array_header(std::string_view name, uint32_t element_type, uint64_t count) {
    return key(name, kArray).put<uint32_t>(element_type).put<uint64_t>(count);
  }
  // ne in ggml order (innermost first).
  RawGguf& tensor_info(std::string_view name, std::initializer_list<uint64_t> ne, uint32_t type,
                       uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (const uint64_t n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  RawGguf& pad(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  RawGguf& fill(size_t n_bytes, uint8_t first) {
    for (size_t i = 0; i < n_bytes; ++i) bytes.push_back(static_cast<uint8_t>(first + i));
    return *this;
  }
  size_t size() const { return bytes.size(); }
  std::span<const uint8_t> span() const { return bytes; }

  std::vector<uint8_t> bytes;
};

// A small valid file: four keys and two tensors (f32 [5, 3] and q8_0 [2, 32]) whose data ends exactly at the
// end of the file, so that every truncation of it is invalid.
inline RawGguf small_model() {
  RawGguf raw;
  raw.header(2, 4);
  raw.kv_string("general.architecture", "tiny");
  raw.kv_u32("tiny.block_count", 3);
  raw.array_header("tokenizer.ggml.tokens", kString, 3).str("a").str("bc").str("");
  raw.key("tiny.rope.freq_base", kF32).put<float>(10000.0f);
  raw.tensor_info("blk.0.attn_q.weight", {3, 5}, kGgmlF32, 0);  // 60 bytes, next offset 64
  raw.tensor_info("token_embd.weight", {32, 2}, kGgmlQ8_0, 64);  // 2 blocks of 34 bytes
  raw.pad(32);
  raw.fill(60, 1).pad(32).fill(68, 100);
  return raw;
}

}  // namespace rwd::gguf::testing
