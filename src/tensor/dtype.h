// DType: every element type a GGUF tensor may have, with llama.cpp's numeric ids, and one traits table
// (block size, bytes per block, reference (de)quantizers, activation partner for dot products).
// Kernel selection lives in kernels/; this file only describes the formats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rwd::tensor {

// Values are the ggml type ids stored in GGUF tensor infos; do not renumber.
enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
};

// Reference conversions of one row of n values (n a multiple of block_size).
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct DTypeTraits {
  DType dtype;
  std::string_view name;      // as llama.cpp prints it: "q4_K", "f16", ...
  int64_t block_size;         // values per block (1 for plain types)
  size_t block_bytes;         // bytes per block
  ToFloatFn to_float;         // null when rewind cannot read this type
  FromFloatFn from_float;     // null when rewind cannot write this type
  DType vec_dot_type;         // what activations are quantized to for a dot product with this weight type
};

// Every row of the traits table.
std::span<const DTypeTraits> all_dtype_traits();

// nullptr for ids that are not ggml types at all.
const DTypeTraits* find_dtype_traits(uint32_t id);
const DTypeTraits& dtype_traits(DType dtype);

inline std::string_view dtype_name(DType dtype) { return dtype_traits(dtype).name; }

// Bytes of a row of n values; n must be a multiple of the block size.
size_t row_bytes(DType dtype, int64_t n);

// True where the type has a reference dequantizer and CPU dot-product kernels (weights rewind can run). Some
// such types are read-only: no quantizer (from_float null), so rewind never writes them (q2_K, q3_K, the
// i-quants, tq1_0, tq2_0, mxfp4).
bool is_supported_weight_type(DType dtype);

}  // namespace rwd::tensor
