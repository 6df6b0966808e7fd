// Gated linear units of an FFN: out = act(gate) * up, elementwise over n values.
// swiglu: act = SiLU (x * sigmoid(x)); geglu: act = GELU, tanh approximation (gelu_pytorch_tanh, as Gemma).
// silu: the activation alone (the recurrent mixers' conv outputs); out may alias x.
#pragma once

#include <cstdint>

namespace rwd::kernels::cpu {

void swiglu(const float* gate, const float* up, float* out, int64_t n);
void geglu(const float* gate, const float* up, float* out, int64_t n);
void silu(const float* x, float* out, int64_t n);

}  // namespace rwd::kernels::cpu
