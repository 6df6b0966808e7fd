// Internal: the per-ISA entry points behind rms_norm, softmax, glu and attention, declared so that the public
// functions can dispatch on has_avx2_fma() and the kernel tests can run each path directly. Not a public API:
// model code calls the functions in rms_norm.h, softmax.h, glu.h and attention.h.
// The *_avx2 functions are defined in *_avx2.cpp files and may only be called when has_avx2_fma() is true.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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
// One KV head's rows from the first key a query sees: key j's head_dim values at data + j * row_bytes, or, for
// a tree node's keys past n_direct, at data + (mapped_rows[j - n_direct] - row_base) * row_bytes.
struct KvSlice {
  const uint8_t* data;
  tensor::DType type;
  size_t row_bytes;
  const int32_t* mapped_rows = nullptr;
  int64_t n_direct = 0;
  int64_t row_base = 0;
};

// Key j's row of a slice.
inline const uint8_t* key_row(const KvSlice& slice, int64_t j) {
  const int64_t row = slice.mapped_rows == nullptr || j < slice.n_direct
                          ? j
                          : slice.mapped_rows[j - slice.n_direct] - slice.row_base;
  return slice.data + static_cast<size_t>(row) * slice.row_bytes;
}
// Whether keys [first, first + n) are consecutive rows.
inline bool keys_consecutive(const KvSlice& slice, int64_t first, int64_t n) {
  return slice.mapped_rows == nullptr || first + n <= slice.n_direct;
}

struct AttentionGroup {
  const float* q;     // [n_queries, head_dim], the token's rows for heads h0 ..
  int64_t n_queries;  // 1 .. kAttentionMaxGroup
  KvSlice k;
  KvSlice v;
  int64_t n_keys;     // >= 1
  int64_t head_dim;   // <= kAttentionMaxHeadDim
  float scale;
  float softcap;
  float* out;         // [n_queries, head_dim]
  // kAttentionBlock rows of head_dim each for kv_block's conversions: the pool thread index's own, kept per
  // index rather than per OS thread (a late worker's index runs on the caller), so a warm step allocates nothing.
  float* k_scratch;
  float* v_scratch;
};

// Keys [first, first + n) of a slice as floats: the rows themselves for consecutive f32 rows (*stride = their
// floats apart), else converted (or copied) exactly into scratch ([n, head_dim], *stride = head_dim).
// n <= kAttentionBlock.
const float* kv_block(const KvSlice& slice, int64_t first, int64_t n, int64_t head_dim, float* scratch,
                      int64_t* stride);

using AttentionGroupFn = void (*)(const AttentionGroup& group);
void attention_group_scalar(const AttentionGroup& group);
void attention_group_avx2(const AttentionGroup& group);

// attention() with a chosen group kernel; the public attention() passes the one has_avx2_fma() selects.
void attention_with(AttentionGroupFn group_fn, const float* q, const int32_t* positions, int64_t n_tokens,
                    const KvRows& k, const KvRows& v, int64_t n_kv, float* out, const AttentionParams& params,
                    ThreadPool* pool, const KeyPaths* paths = nullptr);
void attention_with(AttentionGroupFn group_fn, const float* q, const int32_t* positions, int64_t n_tokens,
                    const float* k, const float* v, int64_t n_kv, float* out, const AttentionParams& params,
                    ThreadPool* pool);
void attention_sequences_with(AttentionGroupFn group_fn, std::span<const AttentionCall> calls,
                              const AttentionParams& params, ThreadPool* pool);

}  // namespace rwd::kernels::cpu::detail
