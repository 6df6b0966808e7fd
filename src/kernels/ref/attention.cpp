// Reference attention: per (token, head), float64 scores over the visible keys, softmax, weighted sum.
#include "kernels/ref/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"

namespace rwd::kernels::ref {

void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params) {
  const int64_t head_dim = params.head_dim;
  REWIND_CHECK(params.n_head_kv > 0 && params.n_head % params.n_head_kv == 0,
               "n_head {} is not a multiple of n_head_kv {}", params.n_head, params.n_head_kv);
  const int64_t n_group = params.n_head / params.n_head_kv;
  const int64_t kv_stride = params.n_head_kv * head_dim;  // floats from one position to the next
  std::vector<double> scores;
  std::vector<double> acc(head_dim);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t pos = positions[t];
    REWIND_CHECK(pos >= 0 && pos < n_kv, "token {} has position {}, outside the {} KV rows", t, pos, n_kv);
    const int64_t first = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
    for (int64_t h = 0; h < params.n_head; ++h) {
      const float* q_row = q + (t * params.n_head + h) * head_dim;
      const int64_t kv_head = h / n_group;
      scores.assign(pos - first + 1, 0.0);
      double max_score = -INFINITY;
      for (int64_t p = first; p <= pos; ++p) {
        const float* k_row = k + p * kv_stride + kv_head * head_dim;
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(q_row[d]) * k_row[d];
        double score = dot * static_cast<double>(params.scale);
        if (params.softcap > 0.0f) score = params.softcap * std::tanh(score / params.softcap);
        scores[p - first] = score;
        max_score = std::max(max_score, score);
      }
      double sum = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t p = first; p <= pos; ++p) {
        const double weight = std::exp(scores[p - first] - max_score);
        sum += weight;
        const float* v_row = v + p * kv_stride + kv_head * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) acc[d] += weight * v_row[d];
      }
      float* out_row = out + (t * params.n_head + h) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) out_row[d] = static_cast<float>(acc[d] / sum);
    }
  }
}

}  // namespace rwd::kernels::ref
