// Causal depthwise 1-D convolution over a token stream with a carried window, as the recurrent mixers use it
// (Gated DeltaNet's qkv conv, Mamba2's xBC conv, LFM2's short conv). For channel c and token t:
//   out[t][c] = bias[c] + sum_{i=0}^{d_conv-1} weight[c][i] * in[t + i][c]
// where in = concat(window rows (the d_conv-1 previous inputs, oldest first), x rows). Tap d_conv-1
// multiplies the current token. After the call the window holds the last d_conv-1 inputs. No activation.
// Each output is summed in the order bias, tap 0, tap 1, ... whatever n_tokens is, so a call over T tokens
// equals consecutive calls over any split of them, bit for bit.
#pragma once

#include <cstdint>

namespace rwd::kernels::cpu {

// d_conv may be 1 .. kConv1dMaxKernel (llama.cpp's models use 2 .. 4).
inline constexpr int64_t kConv1dMaxKernel = 16;

// x:      [n_tokens, n_channels]
// weight: [n_channels, d_conv] (GGUF ssm_conv1d {d_conv, channels})
// bias:   [n_channels] or null
// window: [d_conv - 1, n_channels], read and updated in place
// out:    [n_tokens, n_channels] (must not alias x or window)
void causal_conv1d(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                   const float* bias, float* window, float* out);

// The conv of a token tree in depth-first order: token t follows token parents[t] (< t), or the window's inputs
// when parents[t] is -1, and its output equals causal_conv1d's for it after its path. The window is only read;
// scratch holds (d_conv - 1) * n_channels floats for the window each token sees.
void causal_conv1d_tree(const float* x, int64_t n_tokens, const int32_t* parents, int64_t n_channels,
                        const float* weight, int64_t d_conv, const float* bias, const float* window, float* scratch,
                        float* out);

// The window update alone: after it, window holds the last d_conv - 1 rows of concat(window, x), exactly as
// causal_conv1d leaves it. Replaying logged input rows with it rebuilds a window bit for bit.
void advance_conv_window(const float* x, int64_t n_tokens, int64_t n_channels, int64_t d_conv, float* window);

}  // namespace rwd::kernels::cpu
