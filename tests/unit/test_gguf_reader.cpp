// GgufFile: reading files written by llama.cpp's gguf-py (golden), files built byte by byte from the format
// description (RawGguf), typed getters, and rejection of malformed input (every truncation, seeded random
// mutations, and one test per validation rule, each checking that the message names what is wrong).
// links: rewind_gguf
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "unit/test_gguf_raw.h"

namespace rwd::gguf {
namespace {

using testing::kArray;
using testing::kBool;
using testing::kF32;
using testing::kF64;
using testing::kGgmlF32;
using testing::kGgmlQ8_0;
using testing::kI16;
using testing::kI32;
using testing::kI64;
using testing::kI8;
using testing::kString;
using testing::kU16;
using testing::kU32;
using testing::kU64;
using testing::kU8;
using testing::RawGguf;
using testing::small_model;

constexpr char kName[] = "bad.gguf";

Result<std::unique_ptr<GgufFile>> open_bytes(const std::vector<uint8_t>& bytes, const std::string& name = kName) {
  return GgufFile::from_bytes(bytes, name);
}

// Opening must fail with a message that names the file and contains every part.
void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<std::string_view> parts) {
  auto file = open_bytes(bytes);
  ASSERT_FALSE(file.is_ok()) << "opened, expected an error containing " << *parts.begin();
  const std::string& message = file.status().message();
  EXPECT_EQ(message.rfind(std::string(kName) + ": ", 0), 0u) << message;
  for (std::string_view part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

void expect_error_text(const Status& status, std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(status.is_ok());
  for (std::string_view part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
  }
}

// One tensor `w` at `offset`, with n_data_bytes of data after the 32-byte aligned header.
RawGguf one_tensor_file(std::initializer_list<uint64_t> ne, uint32_t type, uint64_t offset, size_t n_data_bytes) {
  RawGguf raw;
  raw.header(1, 0);
  raw.tensor_info("w", ne, type, offset);
  raw.pad(32).fill(n_data_bytes, 0);
  return raw;
}

// Calls every accessor; used on whatever a mutated file turns into.
size_t touch_everything(const GgufFile& file) {
  size_t n_touched = 0;
  for (const auto& [key, value] : file.metadata()) {
    n_touched += file.value_to_string(value).size();
    EXPECT_EQ(file.find(key), &value);
    (void)file.get_u64(key);
    (void)file.get_i64(key);
    (void)file.get_u32(key);
    (void)file.get_f32(key);
    (void)file.get_bool(key);
    (void)file.get_string(key);
    (void)file.get_string_array(key);
    (void)file.get_f32_array(key);
    (void)file.get_i64_array(key);
  }
  for (const TensorInfo& info : file.tensors()) {
    EXPECT_EQ(file.find_tensor(info.tensor.name), &info);
    EXPECT_EQ(info.n_bytes, info.tensor.n_bytes());
    if (info.n_bytes > 0) {
      const auto* data = static_cast<const uint8_t*>(info.tensor.data);
      n_touched += data[0] + data[info.n_bytes - 1];
    }
  }
  return n_touched;
}

TEST(GgufReader, GoldenQwen3) {
  auto opened = GgufFile::open(REWIND_TEST_DATA "/qwen3-tiny-f32.gguf");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.metadata().size(), 26u);
  EXPECT_EQ(file.metadata().front().first, "general.architecture");
  EXPECT_EQ(file.get_string("general.architecture").value(), "qwen3");
  EXPECT_EQ(file.get_u32("qwen3.block_count").value(), 2u);
  EXPECT_EQ(file.get_u32("qwen3.embedding_length").value(), 128u);
  EXPECT_EQ(file.get_u32("qwen3.attention.head_count_kv").value(), 2u);
  EXPECT_FLOAT_EQ(file.get_f32("qwen3.attention.layer_norm_rms_epsilon").value(), 1e-6f);
  EXPECT_EQ(file.get_f32("qwen3.rope.freq_base").value(), 1e6f);
  EXPECT_FALSE(file.get_bool("tokenizer.ggml.add_bos_token").value());

  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "\xc4\x80");  // GPT-2 byte-level mapping of byte 0 is U+0100
  EXPECT_EQ(tokens[256], "<|endoftext|>");
  const std::vector<int64_t> token_types = file.get_i64_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(token_types.size(), 512u);
  EXPECT_EQ(token_types[0], 1);
  EXPECT_TRUE(file.get_string_array("tokenizer.ggml.merges").value().empty());

  ASSERT_EQ(file.tensors().size(), 25u);
  const TensorInfo* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->tensor.dtype, tensor::DType::f32);
  EXPECT_EQ(embd->tensor.n_dims, 2);
  EXPECT_EQ(embd->tensor.ne, (std::array<int64_t, 4>{128, 512, 1, 1}));
  const TensorInfo* down = file.find_tensor("blk.1.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->tensor.ne, (std::array<int64_t, 4>{384, 128, 1, 1}));
  EXPECT_EQ(down->offset, 1903616u);
  // gguf-py pads the 13247-byte header to 13248, and the last tensor ends exactly at the end of the file.
  EXPECT_EQ(file.data_offset(), 13248u);
  EXPECT_EQ(file.data_offset() + down->offset + down->n_bytes, file.file_bytes());
  EXPECT_EQ(static_cast<const uint8_t*>(down->tensor.data),
            static_cast<const uint8_t*>(embd->tensor.data) + down->offset);
  EXPECT_EQ(file.find_tensor("blk.2.ffn_down.weight"), nullptr);
}

TEST(GgufReader, GoldenQwen35) {
  auto opened = GgufFile::open(REWIND_TEST_DATA "/qwen35-tiny-f32.gguf");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.get_string("general.architecture").value(), "qwen35");
  EXPECT_EQ(file.metadata().size(), 35u);
  EXPECT_EQ(file.tensors().size(), 71u);
  EXPECT_EQ(file.get_u32("qwen35.ssm.conv_kernel").value(), 4u);
  EXPECT_EQ(file.get_u32("qwen35.nextn_predict_layers").value(), 1u);
  EXPECT_EQ(file.get_i64_array("qwen35.rope.dimension_sections").value(), (std::vector<int64_t>{3, 3, 2, 0}));
  const TensorInfo* ssm_a = file.find_tensor("blk.0.ssm_a");
  ASSERT_NE(ssm_a, nullptr);
  EXPECT_EQ(ssm_a->tensor.n_dims, 1);
  EXPECT_EQ(ssm_a->tensor.ne[0], 4);
  const TensorInfo* conv = file.find_tensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->tensor.ne, (std::array<int64_t, 4>{4, 256, 1, 1}));
  const TensorInfo* eh_proj = file.find_tensor("blk.4.nextn.eh_proj.weight");
  ASSERT_NE(eh_proj, nullptr);
  EXPECT_EQ(eh_proj->tensor.ne, (std::array<int64_t, 4>{256, 128, 1, 1}));
  EXPECT_EQ(file.value_to_string(*file.find("qwen35.rope.dimension_sections")), "[3, 3, 2, 0]");
  EXPECT_EQ(file.value_to_string(*file.find("general.architecture")), "\"qwen35\"");
  const TensorInfo& last = file.tensors().back();
  EXPECT_EQ(file.data_offset() + last.offset + last.n_bytes, file.file_bytes());
}

