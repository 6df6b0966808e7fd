// The tile-row layout of vec_dot_impl.h: a quantized activation row followed by float copies of its blocks'
// fp16 scales. Plain x86-64 code, shared by every ISA's tile kernels and the matmul; it does not quantize.
#include <cstring>

#include "base/check.h"
#include "base/half.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu {
namespace {

namespace q = tensor::quant;

constexpr size_t kScaleAlignment = 32;

size_t align_up(size_t bytes) { return (bytes + kScaleAlignment - 1) / kScaleAlignment * kScaleAlignment; }

// Number of float arrays (d, s) a tile row of this type carries.
int n_float_arrays(tensor::DType activation_type) {
  switch (activation_type) {
    case tensor::DType::q8_0: return 1;
    case tensor::DType::q8_1: return 2;
    default: return 0;
  }
}

size_t d_offset(tensor::DType activation_type, int64_t n) {
  return align_up(tensor::row_bytes(activation_type, n));
}

}  // namespace

size_t tile_row_bytes(tensor::DType activation_type, int64_t n) {
  const int n_arrays = n_float_arrays(activation_type);
  if (n_arrays == 0) return tensor::row_bytes(activation_type, n);
  const auto n_blocks = static_cast<size_t>(n / q::kBlock32);
  return align_up(d_offset(activation_type, n) + n_blocks * sizeof(float) * static_cast<size_t>(n_arrays));
}

const float* tile_row_d(tensor::DType activation_type, int64_t n, const void* tile_row) {
  if (n_float_arrays(activation_type) == 0) return nullptr;
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(tile_row) + d_offset(activation_type, n));
}

const float* tile_row_s(tensor::DType activation_type, int64_t n, const void* tile_row) {
  if (n_float_arrays(activation_type) < 2) return nullptr;
  return tile_row_d(activation_type, n, tile_row) + n / q::kBlock32;
}

void fill_tile_row_scales(tensor::DType activation_type, int64_t n, void* tile_row, int64_t first_block,
                          int64_t n_blocks) {
  auto* row = static_cast<uint8_t*>(tile_row);
  auto* d = const_cast<float*>(tile_row_d(activation_type, n, row));
  if (d == nullptr) return;
  REWIND_CHECK(first_block >= 0 && first_block + n_blocks <= n / q::kBlock32,
               "fill_tile_row_scales: blocks [{}, {}) outside a row of {} values", first_block,
               first_block + n_blocks, n);
  if (activation_type == tensor::DType::q8_0) {
    const auto* blocks = reinterpret_cast<const q::BlockQ8_0*>(row);
    for (int64_t b = first_block; b < first_block + n_blocks; ++b) d[b] = fp16_to_fp32(blocks[b].d);
  } else {
    const auto* blocks = reinterpret_cast<const q::BlockQ8_1*>(row);
    float* s = d + n / q::kBlock32;
    for (int64_t b = first_block; b < first_block + n_blocks; ++b) {
      d[b] = fp16_to_fp32(blocks[b].d);
      s[b] = fp16_to_fp32(blocks[b].s);
    }
  }
}

}  // namespace rwd::kernels::cpu
