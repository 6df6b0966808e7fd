// GgufWriter: byte-exact encoding against a file built field by field from the format description (RawGguf),
// write → read round trips of every setter and several tensor types and alignments, copying the metadata and
// tensors of a llama.cpp-written file, and the REWIND_CHECKs on programming errors.
// links: rewind_gguf
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "unit/test_gguf_raw.h"

namespace rwd::gguf {
namespace {

using tensor::DType;

std::vector<uint8_t> random_bytes(size_t n_bytes, std::mt19937& rng) {
  std::vector<uint8_t> bytes(n_bytes);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(rng());
  return bytes;
}

std::vector<uint8_t> counting_bytes(size_t n_bytes, uint8_t first) {
  std::vector<uint8_t> bytes(n_bytes);
  for (size_t i = 0; i < n_bytes; ++i) bytes[i] = static_cast<uint8_t>(first + i);
  return bytes;
}

TEST(GgufWriter, MatchesFieldByFieldEncoding) {
  GgufWriter writer;
  writer.set_string("general.architecture", "tiny");
  writer.set_u32("tiny.block_count", 3);
  writer.set_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
  writer.set_f32("tiny.rope.freq_base", 10000.0f);
  writer.add_tensor("blk.0.attn_q.weight", DType::f32, {5, 3}, counting_bytes(60, 1));
  writer.add_tensor("token_embd.weight", DType::q8_0, {2, 32}, counting_bytes(68, 100));

  testing::RawGguf expected = testing::small_model();
  expected.pad(32);  // the writer also pads after the last tensor
  EXPECT_EQ(writer.to_bytes(), expected.bytes);
}

class GgufWriterRoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufWriterRoundTrip, EverySetterAndSeveralTensorTypes) {
  const uint32_t alignment = GetParam();
  std::mt19937 rng(1234 + alignment);
  GgufWriter writer;
  writer.set_u32("k.u32", 4000000000u);
  writer.set_i32("k.i32", -123456);
  writer.set_u64("k.u64", (1ull << 50) + 3);
  writer.set_f32("k.f32", -0.3f);
  writer.set_bool("k.true", true);
  writer.set_bool("k.false", false);
  writer.set_string("k.string", "multi\nline \xe2\x9c\x93");
  writer.set_string("k.empty", "");
  writer.set_string_array("k.strings", {"", "x", std::string(300, 'y')});
  writer.set_f32_array("k.f32s", {1.0f, -2.5f, 1e-7f});
  writer.set_i32_array("k.i32s", {-1, 0, 2147483647});
  writer.set_string_array("k.no_strings", {});

  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;  // outermost first
    size_t n_bytes;
  };
  const std::vector<Spec> specs = {
      {"f32", DType::f32, {3, 7}, 3 * 7 * 4},
      {"f16", DType::f16, {2, 3, 5}, 2 * 3 * 5 * 2},
      {"q8_0", DType::q8_0, {3, 64}, 3 * 2 * 34},
      {"q4_k", DType::q4_k, {1, 256}, 144},
      {"bf16", DType::bf16, {2, 1, 3, 4}, 2 * 1 * 3 * 4 * 2},
      {"one", DType::f32, {1}, 4},
  };
  std::vector<std::vector<uint8_t>> data;
  for (const Spec& spec : specs) {
    data.push_back(random_bytes(spec.n_bytes, rng));
    writer.add_tensor(spec.name, spec.dtype, spec.shape, data.back());
  }

