// Internal: the per-ISA entry points behind rms_norm, softmax, glu and attention, declared so that the public
// functions can dispatch on has_avx2_fma() and the kernel tests can run each path directly. Not a public API:
// model code calls the functions in rms_norm.h, softmax.h, glu.h and attention.h.
// The *_avx2 functions are defined in *_avx2.cpp files and may only be called when has_avx2_fma() is true.
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace rwd::kernels::cpu::detail {

void rms_norm_scalar(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);
void rms_norm_avx2(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);

void softmax_scalar(float* x, int64_t n);
void softmax_avx2(float* x, int64_t n);

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n);
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void geglu_scalar(const float* gate, const float* up, float* out, int64_t n);
void geglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void silu_scalar(const float* x, float* out, int64_t n);
void silu_avx2(const float* x, float* out, int64_t n);

// Keys are folded into the running softmax in blocks of this many, counted from the first key a query sees;
// within a block the weighted values are summed in float, across blocks in float64.
inline constexpr int64_t kAttentionBlock = 128;
inline constexpr int64_t kAttentionMaxHeadDim = 1024;
// Query heads that share a KV head are processed together, each key block loaded once for all of them.
inline constexpr int64_t kAttentionMaxGroup = 8;

// Query heads h0 .. h0 + n_queries - 1 of one token, all using the same KV head, against the n_keys consecutive
// key/value rows that token sees. Each head's result is computed exactly as if it were alone.
struct AttentionGroup {
  const float* q;     // [n_queries, head_dim], the token's rows for heads h0 ..
  int64_t n_queries;  // 1 .. kAttentionMaxGroup
  const float* k;     // first visible key of the KV head; row j at k + j * kv_stride
  const float* v;     // same layout as k
  int64_t kv_stride;  // floats from one position to the next (n_head_kv * head_dim)
  int64_t n_keys;     // >= 1
  int64_t head_dim;   // <= kAttentionMaxHeadDim
  float scale;
  float softcap;
  float* out;         // [n_queries, head_dim]
};

using AttentionGroupFn = void (*)(const AttentionGroup& group);
void attention_group_scalar(const AttentionGroup& group);
void attention_group_avx2(const AttentionGroup& group);

// attention() with a chosen group kernel; the public attention() passes the one has_avx2_fma() selects.
void attention_with(AttentionGroupFn group_fn, const float* q, const int32_t* positions, int64_t n_tokens,
                    const float* k, const float* v, int64_t n_kv, float* out, const AttentionParams& params,
                    ThreadPool* pool);

}  // namespace rwd::kernels::cpu::detail
