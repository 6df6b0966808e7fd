// Reference gated RMSNorm of the recurrent mixers' output, y = rms_norm(x) * weight * act(z), in float64 with
// each output rounded once. Also the definition of GateActivation that kernels/cpu/gated_rms_norm.h
// re-exports. The executable spec for kernels/cpu/gated_rms_norm.
#pragma once

#include <cstdint>

#include "ops/norm.h"

namespace rwd::kernels::ref {

using GateActivation = ops::GateActivation;

// x, z, y: [n_rows, n]; weight: [n], shared by all rows. x and y may alias.
void gated_rms_norm(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                    float eps, GateActivation activation);

}  // namespace rwd::kernels::ref
