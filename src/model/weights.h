// Weights: the model's tensors bound by name (GGUF short names, STYLE habit 1), pointing into the mapped
// file. A tensor not used by an architecture stays invalid (data == nullptr).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace rwd::model {

struct LayerWeights {
  tensor::Tensor attn_norm;
  tensor::Tensor attn_q;
  tensor::Tensor attn_k;
  tensor::Tensor attn_v;
  tensor::Tensor attn_output;
  tensor::Tensor attn_q_norm;
  tensor::Tensor attn_k_norm;
  tensor::Tensor attn_post_norm;
  tensor::Tensor ffn_norm;
  tensor::Tensor ffn_gate;
  tensor::Tensor ffn_up;
  tensor::Tensor ffn_down;
  tensor::Tensor ffn_post_norm;
};

struct Weights {
  tensor::Tensor token_embd;
  tensor::Tensor output_norm;
  tensor::Tensor output;  // token_embd when the embeddings are tied
  std::vector<LayerWeights> layers;
};

}  // namespace rwd::model
