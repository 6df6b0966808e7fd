// GgufFile: a validated, memory-mapped GGUF file (versions 2 and 3): header, typed metadata and the tensor
// directory. Every offset, count, type, alignment and string length is checked when the file is opened, so
// later accessors never read outside the mapping. It does not know what any key or tensor means.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace rwd::gguf {

// GGUF metadata value types, numbered as in the format.
enum class ValueType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

std::string_view value_type_name(ValueType type);
// Bytes of one value of a fixed-size type; 0 for string and array, whose size depends on their contents.
size_t value_type_size(ValueType type);

// One metadata value as it lies in the file (little-endian, possibly unaligned: read it through the getters).
// Scalars: count = 1 and `data` points at the value. A string: count is its length in bytes and `data` points
// at its first byte. Arrays: element_type and count describe the elements and `data` points at the first one
// (strings in an array are length-prefixed, one after the other). Arrays of arrays are rejected when opening.
struct Value {
  ValueType type = ValueType::uint8;
  ValueType element_type = ValueType::uint8;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
};

// tensor.data lies alignment() bytes aligned relative to the start of the file: 32 by default, but a file
// may declare as little as 1, so readers of typed data must not assume more without checking.
struct TensorInfo {
  tensor::Tensor tensor;   // name, dtype, dims (ggml order, ne[0] innermost), data pointer into the mapping
  uint64_t offset = 0;     // from the start of the data section
  size_t n_bytes = 0;
};

class GgufFile {
 public:
  // Maps and validates the file; the error names the path and what is wrong where.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Validates bytes held by the caller (they must outlive the object); `name` is used in messages.
  static Result<std::unique_ptr<GgufFile>> from_bytes(std::span<const uint8_t> bytes, std::string name);
  // The object keeps pointers into the bytes, so a temporary buffer would dangle.
  static Result<std::unique_ptr<GgufFile>> from_bytes(std::vector<uint8_t>&& bytes, std::string name) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_bytes() const { return bytes_.size(); }
  // Where the tensor data section starts: the end of the tensor infos rounded up to the alignment.
  size_t data_offset() const { return data_offset_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed access. Integers convert between widths when the value fits (a u32 key may be stored as i32 or
  // u64 by other writers); errors name the key, the expected and the found type.
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_i64_array(std::string_view key) const;
  Result<std::vector<bool>> get_bool_array(std::string_view key) const;

  // With a default when absent (a present key of the wrong type is still an error).
  Result<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Result<float> get_f32_or(std::string_view key, float fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

  // Human-readable rendering of a value (arrays abbreviated), for `rewind inspect`.
  std::string value_to_string(const Value& value, size_t max_elements = 8) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Drops a tensor's pages of a mapped file from memory (MappedFile::release) once a copy serves its reads;
  // nothing for bytes held by the caller.
  void release(const tensor::Tensor& tensor) const;
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  Status parse();

  std::unique_ptr<MappedFile> mapping_;
  std::span<const uint8_t> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace rwd::gguf
