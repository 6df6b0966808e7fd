// Dot products of one weight row (stored dtype) with one activation row (the weight type's vec_dot_type:
// f32, q8_0, q8_1 or q8_K), chosen once per process by CPU features (AVX2/FMA/F16C or scalar).
// Every function reduces its row in a fixed order that does not depend on anything but n, which keeps the
// matmul batch-invariant.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* activation_row);
using QuantizeRowFn = void (*)(const float* x, void* activation_row, int64_t n);

// Null when the weight type has no kernel.
VecDotFn vec_dot_fn(tensor::DType weight_type);
// Quantizes a float row into the activation type (q8_0, q8_1, q8_K; f32 is a copy).
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);

// "avx2" or "scalar": which set dispatch picked, for logs and benchmarks.
const char* isa_name();

}  // namespace rwd::kernels::cpu
