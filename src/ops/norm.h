// The gate of the recurrent mixers' gated RMSNorm, y = rms_norm(x) * weight * act(z); shared by every
// implementation. Contract: each row's result depends only on that row.
#pragma once

namespace rwd::ops {

enum class GateActivation {
  silu,     // z * sigmoid(z): Gated DeltaNet, Mamba2
  sigmoid,  // Kimi Delta Attention
};

}  // namespace rwd::ops
