// Causal multi-head attention with grouped/multi-query KV heads over one sequence's KV rows.
// Query token t (at position positions[t]) attends to every key row p with p <= positions[t] and, when
// window > 0, positions[t] - p < window. Keys are reduced in increasing position order, in blocks whose
// boundaries depend only on the token's own key range, so a token's output is bit-identical whatever the
// number of query tokens and whichever thread computes it (batch invariance). The types are
// ops/attention.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/ref/attention.h"
#include "tensor/dtype.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu {

using AttentionParams = ref::AttentionParams;

using KvRows = ops::KvRows;

using KeyPaths = ops::KeyPaths;

// q:      [n_tokens, n_head, head_dim]
// k, v:   rows 0 .. n_kv - 1 of this sequence, row p holding position p (but for `paths`)
// out:    [n_tokens, n_head, head_dim], must not alias q, k or v
// positions[t] < n_kv for every t; head_dim <= 1024. pool may be null (single thread); (token, head) pairs are
// split over its threads. paths may be null (every token's keys are rows 0 .. positions[t]); its rows are < n_kv.
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const KvRows& k, const KvRows& v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool,
               const KeyPaths* paths = nullptr);
// The same over f32 rows [n_kv, n_head_kv, head_dim].
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool);
using ops::is_kv_type;

// One sequence's attention() (the arguments as above) as a member of an attention_sequences() round.
using AttentionCall = ops::AttentionCall;

// The attention of several sequences (every slot of a step at one layer) in one pool round; each (token, head)
// pair's bits are those of attention() on its own sequence.
void attention_sequences(std::span<const AttentionCall> calls, const AttentionParams& params, ThreadPool* pool);

}  // namespace rwd::kernels::cpu