TEST(GgufReader, OpenMissingFileNamesPath) {
  auto file = GgufFile::open("/nonexistent/dir/model.gguf");
  expect_error_text(file.status(), {"/nonexistent/dir/model.gguf"});
}

TEST(GgufReader, SmallValidFile) {
  const RawGguf raw = small_model();
  auto opened = open_bytes(raw.bytes);
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens").value(), (std::vector<std::string>{"a", "bc", ""}));
  ASSERT_EQ(file.tensors().size(), 2u);
  const tensor::Tensor& q = file.tensors()[0].tensor;
  EXPECT_EQ(q.name, "blk.0.attn_q.weight");
  EXPECT_EQ(q.ne, (std::array<int64_t, 4>{3, 5, 1, 1}));
  EXPECT_EQ(static_cast<const uint8_t*>(q.data)[0], 1);
  const tensor::Tensor& embd = file.tensors()[1].tensor;
  EXPECT_EQ(embd.dtype, tensor::DType::q8_0);
  EXPECT_EQ(file.tensors()[1].n_bytes, 68u);
  EXPECT_EQ(static_cast<const uint8_t*>(embd.data)[0], 100);
  EXPECT_EQ(static_cast<const uint8_t*>(embd.data) + 68, raw.bytes.data() + raw.size());
}

