// Gated delta rule: argument checks, the split of the work over threads, dispatch, and the portable path.
// Each value row j of a head's state (M[j][:], head_k_dim floats) evolves independently of the other rows, so a
// row is run through a chunk of tokens while it sits in L1: per token, one read for S'ᵀk and one rewrite with
// the update routine that apply_gated_delta_record also uses, summing Sᵀq from the new values (DESIGN §9).
// S'ᵀk is computed as S (decay ∘ k), which is S'ᵀk up to rounding; only u (recorded) depends on it.
#include "kernels/cpu/gated_delta.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/recurrent_kernel_variants.h"

namespace rwd::kernels::cpu {
namespace {

void check_params(const GatedDeltaParams& params) {
  REWIND_CHECK(params.n_head_k > 0 && params.n_head_v > 0 && params.n_head_v % params.n_head_k == 0,
               "gated_delta: n_head_v={} must be a positive multiple of n_head_k={}", params.n_head_v,
               params.n_head_k);
  REWIND_CHECK(params.head_k_dim >= 1 && params.head_k_dim <= kGatedDeltaMaxHeadDim && params.head_v_dim >= 1 &&
                   params.head_v_dim <= kGatedDeltaMaxHeadDim,
               "gated_delta: head_k_dim={} and head_v_dim={} must be in 1..{}", params.head_k_dim,
               params.head_v_dim, kGatedDeltaMaxHeadDim);
}

}  // namespace

void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                      int64_t n_tokens, float* state, float* out, float* u_out, const GatedDeltaParams& params,
                      ThreadPool* pool) {
  detail::gated_delta_rule_with(has_avx2_fma() ? detail::gated_delta_rows_avx2 : detail::gated_delta_rows_scalar,
                                {q, k, v, g, beta, n_tokens, state, out, u_out, params}, pool);
}

void gated_delta_rule_io(const float* q, const float* k, const float* v, const float* g, const float* beta,
                         int64_t n_tokens, float* state, const GatedDeltaStateIo& io, float* out, float* u_out,
                         const GatedDeltaParams& params, ThreadPool* pool) {
  const bool avx2 = has_avx2_fma();
  detail::gated_delta_rule_with(avx2 ? detail::gated_delta_rows_avx2 : detail::gated_delta_rows_scalar,
                                avx2 ? detail::apply_record_rows_avx2 : detail::apply_record_rows_scalar,
                                {q, k, v, g, beta, n_tokens, state, out, u_out, params}, io, pool);
}

void gated_delta_rules(std::span<const GatedDeltaCall> calls, const GatedDeltaParams& params, ThreadPool* pool) {
  const bool avx2 = has_avx2_fma();
  detail::gated_delta_rules_with(avx2 ? detail::gated_delta_rows_avx2 : detail::gated_delta_rows_scalar,
                                 avx2 ? detail::apply_record_rows_avx2 : detail::apply_record_rows_scalar, calls,
                                 params, pool);
}

void gated_delta_decay(const float* g, float* decay, int64_t n) {
  if (has_avx2_fma()) {
    detail::gated_delta_decay_avx2(g, decay, n);
  } else {
    detail::gated_delta_decay_scalar(g, decay, n);
  }
}

void apply_gated_delta_record(float* head_state, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params) {
  check_params(params);
  if (has_avx2_fma()) {
    detail::apply_gated_delta_record_avx2(head_state, k, u, decay, params);
  } else {
    detail::apply_gated_delta_record_scalar(head_state, k, u, decay, params);
  }
}

