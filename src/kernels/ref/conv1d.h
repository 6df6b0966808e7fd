// Reference causal depthwise 1-D convolution with a carried window: each output summed in float64 and rounded
// once. The executable spec for kernels/cpu/conv1d; not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

// out[t][c] = bias[c] + sum_{i=0}^{d_conv-1} weight[c][i] * in[t + i][c], in = concat(window, x) along tokens.
// x, out: [n_tokens, n_channels]; weight: [n_channels, d_conv]; bias: [n_channels] or null;
// window: [d_conv - 1, n_channels] (oldest row first), left holding the last d_conv - 1 rows of in.
void causal_conv1d(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                   const float* bias, float* window, float* out);

}  // namespace rwd::kernels::ref
