// Gated delta rule, AVX2 path. The forward and apply_gated_delta_record_avx2 update the state with the same
// template (update_rows), whose only state arithmetic is updated(): fma(k, u, M * decay) per element, so a
// replayed record reproduces the forward's state bit for bit. The forward takes value rows eight at a time
// (4 KiB of state at head_k_dim 128, held in L1) through a chunk of tokens: per token, one pass for S'ᵀk and
// one that rewrites the rows and sums Sᵀq. A head_k_dim that is not a multiple of 8 ends in one masked block.
#include <immintrin.h>

#include "kernels/cpu/recurrent_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"

namespace rwd::kernels::cpu::detail {
namespace {

// Lanes 0 .. n-1 set, for the last n_tail = head_k_dim % 8 elements of a row.
inline __m256i tail_mask(int64_t n) {
  static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
}

// The one state-update expression of this path: M * decay rounded, then k * u added with one rounding.
inline __m256 updated(__m256 m, __m256 decay, __m256 k, __m256 u) {
  return _mm256_fmadd_ps(k, u, _mm256_mul_ps(m, decay));
}

// Where a row block's operands come from: full blocks load directly, the tail block through the mask (masked
// lanes read as 0 and are never stored).
struct Block {
  int64_t i;
  bool masked;
  __m256i mask;
  __m256 load(const float* p) const { return masked ? _mm256_maskload_ps(p + i, mask) : _mm256_loadu_ps(p + i); }
  void store(float* p, __m256 value) const {
    if (masked) {
      _mm256_maskstore_ps(p + i, mask, value);
    } else {
      _mm256_storeu_ps(p + i, value);
    }
  }
};

// Rows rows[0 .. kRows-1] (each head_k_dim floats): M = updated(M, decay, k, u_r), stored to out_rows (rows
// itself, or where a discarded update goes), and with kWithOutput, acc[r] collects M q over the updated values,
// lane by lane.
template <int kRows, bool kPerChannel, bool kWithOutput>
inline void update_rows(const float* const* rows, float* const* out_rows, int64_t dk, const float* k,
                        const float* decay, const float* u, const float* q, __m256* acc) {
  __m256 u_r[kRows];
  for (int r = 0; r < kRows; ++r) u_r[r] = _mm256_set1_ps(u[r]);
  const __m256 decay_all = _mm256_set1_ps(decay[0]);
  const int64_t n_full = dk & ~int64_t{7};
  const auto run_block = [&](const Block& block) {
    const __m256 k_b = block.load(k);
    const __m256 decay_b = kPerChannel ? block.load(decay) : decay_all;
    const __m256 q_b = kWithOutput ? block.load(q) : _mm256_setzero_ps();
    for (int r = 0; r < kRows; ++r) {
      const __m256 m = updated(block.load(rows[r]), decay_b, k_b, u_r[r]);
      block.store(out_rows[r], m);
      if constexpr (kWithOutput) acc[r] = _mm256_fmadd_ps(m, q_b, acc[r]);
    }
  };
  for (int64_t i = 0; i < n_full; i += 8) run_block(Block{i, false, _mm256_setzero_si256()});
  if (n_full < dk) run_block(Block{n_full, true, tail_mask(dk - n_full)});
}

// A record apply: every row through update_rows, four rows per group so k and decay are loaded once for four.
template <bool kPerChannel>
void apply_record(float* head_state, int64_t dk, int64_t dv, const float* k, const float* decay, const float* u) {
  int64_t j = 0;
  for (; j + 4 <= dv; j += 4) {
    float* rows[4] = {head_state + j * dk, head_state + (j + 1) * dk, head_state + (j + 2) * dk,
                      head_state + (j + 3) * dk};
    update_rows<4, kPerChannel, false>(rows, rows, dk, k, decay, u + j, nullptr, nullptr);
  }
  for (; j < dv; ++j) {
    float* rows[1] = {head_state + j * dk};
    update_rows<1, kPerChannel, false>(rows, rows, dk, k, decay, u + j, nullptr, nullptr);
  }
}

// sk[r] = Σ_i rows[r][i] * decayed_k[i] for kRows rows, accumulated lane-wise in block order.
template <int kRows>
inline void dot_rows(const float* const* rows, int64_t dk, const float* decayed_k, __m256* acc) {
  const int64_t n_full = dk & ~int64_t{7};
  const auto run_block = [&](const Block& block) {
    const __m256 kd = block.load(decayed_k);
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(block.load(rows[r]), kd, acc[r]);
  };
  for (int64_t i = 0; i < n_full; i += 8) run_block(Block{i, false, _mm256_setzero_si256()});
  if (n_full < dk) run_block(Block{n_full, true, tail_mask(dk - n_full)});
}

// Tokens whose decays and decayed keys are prepared together; each row group then runs through all of them,
// with their k, q, decay and decayed k (16 KiB at head_k_dim 128) in L1 beside the group's 4 KiB of rows.
constexpr int64_t kTokenChunk = 8;

struct TokenChunk {
  int64_t t0;
  int64_t n;
  alignas(32) float decay[kTokenChunk][kGatedDeltaMaxHeadDim];
  alignas(32) float decayed_k[kTokenChunk][kGatedDeltaMaxHeadDim];
};

// Rows j .. j + kRows - 1 (kRows 8 or 1) of head h through the chunk's tokens. Every row's sums are reduced by
// the same tree (a reduce4 lane equals reduce_add) in a group of eight or alone.
template <int kRows, bool kPerChannel>
void run_rows(const GatedDeltaArgs& args, int64_t h, int64_t hk, const TokenChunk& chunk, int64_t j,
              float* first_row) {
  const GatedDeltaParams& p = args.params;
  const int64_t dk = p.head_k_dim;
  const int64_t dv = p.head_v_dim;
  float* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = first_row + r * dk;
  // A discarded update (one token) is stored here instead: the same arithmetic, the rows left as they were.
  alignas(32) float discarded[kRows][kGatedDeltaMaxHeadDim];
  float* out_rows[kRows];
  for (int r = 0; r < kRows; ++r) out_rows[r] = args.discard_rows ? discarded[r] : rows[r];
  for (int64_t c = 0; c < chunk.n; ++c) {
    const int64_t t = chunk.t0 + c;
    const int64_t at = (t * p.n_head_v + h) * dv + j;  // element j of token t's value row of head h
    const float* k_t = args.k + (t * p.n_head_k + hk) * dk;
    const float* q_t = args.q + (t * p.n_head_k + hk) * dk;
    alignas(16) float sk[kRows] = {};
    __m256 acc[kRows];
    if (p.subtract_prediction) {
      for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
      dot_rows<kRows>(rows, dk, chunk.decayed_k[c], acc);
      if constexpr (kRows == 8) {
        _mm_store_ps(sk, vmath::reduce4(acc[0], acc[1], acc[2], acc[3]));
        _mm_store_ps(sk + 4, vmath::reduce4(acc[4], acc[5], acc[6], acc[7]));
      } else {
        sk[0] = vmath::reduce_add(acc[0]);
      }
    }
    const float beta = args.beta[t * p.n_head_v + h];
    float u[kRows];
    for (int r = 0; r < kRows; ++r) u[r] = beta * (args.v[at + r] - sk[r]);
    if (args.u_out != nullptr) {
      for (int r = 0; r < kRows; ++r) args.u_out[at + r] = u[r];
    }
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    if constexpr (kRows == 8) {
      update_rows<4, kPerChannel, true>(rows, out_rows, dk, k_t, chunk.decay[c], u, q_t, acc);
      update_rows<4, kPerChannel, true>(rows + 4, out_rows + 4, dk, k_t, chunk.decay[c], u + 4, q_t, acc + 4);
      const __m128 scale = _mm_set1_ps(p.scale);
      _mm_storeu_ps(args.out + at, _mm_mul_ps(vmath::reduce4(acc[0], acc[1], acc[2], acc[3]), scale));
      _mm_storeu_ps(args.out + at + 4, _mm_mul_ps(vmath::reduce4(acc[4], acc[5], acc[6], acc[7]), scale));
    } else {
      update_rows<1, kPerChannel, true>(rows, out_rows, dk, k_t, chunk.decay[c], u, q_t, acc);
      args.out[at] = vmath::reduce_add(acc[0]) * p.scale;
    }
  }
}

template <bool kPerChannel>
void forward_rows(const GatedDeltaArgs& args, int64_t h, int64_t row_begin, int64_t row_end, float* state_rows) {
  const GatedDeltaParams& p = args.params;
  const int64_t dk = p.head_k_dim;
  const int64_t n_decay = kPerChannel ? dk : 1;
  const int64_t hk = ref::key_head_of(h, p);
  TokenChunk chunk;
  for (chunk.t0 = 0; chunk.t0 < args.n_tokens; chunk.t0 += kTokenChunk) {
    chunk.n = args.n_tokens - chunk.t0 < kTokenChunk ? args.n_tokens - chunk.t0 : kTokenChunk;
    for (int64_t c = 0; c < chunk.n; ++c) {
      const int64_t t = chunk.t0 + c;
      const float* k_t = args.k + (t * p.n_head_k + hk) * dk;
      gated_delta_decay_avx2(args.g + (t * p.n_head_v + h) * n_decay, chunk.decay[c], n_decay);
      for (int64_t i = 0; i < dk; ++i) chunk.decayed_k[c][i] = k_t[i] * chunk.decay[c][kPerChannel ? i : 0];
    }
    int64_t j = row_begin;
    for (; j + 8 <= row_end; j += 8) run_rows<8, kPerChannel>(args, h, hk, chunk, j, state_rows + (j - row_begin) * dk);
    for (; j < row_end; ++j) run_rows<1, kPerChannel>(args, h, hk, chunk, j, state_rows + (j - row_begin) * dk);
  }
}

}  // namespace

void gated_delta_decay_avx2(const float* g, float* decay, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(decay + i, vmath::exp(_mm256_loadu_ps(g + i)));
  if (i < n) {
    const __m256i mask = tail_mask(n - i);
    _mm256_maskstore_ps(decay + i, mask, vmath::exp(_mm256_maskload_ps(g + i, mask)));
  }
}

void apply_gated_delta_record_avx2(float* head_state, const float* k, const float* u, const float* decay,
                                   const GatedDeltaParams& params) {
  if (params.per_channel_decay) {
    apply_record<true>(head_state, params.head_k_dim, params.head_v_dim, k, decay, u);
  } else {
    apply_record<false>(head_state, params.head_k_dim, params.head_v_dim, k, decay, u);
  }
}

void gated_delta_rows_avx2(const GatedDeltaArgs& args, int64_t head, int64_t row_begin, int64_t row_end,
                           float* rows) {
  if (args.params.per_channel_decay) {
    forward_rows<true>(args, head, row_begin, row_end, rows);
  } else {
    forward_rows<false>(args, head, row_begin, row_end, rows);
  }
}

void apply_record_rows_avx2(float* rows, int64_t n_rows, const float* k, const float* u, const float* decay,
                            const GatedDeltaParams& params) {
  if (params.per_channel_decay) {
    apply_record<true>(rows, params.head_k_dim, n_rows, k, decay, u);
  } else {
    apply_record<false>(rows, params.head_k_dim, n_rows, k, decay, u);
  }
}

}  // namespace rwd::kernels::cpu::detail