namespace detail {

void gated_delta_rule_with(GatedDeltaRowsFn rows_fn, const GatedDeltaArgs& args, ThreadPool* pool) {
  gated_delta_rule_with(rows_fn, apply_record_rows_scalar, args, GatedDeltaStateIo{}, pool);
}

namespace {

// Applies every record of `records` to rows [row_begin, row_end) of head h, held at `rows`.
void apply_records_to_rows(ApplyRecordRowsFn apply_fn, const GatedDeltaRecords& records, const GatedDeltaParams& p,
                           int64_t h, int64_t row_begin, int64_t row_end, float* rows) {
  const int64_t n_decay = p.per_channel_decay ? p.head_k_dim : 1;
  const int64_t hk = ref::key_head_of(h, p);
  for (int64_t t = 0; t < records.n; ++t) {
    apply_fn(rows, row_end - row_begin, records.k + (t * p.n_head_k + hk) * p.head_k_dim,
             records.u + (t * p.n_head_v + h) * p.head_v_dim + row_begin,
             records.decay + (t * p.n_head_v + h) * n_decay, p);
  }
}

// The call's tokens from `first` to `first + n` as arguments of their own: each token's arithmetic does not
// depend on which call runs it.
GatedDeltaArgs token_range(const GatedDeltaArgs& args, int64_t first, int64_t n) {
  const GatedDeltaParams& p = args.params;
  const int64_t k_row = p.n_head_k * p.head_k_dim;
  const int64_t v_row = p.n_head_v * p.head_v_dim;
  const int64_t g_row = p.n_head_v * (p.per_channel_decay ? p.head_k_dim : 1);
  GatedDeltaArgs range = args;
  range.q = args.q + first * k_row;
  range.k = args.k + first * k_row;
  range.v = args.v + first * v_row;
  range.g = args.g + first * g_row;
  range.beta = args.beta + first * p.n_head_v;
  range.n_tokens = n;
  range.out = args.out + first * v_row;
  range.u_out = args.u_out != nullptr ? args.u_out + first * v_row : nullptr;
  return range;
}

// Per token of a tree: another token after it has its parent (so the parent's rows must outlive its run), and
// some token has it as parent (its own rows are read again).
constexpr uint8_t kLaterSibling = 1;
constexpr uint8_t kHasChild = 2;

// Into `flags`, reusing its storage (and a working row of this thread's): a warm step allocates nothing.
void tree_flags(const int32_t* parents, int64_t n, std::vector<uint8_t>& flags) {
  thread_local std::vector<int64_t> last_child;  // per parent (+1: the roots' -1)
  flags.assign(static_cast<size_t>(n), 0);
  last_child.assign(static_cast<size_t>(n + 1), -1);
  for (int64_t t = 0; t < n; ++t) {
    int64_t& last = last_child[static_cast<size_t>(parents[t] + 1)];
    if (last >= 0) flags[last] |= kLaterSibling;
    last = t;
    if (parents[t] >= 0) flags[parents[t]] |= kHasChild;
  }
}

// One pool thread index's working rows: a read-only call's copy of a row block, and a tree's path and its
// copies. Kept per thread index, not per OS thread: a late worker's index runs on the caller, and storage that
// followed the OS thread would then grow in the middle of a warm step.
struct RowsScratch {
  struct PathEntry {
    int64_t node;
    float* rows;
  };
  std::vector<float> copy;
  std::vector<std::vector<float>> tree_copies;
  std::vector<PathEntry> tree_path;
};

// A token tree over rows [row_begin, row_end) of head h, `base` holding them as the tree's roots start from.
// The path from the roots to the current token is a stack whose entry s lives in copies[s] (entry 0 in base);
// a token with a later sibling runs on a fresh copy of its parent's rows, unless it is a leaf, which reads its
// parent's rows and writes nothing (discard_rows); the last child runs on the parent's rows themselves, and a
// chain of only children runs in one rows_fn call.
void run_tree_rows(GatedDeltaRowsFn rows_fn, const GatedDeltaArgs& args, const int32_t* parents, const uint8_t* flags,
                   int64_t h, int64_t row_begin, int64_t row_end, float* base, RowsScratch& scratch) {
  std::vector<std::vector<float>>& copies = scratch.tree_copies;
  std::vector<RowsScratch::PathEntry>& path = scratch.tree_path;
  const int64_t n = args.n_tokens;
  const size_t n_floats = static_cast<size_t>((row_end - row_begin) * args.params.head_k_dim);
  path.clear();
  path.push_back({-1, base});
  for (int64_t t = 0; t < n;) {
    while (path.back().node != parents[t]) {
      path.pop_back();
      REWIND_CHECK(!path.empty(), "gated_delta: token {} of a tree does not follow its parent {} depth first", t,
                   parents[t]);
    }
    if ((flags[t] & kLaterSibling) != 0 && (flags[t] & kHasChild) == 0) {
      GatedDeltaArgs leaf = token_range(args, t, 1);
      leaf.discard_rows = true;
      rows_fn(leaf, h, row_begin, row_end, path.back().rows);
      ++t;
      continue;
    }
    if ((flags[t] & kLaterSibling) != 0) {
      const size_t s = path.size();
      if (copies.size() < s + 1) copies.resize(s + 1);
      if (copies[s].size() < n_floats) copies[s].resize(n_floats);
      std::copy_n(path.back().rows, n_floats, copies[s].data());
      path.push_back({t, copies[s].data()});
    } else {
      path.back().node = t;
    }
    int64_t end = t + 1;
    while (end < n && parents[end] == end - 1 && (flags[end] & kLaterSibling) == 0) ++end;
    rows_fn(token_range(args, t, end - t), h, row_begin, row_end, path.back().rows);
    path.back().node = end - 1;
    t = end;
  }
}

}  // namespace

void gated_delta_rule_with(GatedDeltaRowsFn rows_fn, ApplyRecordRowsFn apply_fn, const GatedDeltaArgs& args,
                           const GatedDeltaStateIo& io, ThreadPool* pool) {
  const GatedDeltaCall call{args.q, args.k, args.v, args.g, args.beta, args.n_tokens, args.state, io, args.out,
                            args.u_out};
  gated_delta_rules_with(rows_fn, apply_fn, {&call, 1}, args.params, pool);
}

void gated_delta_rules_with(GatedDeltaRowsFn rows_fn, ApplyRecordRowsFn apply_fn,
                            std::span<const GatedDeltaCall> calls, const GatedDeltaParams& params, ThreadPool* pool) {
  check_params(params);
  // Calls on one state form a group; a work item is a (group, head, row range), its calls run in order.
  thread_local std::vector<size_t> group_begin;
  thread_local std::vector<std::vector<uint8_t>> flags;
  group_begin.clear();
  if (flags.size() < calls.size()) flags.resize(calls.size());
  bool any_work = false;
  for (size_t c = 0; c < calls.size(); ++c) {
    const GatedDeltaCall& call = calls[c];
    const GatedDeltaStateIo& io = call.io;
    REWIND_CHECK(call.n_tokens >= 0, "gated_delta: call {}: n_tokens={} is negative", c, call.n_tokens);
    REWIND_CHECK(io.fold.n >= 0 && io.ahead.n >= 0, "gated_delta: call {}: negative record counts {} and {}", c,
                 io.fold.n, io.ahead.n);
    REWIND_CHECK(io.read_only || io.ahead.n == 0, "gated_delta: call {}: records ahead of the state need read_only",
                 c);
    REWIND_CHECK(io.read_only || io.parents == nullptr, "gated_delta: call {}: a token tree needs read_only", c);
    for (int64_t t = 0; io.parents != nullptr && t < call.n_tokens; ++t) {
      REWIND_CHECK(io.parents[t] >= -1 && io.parents[t] < t, "gated_delta: call {}: token {} of a tree has parent {}",
                   c, t, io.parents[t]);
    }
    REWIND_CHECK(!io.read_only || call.n_tokens == 0 || call.u_out != nullptr,
                 "gated_delta: call {}: a read-only call must write its records (u_out)", c);
    if (c == 0 || call.state != calls[c - 1].state) {
      for (size_t earlier = 0; earlier < c; ++earlier) {
        REWIND_CHECK(calls[earlier].state != call.state,
                     "gated_delta: calls {} and {} share a state but are not adjacent", earlier, c);
      }
      group_begin.push_back(c);
    }
    if (io.parents != nullptr) {
      tree_flags(io.parents, call.n_tokens, flags[c]);
    } else {
      flags[c].clear();
    }
    any_work = any_work || call.n_tokens > 0 || io.fold.n > 0;
  }
  if (!any_work) return;
  group_begin.push_back(calls.size());
  const auto n_groups = static_cast<int64_t>(group_begin.size()) - 1;
  const int n_threads = pool != nullptr ? pool->n_threads() : 1;
  const int64_t dv = params.head_v_dim;
  const int64_t dk = params.head_k_dim;
  // Heads are the work items; with fewer than two heads per thread, heads are also cut into row ranges of at
  // least 32 rows (a multiple of 8, the AVX2 row group), so that decoding a few heads still uses every thread.
  const int64_t n_heads = n_groups * params.n_head_v;
  int64_t n_row_blocks = 1;
  if (n_heads < 2 * n_threads) n_row_blocks = std::min((2 * n_threads + n_heads - 1) / n_heads, (dv + 31) / 32);
  const int64_t rows_per_block = ((dv + n_row_blocks - 1) / n_row_blocks + 7) / 8 * 8;
  n_row_blocks = (dv + rows_per_block - 1) / rows_per_block;
  const int64_t items_per_group = params.n_head_v * n_row_blocks;
  thread_local std::vector<RowsScratch> scratch_of_index;
  if (scratch_of_index.size() < static_cast<size_t>(n_threads)) scratch_of_index.resize(n_threads);
  // The workers see these through references: by name, a thread_local is each thread's own.
  const std::vector<size_t>& groups = group_begin;
  const std::vector<std::vector<uint8_t>>& call_flags = flags;
  std::vector<RowsScratch>& scratch_by_index = scratch_of_index;
  const auto run_items = [&](int64_t item_begin, int64_t item_end, RowsScratch& scratch) {
    // The working copy of a read-only call: one row block per thread index, reused, so it stays in cache.
    std::vector<float>& copy = scratch.copy;
    for (int64_t item = item_begin; item < item_end; ++item) {
      const int64_t group = item / items_per_group;
      const int64_t h = item % items_per_group / n_row_blocks;
      const int64_t row_begin = item % n_row_blocks * rows_per_block;
      const int64_t row_end = std::min(dv, row_begin + rows_per_block);
      for (size_t c = groups[group]; c < groups[group + 1]; ++c) {
        const GatedDeltaCall& call = calls[c];
        const GatedDeltaStateIo& io = call.io;
        float* in_state = call.state + (h * dv + row_begin) * dk;
        apply_records_to_rows(apply_fn, io.fold, params, h, row_begin, row_end, in_state);
        if (call.n_tokens == 0) continue;
        float* rows = in_state;
        if (io.read_only) {
          const size_t n_floats = static_cast<size_t>((row_end - row_begin) * dk);
          if (copy.size() < n_floats) copy.resize(n_floats);
          std::copy_n(in_state, n_floats, copy.data());
          rows = copy.data();
          apply_records_to_rows(apply_fn, io.ahead, params, h, row_begin, row_end, rows);
        }
        const GatedDeltaArgs args{call.q, call.k, call.v, call.g, call.beta, call.n_tokens, call.state, call.out,
                                  call.u_out, params};
        if (io.parents != nullptr) {
          run_tree_rows(rows_fn, args, io.parents, call_flags[c].data(), h, row_begin, row_end, rows, scratch);
        } else {
          rows_fn(args, h, row_begin, row_end, rows);
        }
      }
    }
  };
  const int64_t n_items = n_groups * items_per_group;
  if (n_threads == 1) {
    run_items(0, n_items, scratch_by_index[0]);
  } else {
    // parallel_for's split, with the thread index that picks the scratch.
    pool->run([&](int ith, int nth) {
      const int64_t begin = n_items * ith / nth;
      const int64_t end = n_items * (ith + 1) / nth;
      if (begin < end) run_items(begin, end, scratch_by_index[ith]);
    });
  }
}

namespace {

// Tokens whose decays and decayed keys are prepared together; each row then runs through all of them.
constexpr int64_t kTokenChunk = 8;

// The one state-update expression of the portable path, shared by the forward and the record apply:
// two rounded products, one rounded sum.
template <bool kPerChannel>
inline void update_row(float* row, int64_t dk, const float* k, const float* decay, float u) {
  for (int64_t i = 0; i < dk; ++i) row[i] = row[i] * (kPerChannel ? decay[i] : decay[0]) + k[i] * u;
}

// Eight partial sums in a fixed order, combined as a tree: reproducible and off the add-latency chain.
inline float dot(const float* a, const float* b, int64_t n) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int lane = 0; lane < 8; ++lane) partial[lane] += a[i + lane] * b[i + lane];
  }
  for (; i < n; ++i) partial[i % 8] += a[i] * b[i];
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) + ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

