// GgufFile: parsing and validation of the GGUF container, and typed access to its metadata.
// All reads go through a bounds-checked cursor and all size arithmetic is overflow-checked, so nothing the
// file says can make the parser read outside the bytes or allocate more than the bytes could describe.
// Meaning of keys and tensors (which are required, their shapes) belongs to model/, not here.
#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

namespace rwd::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; rewind reads it in place");

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
constexpr std::string_view kAlignmentKey = "general.alignment";

// Smallest possible encodings, used to reject counts that cannot fit in the bytes left before allocating.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;               // key length, 1-byte key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name length, 1-byte name, n_dims, ne, type, offset

template <typename T>
T load(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

bool is_valid_value_type(uint32_t type) { return type <= static_cast<uint32_t>(ValueType::float64); }


bool is_integer(ValueType type) {
  switch (type) {
    case ValueType::uint8:
    case ValueType::int8:
    case ValueType::uint16:
    case ValueType::int16:
    case ValueType::uint32:
    case ValueType::int32:
    case ValueType::uint64:
    case ValueType::int64:
      return true;
    default:
      return false;
  }
}

bool is_signed_integer(ValueType type) {
  return type == ValueType::int8 || type == ValueType::int16 || type == ValueType::int32 ||
         type == ValueType::int64;
}

// An integer element widened without loss: signed types to int64, unsigned ones to uint64.
struct WideInteger {
  bool is_signed = false;
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;

  std::optional<uint64_t> as_u64() const {
    if (!is_signed) return unsigned_value;
    if (signed_value < 0) return std::nullopt;
    return static_cast<uint64_t>(signed_value);
  }
  std::optional<int64_t> as_i64() const {
    if (is_signed) return signed_value;
    if (unsigned_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(unsigned_value);
  }
  std::string to_string() const {
    return is_signed ? fmt::format("{}", signed_value) : fmt::format("{}", unsigned_value);
  }
};

WideInteger load_integer(ValueType type, const uint8_t* at) {
  WideInteger out;
  out.is_signed = is_signed_integer(type);
  switch (type) {
    case ValueType::uint8: out.unsigned_value = load<uint8_t>(at); break;
    case ValueType::int8: out.signed_value = load<int8_t>(at); break;
    case ValueType::uint16: out.unsigned_value = load<uint16_t>(at); break;
    case ValueType::int16: out.signed_value = load<int16_t>(at); break;
    case ValueType::uint32: out.unsigned_value = load<uint32_t>(at); break;
    case ValueType::int32: out.signed_value = load<int32_t>(at); break;
    case ValueType::uint64: out.unsigned_value = load<uint64_t>(at); break;
    case ValueType::int64: out.signed_value = load<int64_t>(at); break;
    default: break;
  }
  return out;
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // Continuation bytes after the lead, and the smallest code point that needs that many (no overlongs).
    size_t n_extra = 0;
    uint32_t min_code = 0;
    if ((lead & 0xe0) == 0xc0) {
      n_extra = 1;
      min_code = 0x80;
    } else if ((lead & 0xf0) == 0xe0) {
      n_extra = 2;
      min_code = 0x800;
    } else if ((lead & 0xf8) == 0xf0) {
      n_extra = 3;
      min_code = 0x10000;
    } else {
      return false;
    }
    uint32_t code = lead & (0x3fu >> n_extra);
    if (text.size() - i - 1 < n_extra) return false;
    for (size_t k = 1; k <= n_extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < min_code || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += n_extra + 1;
  }
  return true;
}

// A name for messages: printable ASCII as is, anything else escaped, long names shortened.
std::string printable(std::string_view text, size_t max_bytes = 80) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max_bytes) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

// Reads little-endian fields from the file bytes; every read checks the bytes left first.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  const uint8_t* here() const { return bytes_.data() + pos_; }

  Status need(uint64_t n_bytes, std::string_view what) const {
    if (n_bytes <= remaining()) return Status::ok();
    return Status::errorf("{}: needs {} bytes at offset {} but the file ends at {}", what, n_bytes, pos_,
                          bytes_.size());
  }
  Status skip(uint64_t n_bytes, std::string_view what) {
    REWIND_RETURN_IF_ERROR(need(n_bytes, what));
    pos_ += static_cast<size_t>(n_bytes);
    return Status::ok();
  }
  template <typename T>
  Result<T> read(std::string_view what) {
    REWIND_RETURN_IF_ERROR(need(sizeof(T), what));
    const T value = load<T>(here());
    pos_ += sizeof(T);
    return value;
  }
  Result<std::string_view> read_string(std::string_view what) {
    REWIND_ASSIGN_OR_RETURN(const uint64_t n_bytes, read<uint64_t>(what));
    if (n_bytes > remaining()) {
      return Status::errorf("{}: string length {} at offset {} exceeds the {} bytes left in the file", what,
                            n_bytes, pos_ - 8, remaining());
    }
    const std::string_view text(reinterpret_cast<const char*>(here()), static_cast<size_t>(n_bytes));
    pos_ += static_cast<size_t>(n_bytes);
    return text;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Result<ValueType> read_value_type(Cursor& cursor, std::string_view what) {
  REWIND_ASSIGN_OR_RETURN(const uint32_t raw, cursor.read<uint32_t>(what));
  if (!is_valid_value_type(raw)) {
    return Status::errorf("{}: unknown value type {} at offset {} (expected 0..12)", what, raw,
                          cursor.pos() - 4);
  }
  return static_cast<ValueType>(raw);
}

Status check_booleans(const uint8_t* at, uint64_t count, std::string_view what) {
  for (uint64_t i = 0; i < count; ++i) {
    if (at[i] > 1) return Status::errorf("{}: bool element {} is {} (expected 0 or 1)", what, i, at[i]);
  }
  return Status::ok();
}

Result<Value> read_array(Cursor& cursor) {
  Value value;
  value.type = ValueType::array;
  REWIND_ASSIGN_OR_RETURN(value.element_type, read_value_type(cursor, "array element type"));
  if (value.element_type == ValueType::array) {
    return Status::error("arrays of arrays are not supported (element type 9)");
  }
  REWIND_ASSIGN_OR_RETURN(value.count, cursor.read<uint64_t>("array count"));
  value.data = cursor.here();
  const size_t element_bytes = value_type_size(value.element_type);
  if (element_bytes > 0) {
    if (value.count > cursor.remaining() / element_bytes) {
      return Status::errorf("array of {} {} elements ({} bytes each) exceeds the {} bytes left in the file",
                            value.count, value_type_name(value.element_type), element_bytes, cursor.remaining());
    }
    if (value.element_type == ValueType::boolean) {
      REWIND_RETURN_IF_ERROR(check_booleans(cursor.here(), value.count, "array"));
    }
    REWIND_RETURN_IF_ERROR(cursor.skip(value.count * element_bytes, "array elements"));
    return value;
  }
  // Strings: each needs at least its 8-byte length.
  if (value.count > cursor.remaining() / 8) {
    return Status::errorf("array of {} strings exceeds the {} bytes left in the file (8 bytes at least each)",
                          value.count, cursor.remaining());
  }
  for (uint64_t i = 0; i < value.count; ++i) {
    auto text = cursor.read_string("array string");
    if (!text) return text.status().with_context(fmt::format("string {} of {}", i, value.count));
  }
  return value;
}

Result<Value> read_value(Cursor& cursor, ValueType type) {
  if (type == ValueType::array) return read_array(cursor);
  Value value;
  value.type = type;
  value.element_type = type;
  if (type == ValueType::string) {
    REWIND_ASSIGN_OR_RETURN(const std::string_view text, cursor.read_string("string value"));
    value.count = text.size();
    value.data = reinterpret_cast<const uint8_t*>(text.data());
    return value;
  }
  const size_t n_bytes = value_type_size(type);
  value.count = 1;
  value.data = cursor.here();
  REWIND_RETURN_IF_ERROR(cursor.skip(n_bytes, fmt::format("{} value", value_type_name(type))));
  if (type == ValueType::boolean) REWIND_RETURN_IF_ERROR(check_booleans(value.data, 1, "bool value"));
  return value;
}

// "array<string>" or "uint32", for type-mismatch messages.
std::string describe_type(const Value& value) {
  if (value.type != ValueType::array) return std::string(value_type_name(value.type));
  return fmt::format("array<{}>", value_type_name(value.element_type));
}

// Checked arithmetic for sizes read from the file.
bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) { return __builtin_add_overflow(a, b, sum); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* product) { return __builtin_mul_overflow(a, b, product); }

std::string quote_string(std::string_view text, size_t max_bytes) {
  std::string out = "\"";
  size_t n_shown = std::min(text.size(), max_bytes);
  // Do not cut a UTF-8 sequence in half.
  while (n_shown < text.size() && n_shown > 0 && (static_cast<uint8_t>(text[n_shown]) & 0xc0) == 0x80) --n_shown;
  for (size_t i = 0; i < n_shown; ++i) {
    const char c = text[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  if (n_shown < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::string scalar_to_string(ValueType type, const uint8_t* at) {
  switch (type) {
    case ValueType::float32: return fmt::format("{}", load<float>(at));
    case ValueType::float64: return fmt::format("{}", load<double>(at));
    case ValueType::boolean: return at[0] != 0 ? "true" : "false";
    default: return load_integer(type, at).to_string();
  }
}

struct Header {
  uint32_t version = 0;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
};

Result<Header> read_header(Cursor& cursor) {
  REWIND_ASSIGN_OR_RETURN(const uint32_t magic, cursor.read<uint32_t>("magic"));
  if (magic != kMagic) {
    const uint8_t* m = cursor.here() - 4;
    return Status::errorf("not a GGUF file: magic is {:02x} {:02x} {:02x} {:02x} (expected 47 47 55 46, \"GGUF\")",
                          m[0], m[1], m[2], m[3]);
  }
  Header header;
  REWIND_ASSIGN_OR_RETURN(header.version, cursor.read<uint32_t>("version"));
  if (header.version == 1) {
    return Status::error("GGUF version 1 (32-bit counts) is not supported; expected version 2 or 3");
  }
  if (header.version == 0x02000000 || header.version == 0x03000000) {
    return Status::errorf("GGUF version {} looks byte-swapped: big-endian GGUF files are not supported",
                          header.version);
  }
  if (header.version != 2 && header.version != 3) {
    return Status::errorf("unsupported GGUF version {}; expected 2 or 3", header.version);
  }
  REWIND_ASSIGN_OR_RETURN(header.n_tensors, cursor.read<uint64_t>("tensor count"));
  REWIND_ASSIGN_OR_RETURN(header.n_kv, cursor.read<uint64_t>("metadata count"));
  if (header.n_kv > cursor.remaining() / kMinKvBytes) {
    return Status::errorf("metadata count {} cannot fit in the {} bytes after the header ({} bytes at least each)",
                          header.n_kv, cursor.remaining(), kMinKvBytes);
  }
  if (header.n_tensors > cursor.remaining() / kMinTensorInfoBytes) {
    return Status::errorf("tensor count {} cannot fit in the {} bytes after the header ({} bytes at least each)",
                          header.n_tensors, cursor.remaining(), kMinTensorInfoBytes);
  }
  return header;
}

// Strictly a uint32, as the format specifies and llama.cpp requires.
Result<uint32_t> read_alignment(const Value* value) {
  if (value == nullptr) return kDefaultAlignment;
  if (value->type != ValueType::uint32) {
    return Status::errorf("key '{}': expected uint32, found {}", kAlignmentKey, describe_type(*value));
  }
  const auto alignment = load<uint32_t>(value->data);
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    return Status::errorf("key '{}': alignment {} is not a non-zero power of two", kAlignmentKey, alignment);
  }
  return alignment;
}

// One tensor info: name, dims, type and offset, with every size checked; the data pointer is set later.
// `where` says which one ("tensor info 3 of 71") until the name is known.
Result<TensorInfo> read_tensor_info(Cursor& cursor, std::string_view where, uint32_t alignment, size_t file_bytes) {
  auto name = cursor.read_string(fmt::format("{}: name", where));
  if (!name) return name.status();
  if (name->empty()) return Status::errorf("{}: name is empty", where);
  if (!is_valid_utf8(*name)) return Status::errorf("{}: name '{}' is not valid UTF-8", where, printable(*name));
  const std::string context = fmt::format("tensor '{}'", *name);
  TensorInfo info;
  info.tensor.name = std::string(*name);
  REWIND_ASSIGN_OR_RETURN(const uint32_t n_dims, cursor.read<uint32_t>(context + ": n_dims"));
  if (n_dims < 1 || n_dims > kMaxDims) {
    return Status::errorf("{}: n_dims is {} (expected 1..{})", context, n_dims, kMaxDims);
  }
  info.tensor.n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    REWIND_ASSIGN_OR_RETURN(const uint64_t ne, cursor.read<uint64_t>(context + ": ne"));
    if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::errorf("{}: ne[{}] is {} (expected 1..2^63-1)", context, d, ne);
    }
    info.tensor.ne[d] = static_cast<int64_t>(ne);
  }
  REWIND_ASSIGN_OR_RETURN(const uint32_t type_id, cursor.read<uint32_t>(context + ": type"));
  const tensor::DTypeTraits* traits = tensor::find_dtype_traits(type_id);
  if (traits == nullptr) return Status::errorf("{}: unknown ggml type id {}", context, type_id);
  info.tensor.dtype = traits->dtype;
  if (info.tensor.ne[0] % traits->block_size != 0) {
    return Status::errorf("{}: ne[0] = {} is not a multiple of the {} block size {}", context, info.tensor.ne[0],
                          traits->name, traits->block_size);
  }
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (mul_overflows(n_elements, static_cast<uint64_t>(info.tensor.ne[d]), &n_elements) ||
        n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::errorf("{}: element count of shape {} overflows 64 bits", context,
                            tensor::shape_string(info.tensor));
    }
  }
  uint64_t n_bytes = 0;
  if (mul_overflows(n_elements / static_cast<uint64_t>(traits->block_size), traits->block_bytes, &n_bytes) ||
      n_bytes > file_bytes) {
    return Status::errorf("{}: shape {} of {} needs more bytes than the whole file ({} bytes)", context,
                          tensor::shape_string(info.tensor), traits->name, file_bytes);
  }
  info.n_bytes = static_cast<size_t>(n_bytes);
  REWIND_ASSIGN_OR_RETURN(info.offset, cursor.read<uint64_t>(context + ": offset"));
  if (info.offset % alignment != 0) {
    return Status::errorf("{}: data offset {} is not a multiple of the alignment {}", context, info.offset,
                          alignment);
  }
  return info;
}

// Data ranges were checked against the file, so offset + n_bytes cannot overflow here.
Status check_overlaps(const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const TensorInfo& info : tensors) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& before = *by_offset[i - 1];
    const TensorInfo& after = *by_offset[i];
    if (before.offset + before.n_bytes > after.offset) {
      return Status::errorf("tensor '{}': data [{}, {}) overlaps tensor '{}' at [{}, {}) (offsets in the data "
                            "section)",
                            after.tensor.name, after.offset, after.offset + after.n_bytes, before.tensor.name,
                            before.offset, before.offset + before.n_bytes);
    }
  }
  return Status::ok();
}

