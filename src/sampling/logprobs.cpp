// argmax, log_softmax and top_k_logprobs: one pass for the max, one float64 pass for log-sum-exp.
#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace rwd::sampling {
namespace {

// log(sum exp(logits)), stable: max first, sum of exp(l - max) in float64 in index order.
double log_sum_exp(std::span<const float> logits) {
  float max_value = -std::numeric_limits<float>::infinity();
  for (float logit : logits) max_value = logit > max_value ? logit : max_value;
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) - static_cast<double>(max_value));
  return static_cast<double>(max_value) + std::log(sum);
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  if (logits.empty()) return;
  const double lse = log_sum_exp(logits);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
}

std::vector<TokenLogprob> top_k_logprobs(std::span<const float> logits, int32_t k) {
  const size_t n_keep = std::min(logits.size(), static_cast<size_t>(std::max(k, 0)));
  if (n_keep == 0) return {};
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // NaN ranks as -inf, which keeps the comparison a strict weak order.
  auto key = [&](int32_t id) { return std::isnan(logits[id]) ? -std::numeric_limits<float>::infinity() : logits[id]; };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n_keep), ids.end(),
                    [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  const double lse = log_sum_exp(logits);
  std::vector<TokenLogprob> top(n_keep);
  for (size_t i = 0; i < n_keep; ++i) {
    top[i] = {.id = ids[i], .logprob = static_cast<float>(static_cast<double>(logits[ids[i]]) - lse)};
  }
  return top;
}

float token_logprob(std::span<const float> logits, int32_t id) {
  return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_sum_exp(logits));
}

}  // namespace rwd::sampling
