// GgufWriter: builds a GGUF v3 file (metadata then tensor infos then aligned data), for `rewind mkmodel` and
// for tests that need small or unusual files. Keys and tensors are written in the order they are added.
// It trusts its caller: wrong shapes or data sizes are programming errors (REWIND_CHECK), not Status.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tensor/dtype.h"

namespace rwd::gguf {

class GgufWriter {
 public:
  // Setting a key again replaces its value and keeps its position.
  void set_u32(std::string_view key, uint32_t value);
  void set_i32(std::string_view key, int32_t value);
  void set_u64(std::string_view key, uint64_t value);
  void set_f32(std::string_view key, float value);
  void set_bool(std::string_view key, bool value);
  void set_string(std::string_view key, std::string_view value);
  void set_string_array(std::string_view key, const std::vector<std::string>& values);
  void set_f32_array(std::string_view key, const std::vector<float>& values);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& values);
  void set_bool_array(std::string_view key, const std::vector<bool>& values);
  // Copies a value of any type as read by GgufFile (which must still be open), e.g. to rewrite a file's
  // metadata next to new tensors.
  void set_value(std::string_view key, const Value& value);

  // shape is outermost first ([n_out, n_in] for a weight); data holds row_bytes(dtype, n_in) * rows bytes.
  void add_tensor(const std::string& name, tensor::DType dtype, const std::vector<int64_t>& shape,
                  std::vector<uint8_t> data);

  // alignment must be a power of two; `general.alignment` is added when it is not the default 32.
  std::vector<uint8_t> to_bytes(uint32_t alignment = 32) const;
  Status write(const std::string& path, uint32_t alignment = 32) const;

 private:
  struct Entry {
    std::string key;
    ValueType type;
    ValueType element_type;
    std::vector<uint8_t> payload;  // encoded value without the key and the type
  };
  struct PendingTensor {
    std::string name;
    tensor::DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  void set_entry(Entry entry);

  std::vector<Entry> entries_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace rwd::gguf
