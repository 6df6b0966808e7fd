// Causal multi-head attention with grouped/multi-query KV heads over one sequence's KV rows.
// Query token t (at position positions[t]) attends to every key row p with p <= positions[t] and, when
// window > 0, positions[t] - p < window. Keys are reduced in increasing position order, in blocks whose
// boundaries depend only on the token's own key range, so a token's output is bit-identical whatever the
// number of query tokens and whichever thread computes it (batch invariance). The parameter type is the
// reference's (kernels/ref/attention.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ref/attention.h"
#include "tensor/dtype.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu {

using AttentionParams = ref::AttentionParams;

// K or V rows of one sequence as the KV cache stores them: row p at data + p * row_bytes holds [n_head_kv,
// head_dim] values of `type`: f32, f16, or q8_0 (then each head is whole blocks: head_dim % 32 == 0). Keys and
// values are read as the float values the type stores, so a token's output depends only on what was stored.
struct KvRows {
  const void* data = nullptr;
  tensor::DType type = tensor::DType::f32;
  size_t row_bytes = 0;
};

// q:      [n_tokens, n_head, head_dim]
// k, v:   rows for positions 0 .. n_kv - 1 of this sequence
// out:    [n_tokens, n_head, head_dim], must not alias q, k or v
// positions[t] < n_kv for every t; head_dim <= 1024. pool may be null (single thread); (token, head) pairs are
// split over its threads.
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const KvRows& k, const KvRows& v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool);
// The same over f32 rows [n_kv, n_head_kv, head_dim].
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool);
// The types attention reads K and V rows in: f32, f16, q8_0.
bool is_kv_type(tensor::DType type);

}  // namespace rwd::kernels::cpu