TEST(GgufReader, AllValueTypes) {
  RawGguf raw;
  raw.header(0, 26);
  raw.key("t.u8", kU8).put<uint8_t>(200);
  raw.key("t.i8", kI8).put<int8_t>(-5);
  raw.key("t.u16", kU16).put<uint16_t>(60000);
  raw.key("t.i16", kI16).put<int16_t>(-300);
  raw.key("t.u32", kU32).put<uint32_t>(4000000000u);
  raw.key("t.i32", kI32).put<int32_t>(-7);
  raw.key("t.f32", kF32).put<float>(1.5f);
  raw.key("t.bool", kBool).put<uint8_t>(1);
  raw.key("t.string", kString).str("h\xc3\xa9llo");
  raw.key("t.u64", kU64).put<uint64_t>(1ull << 40);
  raw.key("t.i64", kI64).put<int64_t>(-(1ll << 40));
  raw.key("t.f64", kF64).put<double>(0.25);
  raw.array_header("a.u8", kU8, 3).put<uint8_t>(1).put<uint8_t>(2).put<uint8_t>(255);
  raw.array_header("a.i8", kI8, 2).put<int8_t>(-1).put<int8_t>(127);
  raw.array_header("a.u16", kU16, 1).put<uint16_t>(65535);
  raw.array_header("a.i16", kI16, 2).put<int16_t>(-32768).put<int16_t>(3);
  raw.array_header("a.u32", kU32, 2).put<uint32_t>(7).put<uint32_t>(4294967295u);
  raw.array_header("a.i32", kI32, 10);
  for (int32_t i = 0; i < 10; ++i) raw.put<int32_t>(i - 3);
  raw.array_header("a.f32", kF32, 2).put<float>(-2.5f).put<float>(3.0f);
  raw.array_header("a.bool", kBool, 2).put<uint8_t>(0).put<uint8_t>(1);
  raw.array_header("a.string", kString, 2).str("x").str("yz");
  raw.array_header("a.u64", kU64, 1).put<uint64_t>((1ull << 63) + 1);
  raw.array_header("a.i64", kI64, 2).put<int64_t>(-9).put<int64_t>(1ll << 50);
  raw.array_header("a.f64", kF64, 1).put<double>(-0.125);
  raw.array_header("a.empty", kI32, 0);
  raw.key("t.empty_string", kString).str("");

  auto opened = open_bytes(raw.bytes, "types.gguf");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;
  ASSERT_EQ(file.metadata().size(), 26u);
  EXPECT_EQ(file.metadata()[3].first, "t.i16");
  EXPECT_TRUE(file.tensors().empty());

  // Integer getters convert between widths when the value fits.
  EXPECT_EQ(file.get_u32("t.u8").value(), 200u);
  EXPECT_EQ(file.get_i64("t.i8").value(), -5);
  EXPECT_EQ(file.get_u64("t.u16").value(), 60000u);
  EXPECT_EQ(file.get_i64("t.i16").value(), -300);
  EXPECT_EQ(file.get_u64("t.u32").value(), 4000000000u);
  EXPECT_EQ(file.get_i64("t.u32").value(), 4000000000);
  EXPECT_EQ(file.get_i64("t.i32").value(), -7);
  EXPECT_EQ(file.get_u64("t.u64").value(), 1ull << 40);
  EXPECT_EQ(file.get_i64("t.u64").value(), 1ll << 40);
  EXPECT_EQ(file.get_i64("t.i64").value(), -(1ll << 40));
  expect_error_text(file.get_u32("t.i8").status(), {"types.gguf", "'t.i8'", "-5 (int8)", "does not fit in uint32"});
  expect_error_text(file.get_u32("t.u64").status(), {"'t.u64'", "1099511627776 (uint64)", "uint32"});
  expect_error_text(file.get_u64("t.i64").status(), {"'t.i64'", "-1099511627776 (int64)", "uint64"});

  EXPECT_EQ(file.get_f32("t.f32").value(), 1.5f);
  EXPECT_EQ(file.get_f32("t.f64").value(), 0.25f);
  EXPECT_TRUE(file.get_bool("t.bool").value());
  EXPECT_EQ(file.get_string("t.string").value(), "h\xc3\xa9llo");
  EXPECT_EQ(file.get_string("t.empty_string").value(), "");

  EXPECT_EQ(file.get_i64_array("a.u8").value(), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(file.get_i64_array("a.i8").value(), (std::vector<int64_t>{-1, 127}));
  EXPECT_EQ(file.get_i64_array("a.u16").value(), (std::vector<int64_t>{65535}));
  EXPECT_EQ(file.get_i64_array("a.i16").value(), (std::vector<int64_t>{-32768, 3}));
  EXPECT_EQ(file.get_i64_array("a.u32").value(), (std::vector<int64_t>{7, 4294967295}));
  EXPECT_EQ(file.get_i64_array("a.i32").value(), (std::vector<int64_t>{-3, -2, -1, 0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(file.get_i64_array("a.i64").value(), (std::vector<int64_t>{-9, 1ll << 50}));
  EXPECT_TRUE(file.get_i64_array("a.empty").value().empty());
  expect_error_text(file.get_i64_array("a.u64").status(), {"'a.u64'", "element 0", "9223372036854775809"});
  EXPECT_EQ(file.get_f32_array("a.f32").value(), (std::vector<float>{-2.5f, 3.0f}));
  EXPECT_EQ(file.get_f32_array("a.f64").value(), (std::vector<float>{-0.125f}));
  EXPECT_EQ(file.get_string_array("a.string").value(), (std::vector<std::string>{"x", "yz"}));

  const Value* array = file.find("a.i32");
  ASSERT_NE(array, nullptr);
  EXPECT_EQ(array->type, ValueType::array);
  EXPECT_EQ(array->element_type, ValueType::int32);
  EXPECT_EQ(array->count, 10u);
  EXPECT_EQ(file.find("t.string")->count, 6u);

  const auto text = [&](std::string_view key) { return file.value_to_string(*file.find(key)); };
  EXPECT_EQ(text("t.u8"), "200");
  EXPECT_EQ(text("t.i16"), "-300");
  EXPECT_EQ(text("t.f32"), "1.5");
  EXPECT_EQ(text("t.bool"), "true");
  EXPECT_EQ(text("t.string"), "\"h\xc3\xa9llo\"");
  EXPECT_EQ(text("t.f64"), "0.25");
  EXPECT_EQ(text("a.bool"), "[false, true]");
  EXPECT_EQ(text("a.string"), "[\"x\", \"yz\"]");
  EXPECT_EQ(text("a.i32"), "[-3, -2, -1, 0, 1, 2, 3, 4, ... 2 more]");
  EXPECT_EQ(file.value_to_string(*array, 0), "[... 10 more]");
  EXPECT_EQ(text("a.empty"), "[]");
}

TEST(GgufReader, GettersNameKeyAndTypes) {
  RawGguf raw;
  raw.header(0, 4);
  raw.kv_string("s", "text");
  raw.kv_u32("n", 5);
  raw.array_header("list", kI32, 1).put<int32_t>(1);
  raw.array_header("names", kString, 1).str("a");
  auto opened = open_bytes(raw.bytes, "model.gguf");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  const GgufFile& file = **opened;

  expect_error_text(file.get_u32("qwen35.block_count").status(),
                    {"model.gguf", "'qwen35.block_count'", "not found"});
  expect_error_text(file.get_u32("s").status(), {"model.gguf", "key 's'", "expected uint32, found string"});
  expect_error_text(file.get_u64("list").status(), {"key 'list'", "expected uint64, found array<int32>"});
  expect_error_text(file.get_i64("s").status(), {"expected int64, found string"});
  expect_error_text(file.get_f32("n").status(), {"key 'n'", "expected float32, found uint32"});
  expect_error_text(file.get_bool("n").status(), {"expected bool, found uint32"});
  expect_error_text(file.get_string("n").status(), {"expected string, found uint32"});
  expect_error_text(file.get_string_array("list").status(), {"expected array<string>, found array<int32>"});
  expect_error_text(file.get_string_array("s").status(), {"expected array<string>, found string"});
  expect_error_text(file.get_f32_array("names").status(), {"expected array<float32>, found array<string>"});
  expect_error_text(file.get_i64_array("n").status(), {"expected array<int64>, found uint32"});
  expect_error_text(file.get_string_array("missing").status(), {"'missing'", "not found"});

  EXPECT_EQ(file.get_u32_or("missing", 7).value(), 7u);
  EXPECT_EQ(file.get_u32_or("n", 7).value(), 5u);
  EXPECT_EQ(file.get_f32_or("missing", 0.5f).value(), 0.5f);
  EXPECT_TRUE(file.get_bool_or("missing", true).value());
  EXPECT_EQ(file.get_string_or("missing", "fallback").value(), "fallback");
  EXPECT_EQ(file.get_string_or("s", "fallback").value(), "text");
  // A present key of the wrong type is an error even with a fallback.
  expect_error_text(file.get_u32_or("s", 7).status(), {"key 's'", "expected uint32"});
  expect_error_text(file.get_f32_or("s", 0.5f).status(), {"expected float32"});
  expect_error_text(file.get_bool_or("n", true).status(), {"expected bool"});
  expect_error_text(file.get_string_or("n", "x").status(), {"expected string"});
  EXPECT_FALSE(file.has("missing"));
  EXPECT_TRUE(file.has("names"));
}

TEST(GgufReader, Version2IsRead) {
  RawGguf raw;
  raw.header(0, 1, 2);
  raw.kv_u32("n", 1);
  auto file = open_bytes(raw.bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->version(), 2u);
}

TEST(GgufReader, NoTensorsAndNoPaddingIsValid) {
  RawGguf raw;
  raw.header(0, 1);
  raw.kv_u32("n", 1);
  auto file = open_bytes(raw.bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_LE((*file)->data_offset(), raw.size());
}

TEST(GgufReader, RejectsEveryTruncation) {
  const RawGguf raw = small_model();
  ASSERT_TRUE(open_bytes(raw.bytes).is_ok());
  for (size_t n = 0; n < raw.size(); ++n) {
    // A copy of exactly n bytes, so a sanitizer build catches any read past the end.
    const std::vector<uint8_t> prefix(raw.bytes.begin(), raw.bytes.begin() + static_cast<ptrdiff_t>(n));
    auto file = open_bytes(prefix);
    ASSERT_FALSE(file.is_ok()) << "truncated to " << n << " of " << raw.size() << " bytes opened";
    EXPECT_EQ(file.status().message().rfind("bad.gguf: ", 0), 0u) << file.status().message();
  }
}

TEST(GgufReader, RandomMutationsNeverCrash) {
  const RawGguf raw = small_model();
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull);
  int n_opened = 0;
  int n_rejected = 0;
  size_t n_touched = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> bytes = raw.bytes;
    const int n_mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mutations; ++m) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 6) {
        case 0: bytes[at] = static_cast<uint8_t>(rng()); break;
        case 1: bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 2: bytes[at] = 0xff; break;
        case 3: bytes[at] = 0; break;
        case 4: bytes[at] = static_cast<uint8_t>(bytes[at] + 1 + rng() % 4); break;
        default: bytes.resize(at + 1); break;
      }
    }
    auto file = open_bytes(bytes, "mut.gguf");
    if (file.is_ok()) {
      ++n_opened;
      n_touched += touch_everything(**file);
    } else {
      ++n_rejected;
      ASSERT_EQ(file.status().message().rfind("mut.gguf: ", 0), 0u) << file.status().message();
    }
  }
  // Mutations of data bytes leave a valid file; mutations of the header mostly do not.
  EXPECT_GT(n_opened, 1000);
  EXPECT_GT(n_rejected, 1000);
  EXPECT_GT(n_touched, 0u);
}

