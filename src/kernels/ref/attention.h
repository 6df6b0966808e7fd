// Reference causal attention with grouped KV heads: for each query token and head, scores against every
// visible key in float64, softmax, weighted sum of values. The parameter type is ops/attention.h's. Single-threaded and not meant to be fast.
#pragma once

#include <cstdint>

#include "ops/attention.h"

namespace rwd::kernels::ref {

using AttentionParams = ops::AttentionParams;

// q:    [n_tokens, n_head, head_dim];  k, v: [n_kv, n_head_kv, head_dim] for positions 0 .. n_kv - 1
// out:  [n_tokens, n_head, head_dim];  positions[t] < n_kv. Token t sees keys p <= positions[t].
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params);

}  // namespace rwd::kernels::ref