template <typename T>
constexpr std::string_view integer_type_name() {
  if constexpr (std::is_same_v<T, uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
  if constexpr (std::is_same_v<T, uint32_t>) return "uint32";
}

// Converts to T when the stored integer (any width or signedness) fits; nullopt otherwise.
template <typename T>
std::optional<T> narrow_integer(const WideInteger& wide) {
  if constexpr (std::is_signed_v<T>) {
    const std::optional<int64_t> value = wide.as_i64();
    if (!value || *value < std::numeric_limits<T>::min() || *value > std::numeric_limits<T>::max()) return {};
    return static_cast<T>(*value);
  } else {
    const std::optional<uint64_t> value = wide.as_u64();
    if (!value || *value > std::numeric_limits<T>::max()) return {};
    return static_cast<T>(*value);
  }
}

}  // namespace

size_t value_type_size(ValueType type) {
  switch (type) {
    case ValueType::uint8:
    case ValueType::int8:
    case ValueType::boolean:
      return 1;
    case ValueType::uint16:
    case ValueType::int16:
      return 2;
    case ValueType::uint32:
    case ValueType::int32:
    case ValueType::float32:
      return 4;
    case ValueType::uint64:
    case ValueType::int64:
    case ValueType::float64:
      return 8;
    case ValueType::string:
    case ValueType::array:
      return 0;
  }
  return 0;
}

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::uint8: return "uint8";
    case ValueType::int8: return "int8";
    case ValueType::uint16: return "uint16";
    case ValueType::int16: return "int16";
    case ValueType::uint32: return "uint32";
    case ValueType::int32: return "int32";
    case ValueType::float32: return "float32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::uint64: return "uint64";
    case ValueType::int64: return "int64";
    case ValueType::float64: return "float64";
  }
  return "unknown";
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapping, MappedFile::open(path));
  const std::span<const uint8_t> bytes = mapping->bytes();
  REWIND_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, from_bytes(bytes, path));
  file->mapping_ = std::move(mapping);
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = bytes;
  file->path_ = std::move(name);
  const Status status = file->parse();
  if (!status) return status.with_context(file->path_);
  return file;
}