  const std::vector<uint8_t> bytes = writer.to_bytes(alignment);
  EXPECT_EQ(bytes.size() % alignment, 0u);
  auto opened = GgufFile::from_bytes(bytes, "round.gguf");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), alignment);
  // general.alignment is written only when it is not the default.
  EXPECT_EQ(file.has("general.alignment"), alignment != 32);
  if (alignment != 32) {
    EXPECT_EQ(file.get_u32("general.alignment").value(), alignment);
  }
  EXPECT_EQ(file.metadata().size(), alignment != 32 ? 13u : 12u);
  EXPECT_EQ(file.metadata()[0].first, "k.u32");

  EXPECT_EQ(file.find("k.u32")->type, ValueType::uint32);
  EXPECT_EQ(file.get_u32("k.u32").value(), 4000000000u);
  EXPECT_EQ(file.find("k.i32")->type, ValueType::int32);
  EXPECT_EQ(file.get_i64("k.i32").value(), -123456);
  EXPECT_EQ(file.find("k.u64")->type, ValueType::uint64);
  EXPECT_EQ(file.get_u64("k.u64").value(), (1ull << 50) + 3);
  EXPECT_EQ(file.get_f32("k.f32").value(), -0.3f);
  EXPECT_TRUE(file.get_bool("k.true").value());
  EXPECT_FALSE(file.get_bool("k.false").value());
  EXPECT_EQ(file.get_string("k.string").value(), "multi\nline \xe2\x9c\x93");
  EXPECT_EQ(file.get_string("k.empty").value(), "");
  EXPECT_EQ(file.get_string_array("k.strings").value(), (std::vector<std::string>{"", "x", std::string(300, 'y')}));
  EXPECT_EQ(file.get_f32_array("k.f32s").value(), (std::vector<float>{1.0f, -2.5f, 1e-7f}));
  EXPECT_EQ(file.find("k.i32s")->element_type, ValueType::int32);
  EXPECT_EQ(file.get_i64_array("k.i32s").value(), (std::vector<int64_t>{-1, 0, 2147483647}));
  EXPECT_TRUE(file.get_string_array("k.no_strings").value().empty());

  ASSERT_EQ(file.tensors().size(), specs.size());
  EXPECT_EQ(file.data_offset() % alignment, 0u);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorInfo& info = file.tensors()[i];
    SCOPED_TRACE(specs[i].name);
    EXPECT_EQ(info.tensor.name, specs[i].name);
    EXPECT_EQ(info.tensor.dtype, specs[i].dtype);
    ASSERT_EQ(info.tensor.n_dims, static_cast<int>(specs[i].shape.size()));
    for (int d = 0; d < 4; ++d) {
      const int64_t expected = d < info.tensor.n_dims ? specs[i].shape[specs[i].shape.size() - 1 - d] : 1;
      EXPECT_EQ(info.tensor.ne[d], expected) << "ne[" << d << "]";
    }
    EXPECT_EQ(info.offset % alignment, 0u);
    EXPECT_EQ(static_cast<size_t>(static_cast<const uint8_t*>(info.tensor.data) - bytes.data()) % alignment, 0u);
    ASSERT_EQ(info.n_bytes, data[i].size());
    EXPECT_EQ(std::memcmp(info.tensor.data, data[i].data(), data[i].size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufWriterRoundTrip, ::testing::Values(32u, 1u, 8u, 64u, 4096u));

TEST(GgufWriter, SettingAKeyAgainReplacesItInPlace) {
  GgufWriter writer;
  writer.set_u32("a", 1);
  writer.set_u32("b", 2);
  writer.set_string("a", "x");
  const std::vector<uint8_t> bytes = writer.to_bytes();
  auto file = GgufFile::from_bytes(bytes, "replace.gguf");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  ASSERT_EQ((*file)->metadata().size(), 2u);
  EXPECT_EQ((*file)->metadata()[0].first, "a");
  EXPECT_EQ((*file)->get_string("a").value(), "x");
  EXPECT_EQ((*file)->get_u32("b").value(), 2u);
}

TEST(GgufWriter, ExplicitAlignmentKeyIsKept) {
  GgufWriter writer;
  writer.set_u32("general.alignment", 64);
  writer.add_tensor("w", DType::f32, {3}, std::vector<uint8_t>(12, 7));
  const std::vector<uint8_t> bytes = writer.to_bytes(64);
  auto file = GgufFile::from_bytes(bytes, "aligned.gguf");
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->metadata().size(), 1u);
  EXPECT_EQ((*file)->alignment(), 64u);
}

