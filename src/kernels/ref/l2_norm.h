// Reference L2 normalisation of [n_rows, n] rows, y = x / max(||x||_2, eps), in float64 with each output
// rounded once. The executable spec for kernels/cpu/l2_norm.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

// x and y may alias.
void l2_norm(const float* x, float* y, int64_t n_rows, int64_t n, float eps);

}  // namespace rwd::kernels::ref
