// Reference RMSNorm over [n_rows, n] rows: y = x / sqrt(mean(x²) + eps) * weight, computed in float64 and
// rounded once to float. The executable spec for kernels/cpu/rms_norm; not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

// weight: [n] or null (no scaling). x and y may alias.
void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);

}  // namespace rwd::kernels::ref