Status GgufFile::parse() {
  Cursor cursor(bytes_);
  REWIND_ASSIGN_OR_RETURN(const Header header, read_header(cursor));
  version_ = header.version;

  // Capped: the counts are bounded by the file size, but a huge file could still ask for a huge reserve.
  constexpr uint64_t kMaxReserve = 1 << 16;
  metadata_.reserve(static_cast<size_t>(std::min(header.n_kv, kMaxReserve)));
  for (uint64_t i = 0; i < header.n_kv; ++i) {
    const std::string where = fmt::format("metadata entry {} of {}", i, header.n_kv);
    auto key = cursor.read_string(where + ": key");
    if (!key) return key.status();
    if (key->empty()) return Status::errorf("{}: key is empty", where);
    if (!is_valid_utf8(*key)) return Status::errorf("{}: key '{}' is not valid UTF-8", where, printable(*key));
    const std::string key_context = fmt::format("key '{}'", *key);
    auto type = read_value_type(cursor, key_context + ": value type");
    if (!type) return type.status();
    auto value = read_value(cursor, *type);
    if (!value) return value.status().with_context(key_context);
    if (const auto seen = metadata_index_.find(*key); seen != metadata_index_.end()) {
      return Status::errorf("{}: duplicate key '{}' (first seen as entry {})", where, *key, seen->second);
    }
    metadata_index_.emplace(std::string(*key), metadata_.size());
    metadata_.emplace_back(std::string(*key), *value);
  }
  REWIND_ASSIGN_OR_RETURN(alignment_, read_alignment(find(kAlignmentKey)));

  tensors_.reserve(static_cast<size_t>(std::min(header.n_tensors, kMaxReserve)));
  for (uint64_t i = 0; i < header.n_tensors; ++i) {
    const std::string where = fmt::format("tensor info {} of {}", i, header.n_tensors);
    REWIND_ASSIGN_OR_RETURN(TensorInfo info, read_tensor_info(cursor, where, alignment_, bytes_.size()));
    if (const auto seen = tensor_index_.find(info.tensor.name); seen != tensor_index_.end()) {
      return Status::errorf("tensor '{}': duplicate name ({}, first seen as tensor info {})", info.tensor.name,
                            where, seen->second);
    }
    tensor_index_.emplace(info.tensor.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }

  // The data section starts at the next multiple of the alignment. A file without tensors may end before.
  uint64_t data_offset = 0;
  if (add_overflows(cursor.pos(), alignment_ - 1, &data_offset)) {
    return Status::errorf("alignment {} overflows the data section offset", alignment_);
  }
  data_offset -= data_offset % alignment_;
  if (!tensors_.empty() && data_offset > bytes_.size()) {
    return Status::errorf("data section starts at {} (tensor infos end at {}, alignment {}) beyond the end of the "
                          "file ({} bytes)",
                          data_offset, cursor.pos(), alignment_, bytes_.size());
  }
  data_offset_ = static_cast<size_t>(std::min<uint64_t>(data_offset, bytes_.size()));

  for (TensorInfo& info : tensors_) {
    uint64_t begin = 0;
    uint64_t end = 0;
    if (add_overflows(data_offset, info.offset, &begin) || add_overflows(begin, info.n_bytes, &end)) {
      return Status::errorf("tensor '{}': data offset {} + {} bytes overflows 64 bits", info.tensor.name,
                            info.offset, info.n_bytes);
    }
    if (end > bytes_.size()) {
      return Status::errorf("tensor '{}': data [{}, {}) extends past the end of the file ({} bytes)",
                            info.tensor.name, begin, end, bytes_.size());
    }
    info.tensor.data = bytes_.data() + begin;
  }
  return check_overlaps(tensors_);
}

const Value* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::release(const tensor::Tensor& tensor) const {
  if (mapping_ == nullptr) return;
  mapping_->release({static_cast<const uint8_t*>(tensor.data), tensor.n_bytes()});
}

namespace {

Status missing_key(const GgufFile& file, std::string_view key) {
  return Status::errorf("{}: key '{}' not found", file.path(), key);
}

Status wrong_type(const GgufFile& file, std::string_view key, std::string_view expected, const Value& found) {
  return Status::errorf("{}: key '{}': expected {}, found {}", file.path(), key, expected, describe_type(found));
}

template <typename T>
Result<T> get_integer(const GgufFile& file, std::string_view key) {
  const Value* value = file.find(key);
  if (value == nullptr) return missing_key(file, key);
  if (!is_integer(value->type)) return wrong_type(file, key, integer_type_name<T>(), *value);
  const WideInteger wide = load_integer(value->type, value->data);
  const std::optional<T> narrowed = narrow_integer<T>(wide);
  if (!narrowed) {
    return Status::errorf("{}: key '{}': value {} ({}) does not fit in {}", file.path(), key, wide.to_string(),
                          value_type_name(value->type), integer_type_name<T>());
  }
  return *narrowed;
}

Result<const Value*> find_array(const GgufFile& file, std::string_view key, std::string_view expected) {
  const Value* value = file.find(key);
  if (value == nullptr) return missing_key(file, key);
  if (value->type != ValueType::array) return wrong_type(file, key, expected, *value);
  return value;
}

}  // namespace

Result<uint64_t> GgufFile::get_u64(std::string_view key) const { return get_integer<uint64_t>(*this, key); }
Result<int64_t> GgufFile::get_i64(std::string_view key) const { return get_integer<int64_t>(*this, key); }
Result<uint32_t> GgufFile::get_u32(std::string_view key) const { return get_integer<uint32_t>(*this, key); }

Result<float> GgufFile::get_f32(std::string_view key) const {
  const Value* value = find(key);
  if (value == nullptr) return missing_key(*this, key);
  if (value->type == ValueType::float32) return load<float>(value->data);
  if (value->type == ValueType::float64) return static_cast<float>(load<double>(value->data));
  return wrong_type(*this, key, "float32", *value);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* value = find(key);
  if (value == nullptr) return missing_key(*this, key);
  if (value->type != ValueType::boolean) return wrong_type(*this, key, "bool", *value);
  return value->data[0] != 0;
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* value = find(key);
  if (value == nullptr) return missing_key(*this, key);
  if (value->type != ValueType::string) return wrong_type(*this, key, "string", *value);
  return std::string(reinterpret_cast<const char*>(value->data), static_cast<size_t>(value->count));
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  REWIND_ASSIGN_OR_RETURN(const Value* value, find_array(*this, key, "array<string>"));
  if (value->element_type != ValueType::string) return wrong_type(*this, key, "array<string>", *value);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(value->count));
  // Lengths were checked against the file when it was opened.
  const uint8_t* at = value->data;
  for (uint64_t i = 0; i < value->count; ++i) {
    const auto n_bytes = static_cast<size_t>(load<uint64_t>(at));
    out.emplace_back(reinterpret_cast<const char*>(at + 8), n_bytes);
    at += 8 + n_bytes;
  }
  return out;
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  REWIND_ASSIGN_OR_RETURN(const Value* value, find_array(*this, key, "array<float32>"));
  const auto count = static_cast<size_t>(value->count);
  std::vector<float> out(count);
  if (value->element_type == ValueType::float32) {
    if (count > 0) std::memcpy(out.data(), value->data, count * sizeof(float));
  } else if (value->element_type == ValueType::float64) {
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load<double>(value->data + 8 * i));
  } else {
    return wrong_type(*this, key, "array<float32>", *value);
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_i64_array(std::string_view key) const {
  REWIND_ASSIGN_OR_RETURN(const Value* value, find_array(*this, key, "array<int64>"));
  if (!is_integer(value->element_type)) return wrong_type(*this, key, "array<int64>", *value);
  const size_t stride = value_type_size(value->element_type);
  std::vector<int64_t> out(static_cast<size_t>(value->count));
  for (size_t i = 0; i < out.size(); ++i) {
    const WideInteger wide = load_integer(value->element_type, value->data + stride * i);
    const std::optional<int64_t> narrowed = wide.as_i64();
    if (!narrowed) {
      return Status::errorf("{}: key '{}': element {} is {} (uint64), which does not fit in int64", path_, key, i,
                            wide.to_string());
    }
    out[i] = *narrowed;
  }
  return out;
}

Result<std::vector<bool>> GgufFile::get_bool_array(std::string_view key) const {
  REWIND_ASSIGN_OR_RETURN(const Value* value, find_array(*this, key, "array<bool>"));
  if (value->element_type != ValueType::boolean) return wrong_type(*this, key, "array<bool>", *value);
  std::vector<bool> out(static_cast<size_t>(value->count));
  for (size_t i = 0; i < out.size(); ++i) out[i] = value->data[i] != 0;
  return out;
}

Result<uint32_t> GgufFile::get_u32_or(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : Result<uint32_t>(fallback);
}

Result<float> GgufFile::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : Result<float>(fallback);
}

Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}

Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}