TEST(GgufReader, RejectsBadMagicAndVersions) {
  RawGguf raw = small_model();
  raw.bytes[0] = 'g';
  expect_error(raw.bytes, {"not a GGUF file", "67 47 55 46", "expected 47 47 55 46"});

  for (const auto& [version, part] : std::vector<std::pair<uint32_t, std::string_view>>{
           {1, "version 1 (32-bit counts) is not supported"},
           {0, "unsupported GGUF version 0; expected 2 or 3"},
           {4, "unsupported GGUF version 4; expected 2 or 3"},
           {0x03000000, "big-endian"}}) {
    RawGguf versioned;
    versioned.header(0, 0, version);
    expect_error(versioned.bytes, {part});
  }
  expect_error({}, {"magic: needs 4 bytes at offset 0 but the file ends at 0"});
}

TEST(GgufReader, RejectsHugeCounts) {
  RawGguf kv;
  kv.header(0, UINT64_MAX);
  expect_error(kv.bytes, {"metadata count 18446744073709551615 cannot fit"});
  RawGguf tensors;
  tensors.header(UINT64_MAX, 0);
  expect_error(tensors.bytes, {"tensor count 18446744073709551615 cannot fit"});
  RawGguf many_tensors;  // plausible-looking but still more than the bytes could hold
  many_tensors.header(1000, 0).fill(64, 0);
  expect_error(many_tensors.bytes, {"tensor count 1000 cannot fit in the 64 bytes"});

  RawGguf key_length;
  key_length.header(0, 1).put<uint64_t>(UINT64_MAX - 3).fill(16, 'a');
  expect_error(key_length.bytes, {"metadata entry 0 of 1: key", "string length 18446744073709551612", "exceeds"});
  RawGguf value_length;
  value_length.header(0, 1).key("s", kString).put<uint64_t>(1ull << 40).fill(16, 'a');
  expect_error(value_length.bytes, {"key 's'", "string length 1099511627776"});
  RawGguf array_count;
  array_count.header(0, 1).array_header("a", kF32, 1ull << 62).fill(16, 0);
  expect_error(array_count.bytes, {"key 'a'", "array of 4611686018427387904 float32 elements", "bytes left"});
  RawGguf string_array_count;
  string_array_count.header(0, 1).array_header("a", kString, UINT64_MAX).fill(16, 0);
  expect_error(string_array_count.bytes, {"key 'a'", "array of 18446744073709551615 strings"});
  RawGguf string_in_array;
  string_in_array.header(0, 1).array_header("a", kString, 2).str("ok").put<uint64_t>(100).fill(8, 'x');
  expect_error(string_in_array.bytes, {"key 'a'", "string 1 of 2", "string length 100"});
}

