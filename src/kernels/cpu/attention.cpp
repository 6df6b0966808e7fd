// Attention driver (shape checks, the work split over threads) and the portable group kernel.
// Every (token, head) pair is computed start to finish by one thread, with arithmetic that depends only on
// that pair's query and key range: the thread count, the batch and the grouping of heads cannot change a bit.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_kernel_variants.h"

namespace rwd::kernels::cpu {

void attention(const float* q, const int32_t* positions, int64_t n_tokens, const KvRows& k, const KvRows& v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool, const KeyPaths* paths) {
  detail::attention_with(has_avx2_fma() ? detail::attention_group_avx2 : detail::attention_group_scalar, q,
                         positions, n_tokens, k, v, n_kv, out, params, pool, paths);
}

void attention(const float* q, const int32_t* positions, int64_t n_tokens, const float* k, const float* v,
               int64_t n_kv, float* out, const AttentionParams& params, ThreadPool* pool) {
  detail::attention_with(has_avx2_fma() ? detail::attention_group_avx2 : detail::attention_group_scalar, q,
                         positions, n_tokens, k, v, n_kv, out, params, pool);
}

void attention_sequences(std::span<const AttentionCall> calls, const AttentionParams& params, ThreadPool* pool) {
  detail::attention_sequences_with(has_avx2_fma() ? detail::attention_group_avx2 : detail::attention_group_scalar,
                                   calls, params, pool);
}

namespace detail {

const float* kv_block(const KvSlice& slice, int64_t first, int64_t n, int64_t head_dim, float* scratch,
                      int64_t* stride) {
  if (slice.type == tensor::DType::f32 && keys_consecutive(slice, first, n)) {
    *stride = static_cast<int64_t>(slice.row_bytes / sizeof(float));
    return reinterpret_cast<const float*>(key_row(slice, first));
  }
  const tensor::ToFloatFn to_float = tensor::dtype_traits(slice.type).to_float;
  for (int64_t j = 0; j < n; ++j) to_float(key_row(slice, first + j), scratch + j * head_dim, head_dim);
  *stride = head_dim;
  return scratch;
}

void attention_with(AttentionGroupFn group_fn, const float* q, const int32_t* positions, int64_t n_tokens,
                    const float* k, const float* v, int64_t n_kv, float* out, const AttentionParams& params,
                    ThreadPool* pool) {
  const size_t row_bytes = static_cast<size_t>(params.n_head_kv * params.head_dim) * sizeof(float);
  attention_with(group_fn, q, positions, n_tokens, KvRows{k, tensor::DType::f32, row_bytes},
                 KvRows{v, tensor::DType::f32, row_bytes}, n_kv, out, params, pool);
}

void attention_with(AttentionGroupFn group_fn, const float* q, const int32_t* positions, int64_t n_tokens,
                    const KvRows& k, const KvRows& v, int64_t n_kv, float* out, const AttentionParams& params,
                    ThreadPool* pool, const KeyPaths* paths) {
  const AttentionCall call{q, positions, n_tokens, k, v, n_kv, out, paths};
  attention_sequences_with(group_fn, {&call, 1}, params, pool);
}

namespace {

void check_call(const AttentionCall& call, const AttentionParams& params) {
  REWIND_CHECK(is_kv_type(call.k.type) && is_kv_type(call.v.type),
               "KV rows of type {}/{}: attention reads f32, f16, q8_0", tensor::dtype_name(call.k.type),
               tensor::dtype_name(call.v.type));
  for (int64_t t = 0; t < call.n_tokens; ++t) {
    REWIND_CHECK(call.positions[t] >= 0 && call.positions[t] < call.n_kv,
                 "token {} has position {}, outside the {} KV rows", t, call.positions[t], call.n_kv);
    const KeyPaths* paths = call.paths;
    if (paths == nullptr || call.positions[t] < paths->mapped_from) continue;
    for (int64_t d = 0; d <= call.positions[t] - paths->mapped_from; ++d) {
      const int32_t row = paths->rows[t * paths->stride + d];
      REWIND_CHECK(row >= 0 && row < call.n_kv, "token {}: key {} of its path is row {}, outside the {} KV rows", t, d,
                   row, call.n_kv);
    }
  }
  // Bytes of one head's values in each row: the rows of a head are whole blocks of its type.
  REWIND_CHECK(call.k.row_bytes >= tensor::row_bytes(call.k.type, params.head_dim) * params.n_head_kv &&
                   call.v.row_bytes >= tensor::row_bytes(call.v.type, params.head_dim) * params.n_head_kv,
               "KV rows of {}/{} bytes hold fewer than {} heads of {} values", call.k.row_bytes, call.v.row_bytes,
               params.n_head_kv, params.head_dim);
}

}  // namespace

void attention_sequences_with(AttentionGroupFn group_fn, std::span<const AttentionCall> calls,
                              const AttentionParams& params, ThreadPool* pool) {
  REWIND_CHECK(params.n_head_kv > 0 && params.n_head % params.n_head_kv == 0,
               "n_head {} is not a multiple of n_head_kv {}", params.n_head, params.n_head_kv);
  REWIND_CHECK(params.head_dim > 0 && params.head_dim <= kAttentionMaxHeadDim, "head_dim {} outside [1, {}]",
               params.head_dim, kAttentionMaxHeadDim);
  int64_t n_tokens_total = 0;
  for (const AttentionCall& call : calls) {
    check_call(call, params);
    n_tokens_total += call.n_tokens;
  }
  if (n_tokens_total == 0) return;
  const int64_t head_dim = params.head_dim;
  const int64_t n_group = params.n_head / params.n_head_kv;
  const int64_t n_threads = pool != nullptr ? pool->n_threads() : 1;
  // Each KV head's query heads are split into n_split contiguous sub-groups of at most kAttentionMaxGroup:
  // as few as possible, so K/V blocks are shared by many heads, but enough for every thread to have work in
  // decode. Only speed depends on this: each head's arithmetic is the same in any sub-group.
  const int64_t n_split_min = (n_group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
  const int64_t kv_items = n_tokens_total * params.n_head_kv;
  const int64_t n_split_busy = (n_threads + kv_items - 1) / kv_items;
  const int64_t n_split = std::min(n_group, std::max(n_split_min, n_split_busy));
  // Items run sequence by sequence, then KV-head-major, tokens innermost: a thread's contiguous range covers
  // whole sub-groups over all tokens, which balances the causal triangle in prefill and keeps one KV head's
  // rows in that thread's cache.
  thread_local std::vector<int64_t> first_item;  // per call, and the total at the end
  first_item.resize(calls.size() + 1);
  first_item[0] = 0;
  for (size_t c = 0; c < calls.size(); ++c) {
    first_item[c + 1] = first_item[c] + params.n_head_kv * n_split * calls[c].n_tokens;
  }
  const std::vector<int64_t>& call_items = first_item;  // the workers' view: by name a thread_local is their own
  // Per thread index: K and V block scratch (AttentionGroup::k_scratch), grown on the caller before the round.
  thread_local std::vector<std::vector<float>> scratch_of_index;
  if (scratch_of_index.size() < static_cast<size_t>(2 * n_threads)) scratch_of_index.resize(2 * n_threads);
  for (std::vector<float>& scratch : scratch_of_index) {
    if (scratch.size() < static_cast<size_t>(kAttentionBlock * head_dim)) scratch.resize(kAttentionBlock * head_dim);
  }
  std::vector<std::vector<float>>& scratch_by_index = scratch_of_index;
  auto run_items = [&](int64_t begin, int64_t end, int ith) {
    size_t c = 0;
    size_t head_bytes_of = calls.size();  // the call whose head sizes k_head_bytes and v_head_bytes hold
    size_t k_head_bytes = 0;  // bytes of one KV head's values in a row of call c: whole blocks of its type
    size_t v_head_bytes = 0;
    for (int64_t item_in_all = begin; item_in_all < end; ++item_in_all) {
      while (item_in_all >= call_items[c + 1]) ++c;
      if (c != head_bytes_of) {
        k_head_bytes = tensor::row_bytes(calls[c].k.type, head_dim);
        v_head_bytes = tensor::row_bytes(calls[c].v.type, head_dim);
        head_bytes_of = c;
      }
      const AttentionCall& call = calls[c];
      const int64_t item = item_in_all - call_items[c];
      const int64_t n_tokens = call.n_tokens;
      const int64_t t = item % n_tokens;
      const int64_t split = (item / n_tokens) % n_split;
      const int64_t kv_head = item / (n_tokens * n_split);
      const int64_t h_begin = kv_head * n_group + n_group * split / n_split;
      const int64_t h_end = kv_head * n_group + n_group * (split + 1) / n_split;
      const int64_t pos = call.positions[t];
      const int64_t first = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
      const int64_t row_offset = (t * params.n_head + h_begin) * head_dim;
      const KeyPaths* paths = call.paths;
      const auto slice = [&](const KvRows& rows, size_t head_bytes) {
        KvSlice result{static_cast<const uint8_t*>(rows.data) + static_cast<size_t>(first) * rows.row_bytes +
                           static_cast<size_t>(kv_head) * head_bytes,
                       rows.type, rows.row_bytes};
        if (paths != nullptr && pos >= paths->mapped_from) {
          result.n_direct = std::max<int64_t>(0, paths->mapped_from - first);
          result.mapped_rows = paths->rows + t * paths->stride + std::max<int64_t>(0, first - paths->mapped_from);
          result.row_base = first;
        }
        return result;
      };
      group_fn(AttentionGroup{.q = call.q + row_offset,
                              .n_queries = h_end - h_begin,
                              .k = slice(call.k, k_head_bytes),
                              .v = slice(call.v, v_head_bytes),
                              .n_keys = pos - first + 1,
                              .head_dim = head_dim,
                              .scale = params.scale,
                              .softcap = params.softcap,
                              .out = call.out + row_offset,
                              .k_scratch = scratch_by_index[2 * ith].data(),
                              .v_scratch = scratch_by_index[2 * ith + 1].data()});
    }
  };
  const int64_t n_items = first_item.back();
  if (n_threads > 1 && n_items > 1) {
    // parallel_for's split, with the thread index that picks the scratch.
    pool->run([&](int ith, int nth) {
      const int64_t begin = n_items * ith / nth;
      const int64_t end = n_items * (ith + 1) / nth;
      if (begin < end) run_items(begin, end, ith);
    });
  } else {
    run_items(0, n_items, 0);
  }
}

namespace {

// The online-softmax state of one query head.
struct QueryState {
  float running_max;
  double weight_sum;
  double* acc;  // [head_dim], sum of weight * value scaled to running_max
};

// One block of keys for one query head: scores, then, if the block raises the running maximum, the float64
// accumulators are rescaled by exp(old - new); the block's weighted values are summed in float and folded into
// the float64 accumulator.
void block_step_scalar(const AttentionGroup& group, const float* q, const float* k_block, int64_t k_stride,
                       const float* v_block, int64_t v_stride, int64_t n, QueryState& state, float* weights,
                       float* block_acc) {
  const int64_t head_dim = group.head_dim;
  float block_max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* k_row = k_block + j * k_stride;
    float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t d = 0;
    for (; d + 4 <= head_dim; d += 4) {
      for (int lane = 0; lane < 4; ++lane) partial[lane] += q[d + lane] * k_row[d + lane];
    }
    float dot = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; d < head_dim; ++d) dot += q[d] * k_row[d];
    float score = dot * group.scale;
    if (group.softcap > 0.0f) score = group.softcap * std::tanh(score / group.softcap);
    weights[j] = score;
    block_max = std::max(block_max, score);
  }
  if (block_max > state.running_max) {
    const double factor = std::exp(static_cast<double>(state.running_max) - static_cast<double>(block_max));
    for (int64_t d = 0; d < head_dim; ++d) state.acc[d] *= factor;
    state.weight_sum *= factor;
    state.running_max = block_max;
  }
  std::fill(block_acc, block_acc + head_dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float weight = std::exp(weights[j] - state.running_max);
    state.weight_sum += weight;
    const float* v_row = v_block + j * v_stride;
    for (int64_t d = 0; d < head_dim; ++d) block_acc[d] += weight * v_row[d];
  }
  for (int64_t d = 0; d < head_dim; ++d) state.acc[d] += block_acc[d];
}

}  // namespace

void attention_group_scalar(const AttentionGroup& group) {
  const int64_t head_dim = group.head_dim;
  double acc[kAttentionMaxGroup * kAttentionMaxHeadDim];
  float block_acc[kAttentionMaxHeadDim];
  float weights[kAttentionBlock];
  QueryState states[kAttentionMaxGroup];
  for (int64_t i = 0; i < group.n_queries; ++i) {
    states[i] = {.running_max = -std::numeric_limits<float>::infinity(), .weight_sum = 0.0,
                 .acc = acc + i * head_dim};
    std::fill(states[i].acc, states[i].acc + head_dim, 0.0);
  }
  for (int64_t block = 0; block < group.n_keys; block += kAttentionBlock) {
    const int64_t n = std::min(kAttentionBlock, group.n_keys - block);
    int64_t k_stride = 0;
    int64_t v_stride = 0;
    const float* k_block = kv_block(group.k, block, n, head_dim, group.k_scratch, &k_stride);
    const float* v_block = kv_block(group.v, block, n, head_dim, group.v_scratch, &v_stride);
    for (int64_t i = 0; i < group.n_queries; ++i) {
      block_step_scalar(group, group.q + i * head_dim, k_block, k_stride, v_block, v_stride, n, states[i], weights,
                        block_acc);
    }
  }
  for (int64_t i = 0; i < group.n_queries; ++i) {
    float* out = group.out + i * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) out[d] = static_cast<float>(states[i].acc[d] / states[i].weight_sum);
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
