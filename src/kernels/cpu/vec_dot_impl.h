// Internal to kernels/cpu: the per-ISA kernel tables behind vec_dot.h, so that tests can run the scalar and
// the AVX2 kernels side by side and the matmul can use the tiled form. Everything here obeys vec_dot.h's
// contract; dispatch.cpp decides which table the public functions return.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/vec_dot.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

// out[a * out_stride + w] = dot(weight row w, activation row a) for w in [0, n_weight_rows) and a in
// [0, n_act_rows); weight row w starts at weights + w * weight_row_bytes, activation row a at
// activations + a * activation_row_bytes. Each result is bit-identical to the VecDotFn of the same table on
// that pair alone: a tile shares the unpacking and loading of blocks, never an accumulator.
using VecDotTileFn = void (*)(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                              const void* activations, size_t activation_row_bytes, int64_t n_act_rows, float* out,
                              int64_t out_stride);

// Activation rows as VecDotTileFn reads them ("tile rows"): the row in the weight type's vec_dot_type, then,
// for q8_0 and q8_1, float copies of its blocks' fp16 fields (every d, then for q8_1 every s) at a 32-byte
// aligned offset. A tile reuses each activation block's scale across its weight rows; reading it as a float
// costs one load where gathering the fp16 fields would cost more than the dot products it scales. For the
// other types a tile row is the plain row.
size_t tile_row_bytes(tensor::DType activation_type, int64_t n);
// The float copies in a tile row of n values, or null where the type has none (s: q8_1 only).
const float* tile_row_d(tensor::DType activation_type, int64_t n, const void* tile_row);
const float* tile_row_s(tensor::DType activation_type, int64_t n, const void* tile_row);
// Writes the float copies for blocks [first_block, first_block + n_blocks) once the row's blocks are quantized.
void fill_tile_row_scales(tensor::DType activation_type, int64_t n, void* tile_row, int64_t first_block,
                          int64_t n_blocks);

struct VecDotKernel {
  VecDotFn one = nullptr;
  VecDotTileFn tile = nullptr;
};

namespace scalar {
// Null members where the weight type has no kernel.
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
// The reference quantizers of tensor/quant (q8_0, q8_1, q8_K) or a copy for f32; null otherwise.
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);
}  // namespace scalar

namespace avx2 {
// Call only where avx2_supported(); the functions use AVX2, FMA and F16C instructions.
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
// Byte-identical to the scalar quantizers, only faster.
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);
}  // namespace avx2

// True when the CPU (and OS) support AVX2, FMA and F16C.
bool avx2_supported();

// The tiled form of vec_dot_fn from the table dispatch picked.
VecDotTileFn vec_dot_tile_fn(tensor::DType weight_type);

}  // namespace rwd::kernels::cpu