TEST(GgufReader, RejectsBadValues) {
  RawGguf unknown_type;
  unknown_type.header(0, 1).key("k", 13).put<uint32_t>(0);
  expect_error(unknown_type.bytes, {"key 'k'", "unknown value type 13", "expected 0..12"});
  RawGguf unknown_element;
  unknown_element.header(0, 1).array_header("k", 99, 1).put<uint32_t>(0);
  expect_error(unknown_element.bytes, {"key 'k'", "unknown value type 99"});
  RawGguf nested;
  nested.header(0, 1).array_header("k", kArray, 1).put<uint32_t>(kU8).put<uint64_t>(0);
  expect_error(nested.bytes, {"key 'k'", "arrays of arrays"});
  RawGguf bad_bool;
  bad_bool.header(0, 1).key("b", kBool).put<uint8_t>(2);
  expect_error(bad_bool.bytes, {"key 'b'", "is 2 (expected 0 or 1)"});
  RawGguf bad_bool_array;
  bad_bool_array.header(0, 1).array_header("b", kBool, 2).put<uint8_t>(1).put<uint8_t>(7);
  expect_error(bad_bool_array.bytes, {"key 'b'", "element 1 is 7"});
  RawGguf empty_key;
  empty_key.header(0, 1).kv_u32("", 1);
  expect_error(empty_key.bytes, {"metadata entry 0 of 1: key is empty"});
  RawGguf bad_utf8;
  bad_utf8.header(0, 1).kv_u32("k\xc0\xaf", 1);
  expect_error(bad_utf8.bytes, {"not valid UTF-8", "k\\xc0\\xaf"});
  RawGguf duplicate;
  duplicate.header(0, 3).kv_u32("a.b", 1).kv_u32("c", 2).kv_string("a.b", "x");
  expect_error(duplicate.bytes, {"metadata entry 2 of 3", "duplicate key 'a.b'", "entry 0"});
}