template <bool kPerChannel>
void apply_record(float* head_state, const float* k, const float* u, const float* decay,
                  const GatedDeltaParams& params) {
  for (int64_t j = 0; j < params.head_v_dim; ++j) {
    update_row<kPerChannel>(head_state + j * params.head_k_dim, params.head_k_dim, k, decay, u[j]);
  }
}

template <bool kPerChannel>
void forward_rows(const GatedDeltaArgs& args, int64_t h, int64_t row_begin, int64_t row_end, float* rows) {
  const GatedDeltaParams& p = args.params;
  const int64_t dk = p.head_k_dim;
  const int64_t dv = p.head_v_dim;
  const int64_t n_decay = kPerChannel ? dk : 1;
  const int64_t hk = ref::key_head_of(h, p);
  float decay[kTokenChunk][kGatedDeltaMaxHeadDim];
  float decayed_k[kTokenChunk][kGatedDeltaMaxHeadDim];
  float discarded[kGatedDeltaMaxHeadDim];  // a discarded update's row (args.discard_rows)
  for (int64_t t0 = 0; t0 < args.n_tokens; t0 += kTokenChunk) {
    const int64_t n_chunk = std::min(kTokenChunk, args.n_tokens - t0);
    for (int64_t c = 0; c < n_chunk; ++c) {
      const int64_t t = t0 + c;
      const float* k_t = args.k + (t * p.n_head_k + hk) * dk;
      gated_delta_decay_scalar(args.g + (t * p.n_head_v + h) * n_decay, decay[c], n_decay);
      for (int64_t i = 0; i < dk; ++i) decayed_k[c][i] = k_t[i] * decay[c][kPerChannel ? i : 0];
    }
    for (int64_t j = row_begin; j < row_end; ++j) {
      float* row = rows + (j - row_begin) * dk;
      if (args.discard_rows) {
        std::copy_n(row, dk, discarded);
        row = discarded;
      }
      for (int64_t c = 0; c < n_chunk; ++c) {
        const int64_t t = t0 + c;
        const int64_t at = (t * p.n_head_v + h) * dv + j;  // element j of token t's value row of head h
        const float prediction = p.subtract_prediction ? dot(row, decayed_k[c], dk) : 0.0f;
        const float u = args.beta[t * p.n_head_v + h] * (args.v[at] - prediction);
        if (args.u_out != nullptr) args.u_out[at] = u;
        update_row<kPerChannel>(row, dk, args.k + (t * p.n_head_k + hk) * dk, decay[c], u);
        args.out[at] = dot(row, args.q + (t * p.n_head_k + hk) * dk, dk) * p.scale;
      }
    }
  }
}

}  // namespace

