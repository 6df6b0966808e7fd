// Writes the seed corpus for fuzz_gguf_reader into the directory given as the only argument: small files
// from GgufWriter covering every value type, several tensor types and alignments, and copies of the golden
// llama.cpp files with their metadata intact but every tensor shrunk to a few values.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/keys.h"

namespace {

using rwd::Status;
using rwd::gguf::GgufFile;
using rwd::gguf::GgufWriter;
using rwd::gguf::Value;
using rwd::gguf::ValueType;
using rwd::tensor::DType;

std::vector<uint8_t> filled(size_t n_bytes, uint8_t seed) {
  std::vector<uint8_t> bytes(n_bytes);
  for (size_t i = 0; i < n_bytes; ++i) bytes[i] = static_cast<uint8_t>(seed + 7 * i);
  return bytes;
}

template <typename T>
void set_scalar(GgufWriter& writer, const std::string& key, ValueType type, T value) {
  writer.set_value(key, Value{type, type, 1, reinterpret_cast<const uint8_t*>(&value)});
}

template <typename T>
void set_array(GgufWriter& writer, const std::string& key, ValueType type, const std::vector<T>& values) {
  writer.set_value(key, Value{ValueType::array, type, values.size(), reinterpret_cast<const uint8_t*>(values.data())});
}

GgufWriter all_value_types() {
  GgufWriter writer;
  writer.set_string(rwd::gguf::kGeneralArchitecture, "tiny");
  set_scalar<uint8_t>(writer, "t.u8", ValueType::uint8, 200);
  set_scalar<int8_t>(writer, "t.i8", ValueType::int8, -5);
  set_scalar<uint16_t>(writer, "t.u16", ValueType::uint16, 60000);
  set_scalar<int16_t>(writer, "t.i16", ValueType::int16, -300);
  writer.set_u32("t.u32", 4000000000u);
  writer.set_i32("t.i32", -7);
  writer.set_f32("t.f32", 1.5f);
  writer.set_bool("t.bool", true);
  writer.set_string("t.string", "h\xc3\xa9llo");
  writer.set_u64("t.u64", 1ull << 40);
  set_scalar<int64_t>(writer, "t.i64", ValueType::int64, -(1ll << 40));
  set_scalar<double>(writer, "t.f64", ValueType::float64, 0.25);
  set_array<uint8_t>(writer, "a.u8", ValueType::uint8, {1, 2, 255});
  set_array<int8_t>(writer, "a.i8", ValueType::int8, {-1, 127});
  set_array<uint16_t>(writer, "a.u16", ValueType::uint16, {65535});
  set_array<int16_t>(writer, "a.i16", ValueType::int16, {-32768, 3});
  set_array<uint32_t>(writer, "a.u32", ValueType::uint32, {7, 4294967295u});
  writer.set_i32_array("a.i32", {-3, -2, -1, 0, 1, 2, 3, 4, 5, 6});
  writer.set_f32_array("a.f32", {-2.5f, 3.0f});
  set_array<uint8_t>(writer, "a.bool", ValueType::boolean, {0, 1});
  writer.set_string_array("a.string", {"x", "yz", ""});
  set_array<uint64_t>(writer, "a.u64", ValueType::uint64, {(1ull << 63) + 1});
  set_array<int64_t>(writer, "a.i64", ValueType::int64, {-9, 1ll << 50});
  set_array<double>(writer, "a.f64", ValueType::float64, {-0.125});
  writer.set_i32_array("a.empty", {});
  return writer;
}

GgufWriter small_model() {
  GgufWriter writer;
  writer.set_string(rwd::gguf::kGeneralArchitecture, "tiny");
  writer.set_u32("tiny.block_count", 1);
  writer.set_string_array(rwd::gguf::kTokenizerTokens, {"a", "bc", ""});
  writer.set_f32("tiny.rope.freq_base", 10000.0f);
  writer.add_tensor("token_embd.weight", DType::f32, {3, 5}, filled(60, 1));
  writer.add_tensor("blk.0.attn_q.weight", DType::q8_0, {2, 32}, filled(68, 2));
  writer.add_tensor("blk.0.ffn_up.weight", DType::q4_k, {1, 256}, filled(144, 3));
  writer.add_tensor("blk.0.ffn_down.weight", DType::f16, {2, 1, 3}, filled(12, 4));
  writer.add_tensor("blk.0.attn_norm.weight", DType::bf16, {1, 1, 1, 4}, filled(8, 5));
  return writer;
}

// The golden file's metadata, and each tensor with every dimension cut to at most 2 (one block for
// quantized types), so the seed stays a few kilobytes.
Status shrink_golden(const std::string& path, GgufWriter* writer) {
  auto opened = GgufFile::open(path);
  if (!opened.is_ok()) return opened.status();
  const GgufFile& file = **opened;
  for (const auto& [key, value] : file.metadata()) writer->set_value(key, value);
  for (const auto& info : file.tensors()) {
    const auto& traits = rwd::tensor::dtype_traits(info.tensor.dtype);
    std::vector<int64_t> shape;
    for (int d = info.tensor.n_dims - 1; d >= 0; --d) shape.push_back(std::min<int64_t>(info.tensor.ne[d], 2));
    shape.back() = traits.block_size;
    size_t n_rows = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) n_rows *= static_cast<size_t>(shape[d]);
    writer->add_tensor(info.tensor.name, info.tensor.dtype, shape, filled(n_rows * traits.block_bytes, 9));
  }
  return Status::ok();
}

Status write_seed(const std::string& dir, const std::string& name, const GgufWriter& writer, uint32_t alignment) {
  const std::string path = fmt::format("{}/{}.gguf", dir, name);
  const Status status = writer.write(path, alignment);
  if (status.is_ok()) fmt::print("wrote {}\n", path);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} <output directory>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<Status> results;
  results.push_back(write_seed(dir, "all_value_types", all_value_types(), 32));
  results.push_back(write_seed(dir, "small_model", small_model(), 32));
  results.push_back(write_seed(dir, "small_model_align64", small_model(), 64));
  results.push_back(write_seed(dir, "small_model_align1", small_model(), 1));
  results.push_back(write_seed(dir, "empty", GgufWriter(), 32));
  for (const char* golden : {"qwen3-tiny-f32", "qwen35-tiny-f32"}) {
    GgufWriter writer;
    const Status shrunk = shrink_golden(fmt::format("{}/{}.gguf", REWIND_TEST_DATA, golden), &writer);
    results.push_back(shrunk.is_ok() ? write_seed(dir, fmt::format("{}-shrunk", golden), writer, 32) : shrunk);
  }
  int n_failed = 0;
  for (const Status& status : results) {
    if (status.is_ok()) continue;
    fmt::print(stderr, "{}\n", status.message());
    ++n_failed;
  }
  return n_failed == 0 ? 0 : 1;
}