TEST(GgufReader, KeysAndNamesMustBeUtf8) {
  for (const std::string_view key : {"\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", "emoji.\xf0\x9f\x98\x80", "\xef\xbf\xbf"}) {
    RawGguf raw;
    raw.header(1, 1).kv_u32(key, 1).tensor_info(key, {8}, kGgmlF32, 0).pad(32).fill(32, 0);
    auto file = open_bytes(raw.bytes);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    EXPECT_TRUE((*file)->has(key));
    EXPECT_NE((*file)->find_tensor(key), nullptr);
  }
  // Overlong, surrogate, above U+10FFFF, truncated, stray continuation byte.
  for (const std::string_view key : {"\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ab\xe2\x82",
                                     "\x80", "\xf8\x88\x80\x80\x80"}) {
    RawGguf raw;
    raw.header(0, 1).kv_u32(key, 1);
    expect_error(raw.bytes, {"metadata entry 0 of 1", "is not valid UTF-8"});
  }
}

TEST(GgufReader, RejectsBadAlignment) {
  for (const uint32_t alignment : {0u, 3u, 48u}) {
    RawGguf raw;
    raw.header(0, 1).kv_u32("general.alignment", alignment);
    expect_error(raw.bytes, {"'general.alignment'", fmt::format("alignment {} is not", alignment)});
  }
  RawGguf wrong_type;
  wrong_type.header(0, 1).kv_string("general.alignment", "64");
  expect_error(wrong_type.bytes, {"'general.alignment'", "expected uint32, found string"});
  RawGguf wrong_width;
  wrong_width.header(0, 1).key("general.alignment", kU64).put<uint64_t>(64);
  expect_error(wrong_width.bytes, {"'general.alignment'", "expected uint32, found uint64"});

  // With alignment 64 an offset of 32 is misaligned.
  RawGguf misaligned;
  misaligned.header(1, 1).kv_u32("general.alignment", 64);
  misaligned.tensor_info("w", {8}, kGgmlF32, 32).pad(64).fill(64, 0);
  expect_error(misaligned.bytes, {"tensor 'w'", "data offset 32 is not a multiple of the alignment 64"});

  RawGguf aligned;
  aligned.header(1, 1).kv_u32("general.alignment", 64);
  aligned.tensor_info("w", {8}, kGgmlF32, 64).pad(64).fill(96, 0);
  auto file = open_bytes(aligned.bytes);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ((*file)->data_offset() % 64, 0u);
}

