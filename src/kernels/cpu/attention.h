// Causal multi-head attention with grouped/multi-query KV heads over one sequence's KV rows.
// Query token t (at position positions[t]) attends to every key row p with p <= positions[t] and, when
// window > 0, positions[t] - p < window. Keys are reduced in increasing position order, in blocks whose
// boundaries depend only on the token's own key range, so a token's output is bit-identical whatever the
// number of query tokens and whichever thread computes it (batch invariance). The parameter type is the
// reference's (kernels/ref/attention.h).
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

// K or V rows of one sequence as the KV cache stores them: row p at data + p * row_bytes holds [n_head_kv,
// head_dim] values of `type`: f32, f16, or q8_0 (then each head is whole blocks: head_dim % 32 == 0). Keys and
// values are read as the float values the type stores, so a token's output depends only on what was stored.
struct KvRows {
  const void* data = nullptr;
  tensor::DType type = tensor::DType::f32;
  size_t row_bytes = 0;
};

// The keys of a token tree (tree speculation): the nodes' K/V rows are not at their positions, since siblings
// share one. Token t's keys at positions below mapped_from are rows 0 .. mapped_from - 1; those at positions
// mapped_from .. positions[t] are rows[t * stride + 0 ..] (its ancestors' rows and its own, root first).
// Keys are reduced in the same position order either way, so a node's output is bit-identical to that of the
// same token decoded after its path.
struct KeyPaths {
  int64_t mapped_from = 0;
  const int32_t* rows = nullptr;
  int64_t stride = 0;
};

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
// The types attention reads K and V rows in: f32, f16, q8_0.
bool is_kv_type(tensor::DType type);

// One sequence's attention() (the arguments as above) as a member of an attention_sequences() round.
struct AttentionCall {
  const float* q = nullptr;
  const int32_t* positions = nullptr;
  int64_t n_tokens = 0;
  KvRows k;
  KvRows v;
  int64_t n_kv = 0;
  float* out = nullptr;
  const KeyPaths* paths = nullptr;
};

// The attention of several sequences (every slot of a step at one layer) in one pool round; each (token, head)
// pair's bits are those of attention() on its own sequence.
void attention_sequences(std::span<const AttentionCall> calls, const AttentionParams& params, ThreadPool* pool);

}  // namespace rwd::kernels::cpu
