// Mixture-of-experts ops as llama.cpp's build_moe_ffn computes them: the router (scores, top-k, weights) and the
// experts' FFNs over the rows routed to each; shared by every backend.
// Contract: a token's experts, weights and routed rows depend only on its own router logits and input row: an
// expert runs once over all rows routed to it, and each row's result is that of running it alone (the matmul's
// batch invariance).
#pragma once

#include <span>

#include "tensor/tensor.h"

namespace rwd::ops {

enum class ExpertGating { softmax, sigmoid };

// How one token's router logits become experts and weights; the order of operations is llama.cpp's.
struct RouterParams {
  ExpertGating gating;          // scores = softmax(logits) or sigmoid(logits), per expert
  const float* selection_bias;  // [n_expert] added to the scores for choosing only (nullptr: none)
  bool norm;                    // divide the chosen scores by their sum, clamped below at 2^-14
  float scale;                  // then multiply by it, unless it is 0 or 1
};

// The routed experts' matrices, one view per expert. gate empty: ungated experts, down(relu(up x)²) (nemotron_h
// moe); else down(SiLU(gate x) * up x).
struct ExpertWeights {
  std::span<const tensor::Tensor> gate;
  std::span<const tensor::Tensor> up;
  std::span<const tensor::Tensor> down;
};

}  // namespace rwd::ops
