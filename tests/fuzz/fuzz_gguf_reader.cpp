// libFuzzer target for the GGUF reader: any bytes must either open or fail with a Status, never crash or read
// outside the buffer. A file that opens is also taken through every accessor and copied through GgufWriter;
// the copy must open and say the same thing (a differential check of reader and writer).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/check.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace {

using rwd::gguf::GgufFile;
using rwd::gguf::GgufWriter;
using rwd::gguf::TensorInfo;

size_t touch_everything(const GgufFile& file) {
  size_t n_touched = file.version() + file.alignment() + file.data_offset() + file.file_bytes();
  for (const auto& [key, value] : file.metadata()) {
    REWIND_CHECK(file.find(key) == &value, "find('{}') does not return its own entry", key);
    n_touched += file.value_to_string(value).size() + file.value_to_string(value, 0).size();
    n_touched += file.get_u64(key).is_ok() + file.get_i64(key).is_ok() + file.get_u32(key).is_ok();
    n_touched += file.get_f32(key).is_ok() + file.get_bool(key).is_ok() + file.get_string(key).is_ok();
    n_touched += file.get_string_array(key).is_ok() + file.get_f32_array(key).is_ok();
    n_touched += file.get_i64_array(key).is_ok();
    n_touched += file.get_u32_or(key, 1).is_ok() + file.get_string_or(key, "x").is_ok();
  }
  for (const TensorInfo& info : file.tensors()) {
    REWIND_CHECK(file.find_tensor(info.tensor.name) == &info, "find_tensor('{}') is wrong", info.tensor.name);
    REWIND_CHECK(info.n_bytes == info.tensor.n_bytes() && info.n_bytes > 0, "tensor '{}': n_bytes {} vs {}",
                 info.tensor.name, info.n_bytes, info.tensor.n_bytes());
    const auto* data = static_cast<const uint8_t*>(info.tensor.data);
    n_touched += data[0] + data[info.n_bytes - 1] + rwd::tensor::shape_string(info.tensor).size();
  }
  return n_touched;
}

void check_copy(const GgufFile& file) {
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set_value(key, value);
  for (const TensorInfo& info : file.tensors()) {
    const auto& ne = info.tensor.ne;
    std::vector<int64_t> shape(ne.rbegin() + (4 - info.tensor.n_dims), ne.rend());
    const auto* data = static_cast<const uint8_t*>(info.tensor.data);
    writer.add_tensor(info.tensor.name, info.tensor.dtype, shape, std::vector<uint8_t>(data, data + info.n_bytes));
  }
  const std::vector<uint8_t> bytes = writer.to_bytes(file.alignment());
  auto copied = GgufFile::from_bytes(bytes, "copy");
  REWIND_CHECK(copied.is_ok(), "the writer's copy does not open: {}", copied.status().message());
  const GgufFile& copy = **copied;
  REWIND_CHECK(copy.metadata().size() == file.metadata().size(), "copy has {} keys, original {}",
               copy.metadata().size(), file.metadata().size());
  for (size_t i = 0; i < copy.metadata().size(); ++i) {
    const auto& [key, value] = copy.metadata()[i];
    REWIND_CHECK(key == file.metadata()[i].first, "key {} differs", i);
    REWIND_CHECK(copy.value_to_string(value, 64) == file.value_to_string(file.metadata()[i].second, 64),
                 "key '{}' differs in the copy", key);
  }
  REWIND_CHECK(copy.tensors().size() == file.tensors().size(), "tensor counts differ");
  for (size_t i = 0; i < copy.tensors().size(); ++i) {
    const auto& a = copy.tensors()[i].tensor;
    const auto& b = file.tensors()[i].tensor;
    REWIND_CHECK(a.name == b.name && a.dtype == b.dtype && a.n_dims == b.n_dims && a.ne == b.ne,
                 "tensor '{}' differs in the copy", b.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::from_bytes({data, size}, "fuzz.gguf");
  if (!file.is_ok()) {
    REWIND_CHECK(file.status().message().rfind("fuzz.gguf: ", 0) == 0, "message does not name the file: {}",
                 file.status().message());
    return 0;
  }
  volatile size_t sink = touch_everything(**file);
  (void)sink;
  check_copy(**file);
  return 0;
}
