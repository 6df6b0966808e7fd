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
inline constexpr size_t kQ6KScaleBytes = 4 * 64;
inline constexpr size_t kQ6KGroupRunBytes = 3 * 64;
inline constexpr size_t kQ6KBodyBytes = kQ6KScaleBytes + 16 * kQ6KGroupRunBytes;
inline constexpr size_t kQ6KFactorBytes = 32;
}  // namespace packed

// out[a * out_stride + i] = dot(weight row i, activation row a) for the 16 * n_groups rows of the packed groups
// (packed_group_bytes apart) and n_act_rows q8_K rows of n values, act_row_bytes apart; bit-identical to the
// avx2 table's VecDotFn on each pair.
using PackedDotFn = void (*)(int64_t n, const uint8_t* groups, int64_t n_groups, const uint8_t* activations,
                             size_t act_row_bytes, int64_t n_act_rows, float* out, int64_t out_stride);

namespace avx512vnni {
// Null for a type without a packed kernel. Call only where isa_supported(KernelIsa::avx512vnni).
PackedDotFn packed_dot_fn(tensor::DType weight_type);
}  // namespace avx512vnni

}  // namespace rwd::kernels::cpu