TEST(GgufReader, RejectsBadTensorInfos) {
  expect_error(one_tensor_file({8}, 4, 0, 64).bytes, {"tensor 'w'", "unknown ggml type id 4"});
  expect_error(one_tensor_file({8}, 1000, 0, 64).bytes, {"unknown ggml type id 1000"});
  expect_error(one_tensor_file({33, 2}, kGgmlQ8_0, 0, 128).bytes,
               {"tensor 'w'", "ne[0] = 33 is not a multiple of the q8_0 block size 32"});
  expect_error(one_tensor_file({8, 0}, kGgmlF32, 0, 64).bytes, {"tensor 'w'", "ne[1] is 0"});
  expect_error(one_tensor_file({1ull << 63}, kGgmlF32, 0, 64).bytes, {"ne[0] is 9223372036854775808"});
  expect_error(one_tensor_file({1ull << 32, 1ull << 32}, kGgmlF32, 0, 64).bytes,
               {"tensor 'w'", "element count of shape [4294967296, 4294967296] overflows"});
  expect_error(one_tensor_file({1ull << 31, 1ull << 31}, kGgmlF32, 0, 64).bytes,
               {"needs more bytes than the whole file"});
  expect_error(one_tensor_file({8}, kGgmlF32, 4, 64).bytes,
               {"tensor 'w'", "data offset 4 is not a multiple of the alignment 32"});
  expect_error(one_tensor_file({8}, kGgmlF32, UINT64_MAX - 31, 64).bytes, {"tensor 'w'", "overflows 64 bits"});

  for (const uint32_t n_dims : {0u, 5u}) {
    RawGguf raw;
    raw.header(1, 0).str("w").put<uint32_t>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) raw.put<uint64_t>(1);
    raw.put<uint32_t>(kGgmlF32).put<uint64_t>(0).pad(32).fill(32, 0);
    expect_error(raw.bytes, {"tensor 'w'", fmt::format("n_dims is {} (expected 1..4)", n_dims)});
  }
  RawGguf empty_name;
  empty_name.header(1, 0).tensor_info("", {8}, kGgmlF32, 0).pad(32).fill(32, 0);
  expect_error(empty_name.bytes, {"tensor info 0 of 1: name is empty"});
  RawGguf bad_name;
  bad_name.header(1, 0).tensor_info("w\xff", {8}, kGgmlF32, 0).pad(32).fill(32, 0);
  expect_error(bad_name.bytes, {"tensor info 0 of 1", "not valid UTF-8"});
}

