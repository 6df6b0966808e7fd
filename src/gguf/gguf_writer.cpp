// GgufWriter: encoding of metadata, tensor infos and aligned tensor data as GGUF v3, little-endian.
// Validation of what it is given is by REWIND_CHECK (the writer is fed by code, not by users); it does not
// know which keys or tensors a model needs.
#include "gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/check.h"

namespace rwd::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";

template <typename T>
void append(std::vector<uint8_t>& out, T value) {
  static_assert(std::endian::native == std::endian::little, "the writer stores values in host order");
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void append_string(std::vector<uint8_t>& out, std::string_view text) {
  append<uint64_t>(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

template <typename T>
std::vector<uint8_t> encode_scalar(T value) {
  std::vector<uint8_t> payload;
  append(payload, value);
  return payload;
}

template <typename T>
std::vector<uint8_t> encode_array(ValueType element_type, const std::vector<T>& values) {
  std::vector<uint8_t> payload;
  append<uint32_t>(payload, static_cast<uint32_t>(element_type));
  append<uint64_t>(payload, values.size());
  for (const T& value : values) append(payload, value);
  return payload;
}

}  // namespace

void GgufWriter::set_entry(Entry entry) {
  REWIND_CHECK(!entry.key.empty(), "GGUF keys must not be empty");
  for (Entry& existing : entries_) {
    if (existing.key == entry.key) {
      existing = std::move(entry);
      return;
    }
  }
  entries_.push_back(std::move(entry));
}

void GgufWriter::set_u32(std::string_view key, uint32_t value) {
  set_entry({std::string(key), ValueType::uint32, ValueType::uint32, encode_scalar(value)});
}

void GgufWriter::set_i32(std::string_view key, int32_t value) {
  set_entry({std::string(key), ValueType::int32, ValueType::int32, encode_scalar(value)});
}

void GgufWriter::set_u64(std::string_view key, uint64_t value) {
  set_entry({std::string(key), ValueType::uint64, ValueType::uint64, encode_scalar(value)});
}

void GgufWriter::set_f32(std::string_view key, float value) {
  set_entry({std::string(key), ValueType::float32, ValueType::float32, encode_scalar(value)});
}

void GgufWriter::set_bool(std::string_view key, bool value) {
  set_entry({std::string(key), ValueType::boolean, ValueType::boolean, encode_scalar<uint8_t>(value ? 1 : 0)});
}

void GgufWriter::set_string(std::string_view key, std::string_view value) {
  std::vector<uint8_t> payload;
  append_string(payload, value);
  set_entry({std::string(key), ValueType::string, ValueType::string, std::move(payload)});
}

void GgufWriter::set_string_array(std::string_view key, const std::vector<std::string>& values) {
  std::vector<uint8_t> payload;
  append<uint32_t>(payload, static_cast<uint32_t>(ValueType::string));
  append<uint64_t>(payload, values.size());
  for (const std::string& value : values) append_string(payload, value);
  set_entry({std::string(key), ValueType::array, ValueType::string, std::move(payload)});
}

void GgufWriter::set_f32_array(std::string_view key, const std::vector<float>& values) {
  set_entry({std::string(key), ValueType::array, ValueType::float32, encode_array(ValueType::float32, values)});
}

void GgufWriter::set_i32_array(std::string_view key, const std::vector<int32_t>& values) {
  set_entry({std::string(key), ValueType::array, ValueType::int32, encode_array(ValueType::int32, values)});
}

void GgufWriter::set_bool_array(std::string_view key, const std::vector<bool>& values) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  set_entry({std::string(key), ValueType::array, ValueType::boolean, encode_array(ValueType::boolean, bytes)});
}

void GgufWriter::set_value(std::string_view key, const Value& value) {
  std::vector<uint8_t> payload;
  if (value.type == ValueType::string) {
    append<uint64_t>(payload, value.count);
    payload.insert(payload.end(), value.data, value.data + value.count);
  } else if (value.type == ValueType::array) {
    REWIND_CHECK(value.element_type != ValueType::array, "key '{}': arrays of arrays cannot be copied", key);
    append<uint32_t>(payload, static_cast<uint32_t>(value.element_type));
    append<uint64_t>(payload, value.count);
    size_t n_bytes = 0;
    if (value.element_type == ValueType::string) {
      // A validated GgufFile guarantees these lengths lie inside its bytes.
      for (uint64_t i = 0; i < value.count; ++i) {
        uint64_t length = 0;
        std::memcpy(&length, value.data + n_bytes, sizeof(length));
        n_bytes += sizeof(length) + static_cast<size_t>(length);
      }
    } else {
      n_bytes = value_type_size(value.element_type) * static_cast<size_t>(value.count);
    }
    payload.insert(payload.end(), value.data, value.data + n_bytes);
  } else {
    payload.insert(payload.end(), value.data, value.data + value_type_size(value.type));
  }
  set_entry({std::string(key), value.type, value.element_type, std::move(payload)});
}

void GgufWriter::add_tensor(const std::string& name, tensor::DType dtype, const std::vector<int64_t>& shape,
                            std::vector<uint8_t> data) {
  REWIND_CHECK(!name.empty(), "tensor names must not be empty");
  REWIND_CHECK(shape.size() >= 1 && shape.size() <= 4, "tensor '{}': {} dims, expected 1..4", name, shape.size());
  for (const PendingTensor& existing : tensors_) {
    REWIND_CHECK(existing.name != name, "tensor '{}' added twice", name);
  }
  int64_t n_rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    REWIND_CHECK(shape[i] >= 1, "tensor '{}': dim {} is {}", name, i, shape[i]);
    n_rows *= shape[i];
  }
  const int64_t n_cols = shape.back();
  const tensor::DTypeTraits& traits = tensor::dtype_traits(dtype);
  REWIND_CHECK(n_cols >= 1 && n_cols % traits.block_size == 0,
               "tensor '{}': innermost dim {} is not a positive multiple of the {} block size {}", name, n_cols,
               traits.name, traits.block_size);
  const size_t expected = tensor::row_bytes(dtype, n_cols) * static_cast<size_t>(n_rows);
  REWIND_CHECK(data.size() == expected, "tensor '{}': {} data bytes, expected {} for {} rows of {} {} values",
               name, data.size(), expected, n_rows, n_cols, traits.name);
  tensors_.push_back({name, dtype, shape, std::move(data)});
}