void gated_delta_decay_scalar(const float* g, float* decay, int64_t n) {
  for (int64_t i = 0; i < n; ++i) decay[i] = std::exp(g[i]);
}

void apply_gated_delta_record_scalar(float* head_state, const float* k, const float* u, const float* decay,
                                     const GatedDeltaParams& params) {
  if (params.per_channel_decay) {
    apply_record<true>(head_state, k, u, decay, params);
  } else {
    apply_record<false>(head_state, k, u, decay, params);
  }
}

void gated_delta_rows_scalar(const GatedDeltaArgs& args, int64_t head, int64_t row_begin, int64_t row_end,
                             float* rows) {
  if (args.params.per_channel_decay) {
    forward_rows<true>(args, head, row_begin, row_end, rows);
  } else {
    forward_rows<false>(args, head, row_begin, row_end, rows);
  }
}

void apply_record_rows_scalar(float* rows, int64_t n_rows, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params) {
  for (int64_t j = 0; j < n_rows; ++j) {
    float* row = rows + j * params.head_k_dim;
    if (params.per_channel_decay) {
      update_row<true>(row, params.head_k_dim, k, decay, u[j]);
    } else {
      update_row<false>(row, params.head_k_dim, k, decay, u[j]);
    }
  }
}

}  // namespace detail
}  // namespace rwd::kernels::cpu
