// Internal to kernels/cpu: the sizes of the packed layouts (described in packed_weights.cpp), shared by the
// packer and the kernels that read them, and the kernels' signature.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

namespace packed {
inline constexpr size_t kQ4KScaleBytes = 3 * 64;
inline constexpr size_t kQ4KBodyBytes = kQ4KScaleBytes + 32 * 64;
inline constexpr size_t kQ4KFactorBytes = 64;
inline constexpr size_t kQ4KBlockBytes = kQ4KBodyBytes + kQ4KFactorBytes;  // a body, then its factors
inline constexpr size_t kQ6KScaleBytes = 4 * 64;
inline constexpr size_t kQ6KGroupRunBytes = 3 * 64;
inline constexpr size_t kQ6KBodyBytes = kQ6KScaleBytes + 16 * kQ6KGroupRunBytes;
inline constexpr size_t kQ6KFactorBytes = 32;
inline constexpr size_t kQ8_0BodyBytes = 8 * 64;
inline constexpr size_t kQ4_0BodyBytes = 4 * 64;
inline constexpr size_t kQ5_0BodyBytes = 5 * 64;
inline constexpr size_t kBlock32FactorBytes = 32;
// Blocks of 32 go in chunks of 8: their factors, then their bodies, so a group streams in one direction.
inline constexpr int64_t kBlock32Chunk = 8;
inline constexpr size_t kBlock32ChunkFactorBytes = kBlock32Chunk * kBlock32FactorBytes;
// Where block b's body and factors start in a group of blocks of 32 with bodies of body_bytes.
inline size_t block32_chunk_offset(int64_t b, size_t body_bytes) {
  return static_cast<size_t>(b / kBlock32Chunk) * (kBlock32ChunkFactorBytes + kBlock32Chunk * body_bytes);
}
inline size_t block32_body_offset(int64_t b, size_t body_bytes) {
  return block32_chunk_offset(b, body_bytes) + kBlock32ChunkFactorBytes +
         static_cast<size_t>(b % kBlock32Chunk) * body_bytes;
}
inline size_t block32_factor_offset(int64_t b, size_t body_bytes) {
  return block32_chunk_offset(b, body_bytes) + static_cast<size_t>(b % kBlock32Chunk) * kBlock32FactorBytes;
}
}  // namespace packed

// What the blocks-of-32 kernels need of each q8_0 activation block besides its values: the sum of its 32 values
// (the packed weights are stored unsigned, value + bias, and the dot takes bias * sum back) and its scale as a
// float. Computed once per matmul, one per block of every row (block b of row a at a * blocks_per_row + b).
struct Block32ActivationTerms {
  int32_t sum;
  float scale;
};

// The activation rows of a packed matmul: q8_K rows for the k-quants; q8_0 rows and their terms for blocks of 32.
struct PackedActivations {
  const uint8_t* rows = nullptr;
  size_t row_bytes = 0;
  const Block32ActivationTerms* terms = nullptr;  // blocks of 32 only
};

// out[a * out_stride + i] = dot(weight row i, activation row a) for the 16 * n_groups rows of the packed groups
// (packed_group_bytes apart) and n_act_rows activation rows of n values; bit-identical to the avx2 table's
// VecDotFn on each pair.
using PackedDotFn = void (*)(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                             int64_t n_act_rows, float* out, int64_t out_stride);

// Whether the packed kernel of a weight type reads Block32ActivationTerms (q8_0, q4_0, q5_0).
bool packed_needs_block_terms(tensor::DType weight_type);

namespace avx512vnni {
// Null for a type without a packed kernel. Call only where isa_supported(KernelIsa::avx512vnni).
PackedDotFn packed_dot_fn(tensor::DType weight_type);
}  // namespace avx512vnni

}  // namespace rwd::kernels::cpu
