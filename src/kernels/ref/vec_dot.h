// The float64 reference for the dot products of kernels/cpu/vec_dot.h: the weight row is dequantized with the
// reference converters of tensor/quant and multiplied with the float activations as they are (no activation
// quantization), accumulated in double. Slow by design; tests measure the fast kernels against it.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace rwd::kernels::ref {

// weight_row holds n values of weight_type (n a multiple of its block size); x holds n floats.
double vec_dot(tensor::DType weight_type, int64_t n, const void* weight_row, const float* x);

}  // namespace rwd::kernels::ref
