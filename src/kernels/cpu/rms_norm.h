// RMSNorm over the last dimension of [n_rows, n] rows: y = x / sqrt(mean(x²) + eps) * weight.
// weight may be null (plain normalisation, as the L2/gated variants need). x and y may alias.
#pragma once

#include <cstdint>

namespace rwd::kernels::cpu {

void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);

}  // namespace rwd::kernels::cpu
