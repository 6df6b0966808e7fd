// Gated RMSNorm of the recurrent mixers' output: y = rms_norm(x) * weight * act(z) per row of n values, with
// act = SiLU (Gated DeltaNet) or sigmoid (Kimi Delta Attention). weight is shared by all rows (one head's
// width). x and y may alias. The activation type is the reference's (kernels/ref/gated_rms_norm.h).
#pragma once

#include <cstdint>

#include "kernels/ref/gated_rms_norm.h"

namespace rwd::kernels::cpu {

using GateActivation = ref::GateActivation;

// x, z, y: [n_rows, n]; weight: [n]. Rounds as ((x * inv_rms) * weight) * act(z), inv_rms rounded once to float.
void gated_rms_norm(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                    float eps, GateActivation activation);

}  // namespace rwd::kernels::cpu
