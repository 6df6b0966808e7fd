// Causal conv1d: argument checks, dispatch, the window update both paths share, and the portable path.
// Channels go in blocks whose taps are first transposed to [tap][channel], so the inner loop runs along
// contiguous channels (and the compiler may vectorise it without changing any rounding).
#include "kernels/cpu/conv1d.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/recurrent_kernel_variants.h"

namespace rwd::kernels::cpu {

namespace {

detail::CausalConv1dFn dispatched_conv() {
  return has_avx2_fma() ? detail::causal_conv1d_avx2 : detail::causal_conv1d_scalar;
}

}  // namespace

void causal_conv1d(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                   const float* bias, float* window, float* out) {
  detail::causal_conv1d_with(dispatched_conv(), x, n_tokens, n_channels, weight, d_conv, bias, window, out);
}

void advance_conv_window(const float* x, int64_t n_tokens, int64_t n_channels, int64_t d_conv, float* window) {
  REWIND_CHECK(d_conv >= 1 && d_conv <= kConv1dMaxKernel, "advance_conv_window: d_conv={} must be in 1..{}", d_conv,
               kConv1dMaxKernel);
  detail::shift_conv_window(x, n_tokens, n_channels, d_conv, window);
}

void causal_conv1d_tree(const float* x, int64_t n_tokens, const int32_t* parents, int64_t n_channels,
                        const float* weight, int64_t d_conv, const float* bias, const float* window, float* scratch,
                        float* out) {
  detail::causal_conv1d_tree_with(dispatched_conv(), x, n_tokens, parents, n_channels, weight, d_conv, bias, window,
                                  scratch, out);
}

namespace detail {

void causal_conv1d_with(CausalConv1dFn fn, const float* x, int64_t n_tokens, int64_t n_channels, const float* weight,
                        int64_t d_conv, const float* bias, float* window, float* out) {
  REWIND_CHECK(d_conv >= 1 && d_conv <= kConv1dMaxKernel, "causal_conv1d: d_conv={} must be in 1..{}", d_conv,
               kConv1dMaxKernel);
  REWIND_CHECK(n_tokens >= 0 && n_channels >= 0, "causal_conv1d: n_tokens={} n_channels={}", n_tokens, n_channels);
  fn(x, n_tokens, n_channels, weight, d_conv, bias, window, out);
}

void causal_conv1d_tree_with(CausalConv1dFn fn, const float* x, int64_t n_tokens, const int32_t* parents,
                             int64_t n_channels, const float* weight, int64_t d_conv, const float* bias,
                             const float* window, float* scratch, float* out) {
  const int64_t n_window = d_conv - 1;
  int32_t ancestors[kConv1dMaxKernel];
  for (int64_t t = 0; t < n_tokens;) {
    REWIND_CHECK(parents[t] >= -1 && parents[t] < t, "causal_conv1d_tree: token {} has parent {}", t, parents[t]);
    // Tokens that each follow the one before them run as one chain from the first one's window: the given one
    // moved on by the inputs of its nearest n_window ancestors, oldest first.
    int64_t end = t + 1;
    while (end < n_tokens && parents[end] == end - 1) ++end;
    int64_t n_ancestors = 0;
    for (int32_t a = parents[t]; a >= 0 && n_ancestors < n_window; a = parents[a]) ancestors[n_ancestors++] = a;
    std::copy_n(window, n_window * n_channels, scratch);
    for (int64_t i = n_ancestors - 1; i >= 0; --i) {
      detail::shift_conv_window(x + ancestors[i] * n_channels, 1, n_channels, d_conv, scratch);
    }
    causal_conv1d_with(fn, x + t * n_channels, end - t, n_channels, weight, d_conv, bias, scratch,
                       out + t * n_channels);
    t = end;
  }
}

void shift_conv_window(const float* x, int64_t n_tokens, int64_t n_channels, int64_t d_conv, float* window) {
  const int64_t n_window = d_conv - 1;
  if (n_window == 0 || n_tokens == 0) return;  // nothing moves (and window or x may be null)
  const size_t row_bytes = static_cast<size_t>(n_channels) * sizeof(float);
  if (n_tokens >= n_window) {
    std::memcpy(window, x + (n_tokens - n_window) * n_channels, static_cast<size_t>(n_window) * row_bytes);
    return;
  }
  const int64_t n_kept = n_window - n_tokens;
  std::memmove(window, window + n_tokens * n_channels, static_cast<size_t>(n_kept) * row_bytes);
  std::memcpy(window + n_kept * n_channels, x, static_cast<size_t>(n_tokens) * row_bytes);
}

void causal_conv1d_scalar(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                          const float* bias, float* window, float* out) {
  constexpr int64_t kBlock = 64;
  const int64_t n_window = d_conv - 1;
  float taps[kConv1dMaxKernel][kBlock];
  float acc[kBlock];
  for (int64_t c0 = 0; c0 < n_channels; c0 += kBlock) {
    const int64_t n_block = std::min(kBlock, n_channels - c0);
    for (int64_t c = 0; c < n_block; ++c) {
      for (int64_t i = 0; i < d_conv; ++i) taps[i][c] = weight[(c0 + c) * d_conv + i];
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t c = 0; c < n_block; ++c) acc[c] = bias != nullptr ? bias[c0 + c] : 0.0f;
      for (int64_t i = 0; i < d_conv; ++i) {
        const float* in = t + i < n_window ? window + (t + i) * n_channels : x + (t + i - n_window) * n_channels;
        for (int64_t c = 0; c < n_block; ++c) acc[c] += taps[i][c] * in[c0 + c];
      }
      std::copy_n(acc, n_block, out + t * n_channels + c0);
    }
  }
  shift_conv_window(x, n_tokens, n_channels, d_conv, window);
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
