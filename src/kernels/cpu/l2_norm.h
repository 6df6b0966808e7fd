// L2 normalisation of [n_rows, n] rows: y = x / max(||x||_2, eps) (llama.cpp's ggml_l2_norm). x and y may alias.
// The sum of squares is taken in float64 and the scale 1 / max(norm, eps) rounded once to float.
#pragma once

#include <cstdint>

namespace rwd::kernels::cpu {

void l2_norm(const float* x, float* y, int64_t n_rows, int64_t n, float eps);

}  // namespace rwd::kernels::cpu
