// Causal multi-head attention with grouped/multi-query KV heads over one sequence's KV rows.
// Query token t (at position positions[t]) attends to every key row p with p <= positions[t] and, when
// window > 0, positions[t] - p < window. Keys are reduced in increasing position order, in blocks whose
// boundaries depend only on the token's own key range, so a token's output is bit-identical whatever the
// number of query tokens and whichever thread computes it (batch invariance). The parameter type is the
// reference's (kernels/ref/attention.h).
#pragma once

#include <cstdint>

#include "kernels/ref/attention.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu {

using AttentionParams = ref::AttentionParams;

// q:      [n_tokens, n_head, head_dim]
// k, v:   [n_kv, n_head_kv, head_dim] rows for positions 0 .. n_kv - 1 of this sequence
// out:    [n_tokens, n_head, head_dim], must not alias q, k or v
// positions[t] < n_kv for every t; head_dim <= 1024. pool may be null (single thread); (token, head) pairs are
// split over its threads.
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool);

}  // namespace rwd::kernels::cpu