TEST(GgufReader, RejectsBadDataRanges) {
  // 16 f32 values need 64 bytes; only 32 follow the 64-byte aligned header.
  const RawGguf short_data = one_tensor_file({16}, kGgmlF32, 0, 32);
  ASSERT_EQ(short_data.size(), 96u);
  expect_error(short_data.bytes, {"tensor 'w'", "data [64, 128) extends past the end of the file (96 bytes)"});
  expect_error(one_tensor_file({8}, kGgmlF32, 64, 64).bytes, {"data [128, 160) extends past the end"});

  RawGguf no_data;  // ends right after the tensor infos, before the padding
  no_data.header(1, 0).tensor_info("w", {8}, kGgmlF32, 0);
  expect_error(no_data.bytes, {"data section starts at 64", "beyond the end of the file (57 bytes)"});

  RawGguf overlap;
  overlap.header(2, 0);
  overlap.tensor_info("a", {16}, kGgmlF32, 0).tensor_info("b", {16}, kGgmlF32, 32).pad(32).fill(96, 0);
  expect_error(overlap.bytes, {"tensor 'b'", "data [32, 96) overlaps tensor 'a' at [0, 64)"});
  RawGguf same_offset;
  same_offset.header(2, 0);
  same_offset.tensor_info("a", {8}, kGgmlF32, 0).tensor_info("b", {8}, kGgmlF32, 0).pad(32).fill(32, 0);
  expect_error(same_offset.bytes, {"overlaps tensor"});

  RawGguf duplicate;
  duplicate.header(2, 0);
  duplicate.tensor_info("w", {8}, kGgmlF32, 0).tensor_info("w", {8}, kGgmlF32, 32).pad(32).fill(64, 0);
  expect_error(duplicate.bytes, {"tensor 'w'", "duplicate name", "tensor info 0"});

  // Out of order but disjoint is fine.
  RawGguf reordered;
  reordered.header(2, 0);
  reordered.tensor_info("a", {8}, kGgmlF32, 32).tensor_info("b", {8}, kGgmlF32, 0).pad(32).fill(64, 0);
  EXPECT_TRUE(open_bytes(reordered.bytes).is_ok());
}

}  // namespace
}  // namespace rwd::gguf