std::string GgufFile::value_to_string(const Value& value, size_t max_elements) const {
  constexpr size_t kMaxStringBytes = 256;
  constexpr size_t kMaxElementStringBytes = 64;
  if (value.type == ValueType::string) {
    return quote_string({reinterpret_cast<const char*>(value.data), static_cast<size_t>(value.count)},
                        kMaxStringBytes);
  }
  if (value.type != ValueType::array) return scalar_to_string(value.type, value.data);
  std::string out = "[";
  const uint8_t* at = value.data;
  const size_t stride = value_type_size(value.element_type);
  const uint64_t n_shown = std::min<uint64_t>(value.count, max_elements);
  for (uint64_t i = 0; i < n_shown; ++i) {
    if (i > 0) out += ", ";
    if (value.element_type == ValueType::string) {
      const auto n_bytes = static_cast<size_t>(load<uint64_t>(at));
      out += quote_string({reinterpret_cast<const char*>(at + 8), n_bytes}, kMaxElementStringBytes);
      at += 8 + n_bytes;
    } else {
      out += scalar_to_string(value.element_type, at);
      at += stride;
    }
  }
  if (n_shown < value.count) out += fmt::format("{}... {} more", n_shown > 0 ? ", " : "", value.count - n_shown);
  out += "]";
  return out;
}

}  // namespace rwd::gguf
