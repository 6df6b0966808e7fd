// Causal conv1d, AVX2 path: eight channels at a time with their taps held in registers, each output summed as
// fma(tap, input, sum) from the bias over taps 0 .. d_conv-1; a channel count that is not a multiple of 8 ends
// in one masked block (same arithmetic per lane).
#include <immintrin.h>

#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/recurrent_kernel_variants.h"

namespace rwd::kernels::cpu::detail {
namespace {

// All tokens for the channel block starting at c0; kMasked: only the lanes set in mask exist.
template <bool kMasked>
void conv_block(const float* x, int64_t n_tokens, int64_t n_channels, const __m256* taps, int64_t d_conv,
                __m256 bias8, const float* window, float* out, int64_t c0, __m256i mask) {
  const int64_t n_window = d_conv - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    __m256 acc = bias8;
    for (int64_t i = 0; i < d_conv; ++i) {
      const float* in = (t + i < n_window ? window + (t + i) * n_channels : x + (t + i - n_window) * n_channels) + c0;
      acc = _mm256_fmadd_ps(taps[i], kMasked ? _mm256_maskload_ps(in, mask) : _mm256_loadu_ps(in), acc);
    }
    if constexpr (kMasked) {
      _mm256_maskstore_ps(out + t * n_channels + c0, mask, acc);
    } else {
      _mm256_storeu_ps(out + t * n_channels + c0, acc);
    }
  }
}

}  // namespace

void causal_conv1d_avx2(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                        const float* bias, float* window, float* out) {
  static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t c0 = 0; c0 < n_channels; c0 += 8) {
    const int64_t n_block = n_channels - c0 < 8 ? n_channels - c0 : 8;
    const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n_block));
    alignas(32) float taps_t[kConv1dMaxKernel][8] = {};
    for (int64_t c = 0; c < n_block; ++c) {
      for (int64_t i = 0; i < d_conv; ++i) taps_t[i][c] = weight[(c0 + c) * d_conv + i];
    }
    __m256 taps[kConv1dMaxKernel];
    for (int64_t i = 0; i < d_conv; ++i) taps[i] = _mm256_load_ps(taps_t[i]);
    const __m256 bias8 = bias != nullptr ? _mm256_maskload_ps(bias + c0, mask) : _mm256_setzero_ps();
    if (n_block == 8) {
      conv_block<false>(x, n_tokens, n_channels, taps, d_conv, bias8, window, out, c0, mask);
    } else {
      conv_block<true>(x, n_tokens, n_channels, taps, d_conv, bias8, window, out, c0, mask);
    }
  }
  shift_conv_window(x, n_tokens, n_channels, d_conv, window);
}

}  // namespace rwd::kernels::cpu::detail
