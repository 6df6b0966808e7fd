// The CPU backend's mixture-of-experts pieces (compute/backend.h route_experts, moe_mix, sigmoid_dot_scale),
// in llama.cpp's order of operations (build_moe_ffn).
#pragma once

#include <cstdint>
#include <vector>

#include "compute/rows.h"
#include "ops/moe.h"

namespace rwd::compute::cpu {

// The router's working rows, kept so that a warm step allocates nothing once each has grown.
struct RoutingScratch {
  std::vector<float> probs, biased;
  std::vector<int32_t> order;
};

// Experts of one token in routing order and their weights.
void route_token(const float* router_logits, int64_t n_expert, int64_t n_used, const ops::RouterParams& params,
                 int32_t* experts, float* weights, RoutingScratch& scratch);

void moe_mix(ConstRows routed, const float* weights, int64_t n_used, Rows out, bool accumulate);

void sigmoid_dot_scale(Rows rows, ConstRows x, const float* gate);

}  // namespace rwd::compute::cpu