// Copies the metadata and tensors of a file written by llama.cpp's gguf-py and reads the copy back.
TEST(GgufWriter, CopiesGoldenFile) {
  auto golden = GgufFile::open(REWIND_TEST_DATA "/qwen35-tiny-f32.gguf");
  ASSERT_TRUE(golden.is_ok()) << golden.status().message();
  const GgufFile& original = **golden;
  GgufWriter writer;
  for (const auto& [key, value] : original.metadata()) writer.set_value(key, value);
  for (const TensorInfo& info : original.tensors()) {
    std::vector<int64_t> shape(info.tensor.ne.rbegin() + (4 - info.tensor.n_dims), info.tensor.ne.rend());
    const auto* begin = static_cast<const uint8_t*>(info.tensor.data);
    writer.add_tensor(info.tensor.name, info.tensor.dtype, shape, std::vector<uint8_t>(begin, begin + info.n_bytes));
  }
  const std::vector<uint8_t> bytes = writer.to_bytes();
  // gguf-py and this writer lay the file out identically.
  ASSERT_EQ(bytes.size(), original.file_bytes());
  auto mapped = MappedFile::open(REWIND_TEST_DATA "/qwen35-tiny-f32.gguf");
  ASSERT_TRUE(mapped.is_ok());
  EXPECT_EQ(std::memcmp(bytes.data(), (*mapped)->bytes().data(), bytes.size()), 0);

  auto copied = GgufFile::from_bytes(bytes, "copy.gguf");
  ASSERT_TRUE(copied.is_ok()) << copied.status().message();
  const GgufFile& copy = **copied;
  ASSERT_EQ(copy.metadata().size(), original.metadata().size());
  for (size_t i = 0; i < copy.metadata().size(); ++i) {
    const auto& [key, value] = copy.metadata()[i];
    const Value& source = original.metadata()[i].second;
    EXPECT_EQ(key, original.metadata()[i].first);
    EXPECT_EQ(value.type, source.type);
    EXPECT_EQ(value.count, source.count);
    EXPECT_EQ(copy.value_to_string(value, 1000), original.value_to_string(source, 1000)) << key;
  }
  EXPECT_EQ(copy.get_string_array("tokenizer.ggml.tokens").value(),
            original.get_string_array("tokenizer.ggml.tokens").value());
}

TEST(GgufWriter, WritesFileThatOpens) {
  const std::string path = ::testing::TempDir() + "/rewind_gguf_writer_test.gguf";
  GgufWriter writer;
  writer.set_string("general.architecture", "tiny");
  writer.add_tensor("w", DType::f32, {2, 3}, counting_bytes(24, 9));
  ASSERT_TRUE(writer.write(path).is_ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->path(), path);
  EXPECT_EQ((*file)->get_string("general.architecture").value(), "tiny");
  const TensorInfo* w = (*file)->find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(w->tensor.data)[23], 9 + 23);
  std::remove(path.c_str());

  const Status failed = writer.write("/nonexistent/dir/out.gguf");
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.message().find("/nonexistent/dir/out.gguf"), std::string::npos) << failed.message();
}

TEST(GgufWriterDeathTest, ProgrammingErrorsAreChecked) {
  GgufWriter writer;
  EXPECT_DEATH(writer.add_tensor("w", DType::f32, {3}, std::vector<uint8_t>(11)), "11 data bytes, expected 12");
  EXPECT_DEATH(writer.add_tensor("w", DType::q8_0, {2, 33}, std::vector<uint8_t>(68)), "block size 32");
  EXPECT_DEATH(writer.add_tensor("w", DType::f32, {}, {}), "0 dims");
  EXPECT_DEATH((void)writer.to_bytes(48), "alignment 48 is not a power of two");
  writer.add_tensor("w", DType::f32, {1}, std::vector<uint8_t>(4));
  EXPECT_DEATH(writer.add_tensor("w", DType::f32, {1}, std::vector<uint8_t>(4)), "added twice");
}

}  // namespace
}  // namespace rwd::gguf
