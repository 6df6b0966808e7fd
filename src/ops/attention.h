// Causal multi-head attention with grouped/multi-query KV heads: the parameter types every implementation
// shares (kernels/ref, kernels/cpu, the backends of compute/).
// Contract: query token t at position positions[t] attends to every key row p with p <= positions[t] (and,
// with a window, positions[t] - p < window); keys are reduced in increasing position order in blocks whose
// boundaries depend only on the token's own key range, so a token's output is bit-identical whatever the
// number of query tokens, sequences, tree nodes or threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace rwd::ops {

struct AttentionParams {
  int64_t n_head = 0;      // query heads
  int64_t n_head_kv = 0;   // key/value heads; n_head % n_head_kv == 0, query head h uses kv head
                           // h / (n_head / n_head_kv)
  int64_t head_dim = 0;    // same for q, k and v
  float scale = 1.0f;      // applied to q·k before the softcap and the softmax
  float softcap = 0.0f;    // > 0: scores become softcap * tanh(scores / softcap)
  int64_t window = 0;      // > 0: sliding window size in positions (a key at p is visible when pos - p < window)
};

// The types attention reads K and V rows in.
inline bool is_kv_type(tensor::DType type) {
  return type == tensor::DType::f32 || type == tensor::DType::f16 || type == tensor::DType::q8_0;
}

// K or V rows of one sequence as the KV cache stores them: row p at data + p * row_bytes holds [n_head_kv,
// head_dim] values of `type`: f32, f16, or q8_0 (then each head is whole blocks: head_dim % 32 == 0). Keys and
// values are read as the float values the type stores, so a token's output depends only on what was stored.
struct KvRows {
  const void* data = nullptr;
  tensor::DType type = tensor::DType::f32;
  size_t row_bytes = 0;
};

// Where a KV store op writes: rows of one sequence's K or V cache, row p at data + p * row_bytes, n_rows of them
// allocated; each row is [n_head_kv, head_dim] values of `type` (f32, f16 or q8_0), converted once on store.
struct KvStore {
  void* data = nullptr;
  tensor::DType type = tensor::DType::f32;
  size_t row_bytes = 0;
  int64_t n_rows = 0;
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

// One sequence's attention:
// q:    [n_tokens, n_head, head_dim]
// k, v: rows 0 .. n_kv - 1 of this sequence, row p holding position p (but for `paths`)
// out:  [n_tokens, n_head, head_dim], must not alias q, k or v
// positions[t] < n_kv for every t; head_dim <= 1024. paths may be null (every token's keys are rows
// 0 .. positions[t]); its rows are < n_kv.
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

}  // namespace rwd::ops