std::vector<uint8_t> GgufWriter::to_bytes(uint32_t alignment) const {
  REWIND_CHECK(alignment != 0 && std::has_single_bit(alignment), "alignment {} is not a power of two", alignment);
  std::vector<Entry> entries = entries_;
  bool has_alignment_key = false;
  for (const Entry& entry : entries) {
    if (entry.key != kAlignmentKey) continue;
    uint32_t stored = 0;
    REWIND_CHECK(entry.type == ValueType::uint32, "general.alignment must be a uint32");
    std::memcpy(&stored, entry.payload.data(), sizeof(stored));
    REWIND_CHECK(stored == alignment, "general.alignment is set to {} but the file is written with alignment {}",
                 stored, alignment);
    has_alignment_key = true;
  }
  if (!has_alignment_key && alignment != kDefaultAlignment) {
    entries.push_back({std::string(kAlignmentKey), ValueType::uint32, ValueType::uint32, encode_scalar(alignment)});
  }

  std::vector<uint8_t> out;
  append<uint32_t>(out, 0x46554747);  // "GGUF"
  append<uint32_t>(out, kVersion);
  append<uint64_t>(out, tensors_.size());
  append<uint64_t>(out, entries.size());
  for (const Entry& entry : entries) {
    append_string(out, entry.key);
    append<uint32_t>(out, static_cast<uint32_t>(entry.type));
    out.insert(out.end(), entry.payload.begin(), entry.payload.end());
  }

  uint64_t offset = 0;
  for (const PendingTensor& pending : tensors_) {
    append_string(out, pending.name);
    append<uint32_t>(out, static_cast<uint32_t>(pending.shape.size()));
    for (auto dim = pending.shape.rbegin(); dim != pending.shape.rend(); ++dim) {  // ggml order: innermost first
      append<uint64_t>(out, static_cast<uint64_t>(*dim));
    }
    append<uint32_t>(out, static_cast<uint32_t>(pending.dtype));
    append<uint64_t>(out, offset);
    offset += (pending.data.size() + alignment - 1) / alignment * alignment;
  }
  pad_to(out, alignment);
  for (const PendingTensor& pending : tensors_) {
    out.insert(out.end(), pending.data.begin(), pending.data.end());
    pad_to(out, alignment);
  }
  return out;
}

Status GgufWriter::write(const std::string& path, uint32_t alignment) const {
  const std::vector<uint8_t> bytes = to_bytes(alignment);
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) return Status::errorf("cannot create {}: {}", path, std::strerror(errno));
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size()) {
    return Status::errorf("cannot write {} bytes to {}: {}", bytes.size(), path, std::strerror(errno));
  }
  if (std::fclose(file.release()) != 0) return Status::errorf("cannot close {}: {}", path, std::strerror(errno));
  return Status::ok();
}

}  // namespace rwd::gguf
