// Reference gated linear units, out = act(gate) * up, in float64. Not meant to be fast.
// swiglu: act(x) = x * sigmoid(x). geglu: act(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))).
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

void swiglu(const float* gate, const float* up, float* out, int64_t n);
void geglu(const float* gate, const float* up, float* out, int64_t n);
void silu(const float* x, float* out, int64_t n);

// The activations alone, in float64, for tests that check the formula itself.
double silu(double x);
double gelu_tanh(double x);

}  // namespace rwd::kernels::ref
