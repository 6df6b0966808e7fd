// Internal to kernels/cpu: the per-ISA kernel tables behind vec_dot.h, so that tests can run the scalar and
// the AVX2 kernels side by side and the matmul can use the multi-row form. Everything here obeys vec_dot.h's
// contract; dispatch.cpp decides which table the public functions return.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/vec_dot.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

// out[r * out_stride] = dot(weight_row, activation row r) for r in [0, n_act_rows); activation row r starts at
// activations + r * activation_row_bytes. Each result is bit-identical to the VecDotFn of the same table on
// that row alone: rows share the unpacking of the weight blocks, never an accumulator.
using VecDotRowsFn = void (*)(int64_t n, const void* weight_row, const void* activations, size_t activation_row_bytes,
                              int64_t n_act_rows, float* out, int64_t out_stride);

struct VecDotKernel {
  VecDotFn one = nullptr;
  VecDotRowsFn rows = nullptr;
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

// The multi-row form of vec_dot_fn from the table dispatch picked.
VecDotRowsFn vec_dot_rows_fn(tensor::DType weight_type);

}  // namespace rwd::kernels::cpu
