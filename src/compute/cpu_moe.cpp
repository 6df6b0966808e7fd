#include "compute/cpu_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rwd::compute::cpu {

void route_token(const float* router_logits, int64_t n_expert, int64_t n_used, const ops::RouterParams& params,
                 int32_t* experts, float* weights, RoutingScratch& scratch) {
  std::vector<float>& probs = scratch.probs;  // the router scores, "ffn_moe_probs"
  probs.resize(static_cast<size_t>(n_expert));
  switch (params.gating) {
    case ops::ExpertGating::softmax: {
      float max_logit = router_logits[0];
      for (int64_t e = 1; e < n_expert; ++e) max_logit = std::max(max_logit, router_logits[e]);
      double sum = 0.0;
      for (int64_t e = 0; e < n_expert; ++e) sum += (probs[e] = std::exp(router_logits[e] - max_logit));
      for (int64_t e = 0; e < n_expert; ++e) probs[e] = static_cast<float>(probs[e] / sum);
      break;
    }
    case ops::ExpertGating::sigmoid:
      for (int64_t e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + std::exp(-router_logits[e]));
      break;
  }
  // The bias only decides which experts are chosen; the weights stay the unbiased scores (DeepSeek V3).
  std::vector<float>& biased = scratch.biased;
  const float* selection = probs.data();
  if (params.selection_bias != nullptr) {
    biased.resize(probs.size());
    for (int64_t e = 0; e < n_expert; ++e) biased[e] = probs[e] + params.selection_bias[e];
    selection = biased.data();
  }
  std::vector<int32_t>& order = scratch.order;
  order.resize(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n_used, order.end(), [&](int32_t a, int32_t b) {
    return selection[a] > selection[b] || (selection[a] == selection[b] && a < b);
  });
  for (int64_t j = 0; j < n_used; ++j) {
    experts[j] = order[j];
    weights[j] = probs[order[j]];
  }
  // As llama.cpp: renormalise first, then scale; the sum is clamped to the smallest normal fp16 so a
  // degenerate router (sigmoid scores all near 0) cannot divide by 0.
  if (params.norm) {
    float chosen_sum = 0.0f;
    for (int64_t j = 0; j < n_used; ++j) chosen_sum += weights[j];
    chosen_sum = std::max(chosen_sum, 6.103515625e-5f);
    for (int64_t j = 0; j < n_used; ++j) weights[j] /= chosen_sum;
  }
  if (params.scale != 0.0f && params.scale != 1.0f) {
    for (int64_t j = 0; j < n_used; ++j) weights[j] *= params.scale;
  }
}

void moe_mix(ConstRows routed, const float* weights, int64_t n_used, Rows out, bool accumulate) {
  for (int64_t t = 0; t < out.n_rows; ++t) {
    float* row = out.row(t);
    // The sum starts from 0 in every column, as llama.cpp's views of the weighted experts are added up.
    for (int64_t i = 0; i < out.width; ++i) {
      float mix = 0.0f;
      for (int64_t j = 0; j < n_used; ++j) mix += weights[t * n_used + j] * routed.row(t * n_used + j)[i];
      row[i] = accumulate ? mix + row[i] : mix;
    }
  }
}

void sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate) {
  for (int64_t t = 0; t < rows.n_rows; ++t) {
    double logit = 0.0;
    for (int64_t i = 0; i < x.width; ++i) logit += static_cast<double>(gate[i]) * x.row(t)[i];
    const float scale = 1.0f / (1.0f + std::exp(-static_cast<float>(logit)));
    float* row = rows.row(t);
    for (int64_t i = 0; i < rows.width; ++i) row[i] *= scale;
  }
}

}  // namespace rwd::compute::cpu
