// Reference causal attention with grouped KV heads: for each query token and head, scores against every
// visible key in float64, softmax, weighted sum of values. Also the definition of AttentionParams that
// kernels/cpu/attention.h re-exports. Single-threaded and not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

struct AttentionParams {
  int64_t n_head = 0;      // query heads
  int64_t n_head_kv = 0;   // key/value heads; n_head % n_head_kv == 0, query head h uses kv head
                           // h / (n_head / n_head_kv)
  int64_t head_dim = 0;    // same for q, k and v
  float scale = 1.0f;      // applied to q·k before the softcap and the softmax
  float softcap = 0.0f;    // > 0: scores become softcap * tanh(scores / softcap)
  int64_t window = 0;      // > 0: sliding window size in positions (a key at p is visible when pos - p < window)
};

// q:    [n_tokens, n_head, head_dim];  k, v: [n_kv, n_head_kv, head_dim] for positions 0 .. n_kv - 1
// out:  [n_tokens, n_head, head_dim];  positions[t] < n_kv. Token t sees keys p <= positions[t].
void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params);

}  // namespace rwd::kernels::ref
