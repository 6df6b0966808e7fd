// The float64 reference matmul: y = x · Wᵀ with every output the float64 dot product of ref::vec_dot
// (dequantized weight row, unquantized activations), rounded once to float. One thread, no blocking.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace rwd::kernels::ref {

// weight: [n_out, n_in] of any type with a reference dequantizer; x: [n_rows, n_in]; y: [n_rows, n_out].
void matmul(const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y);

}  // namespace rwd::kernels::ref
