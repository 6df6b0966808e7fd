// Mixture-of-experts FFN (qwen35moe): router softmax over experts, the top n_expert_used per token, weights
// renormalised over the chosen ones, SwiGLU experts computed only for the tokens routed to them (only those
// experts' rows are read), summed in routing order, plus a shared expert scaled by sigmoid(gate · x).
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void moe(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// expert_count, expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length.
Status load_moe_hparams(const gguf::GgufFile& file, HParams& hp);
Status bind_moe_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw);

// Experts of one token in routing order with renormalised weights: probabilities are the softmax of the
// router logits, the top k are chosen (ties to the lower id), their weights divided by their sum.
void route_token(const float* router_logits, int64_t n_expert, int64_t n_used, int32_t* experts, float* weights);

}  // namespace rwd::model::blocks
