// Reference causal conv1d: builds the concatenated input stream explicitly, then convolves it in float64.
#include "kernels/ref/conv1d.h"

#include <algorithm>
#include <vector>

namespace rwd::kernels::ref {

void causal_conv1d(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                   const float* bias, float* window, float* out) {
  const int64_t n_window = d_conv - 1;
  std::vector<float> stream(static_cast<size_t>((n_window + n_tokens) * n_channels));  // [n_window + n_tokens, C]
  std::copy_n(window, n_window * n_channels, stream.begin());
  std::copy_n(x, n_tokens * n_channels, stream.begin() + n_window * n_channels);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < n_channels; ++c) {
      double sum = bias != nullptr ? static_cast<double>(bias[c]) : 0.0;
      for (int64_t i = 0; i < d_conv; ++i) {
        sum += static_cast<double>(weight[c * d_conv + i]) * stream[(t + i) * n_channels + c];
      }
      out[t * n_channels + c] = static_cast<float>(sum);
    }
  }
  std::copy_n(stream.begin() + n_tokens * n_channels, n_window * n_channels, window);
}

}  // namespace rwd::kernels::ref
