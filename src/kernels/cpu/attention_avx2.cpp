// Attention group kernel, AVX2 path: the block structure of attention_group_scalar (attention.cpp) with 8 keys
// scored at a time (q·k in 8-lane FMA, reduced by a fixed tree), the 8-lane exp/tanh, and the weighted values
// accumulated with FMA, four keys per pass over the block accumulator. Each key's score and each output
// element's sum use the same instructions in the same order wherever the key falls, so results depend only on
// the token's own key range. Within a block the group's heads are innermost, so each K and V row is read from
// memory once for all the query heads that share it (decode is bound by that read).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::detail {
namespace {

static_assert(kAttentionBlock % 8 == 0, "blocks hold whole groups of 8 keys");

// q·k for four key rows; each lane is reduced by vmath::reduce4's tree, then head_dim % 8 leftovers are added.
inline __m128 dot4(const float* q, const float* const* k_rows, int64_t head_dim) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc3 = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    acc0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[0] + d), acc0);
    acc1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[1] + d), acc1);
    acc2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[2] + d), acc2);
    acc3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k_rows[3] + d), acc3);
  }
  __m128 sums = vmath::reduce4(acc0, acc1, acc2, acc3);
  if (d < head_dim) {
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, sums);
    for (int lane = 0; lane < 4; ++lane) {
      for (int64_t dd = d; dd < head_dim; ++dd) lanes[lane] = std::fma(q[dd], k_rows[lane][dd], lanes[lane]);
    }
    sums = _mm_load_ps(lanes);
  }
  return sums;
}

// Scores of keys [first, first + 8) of a block of n keys into scores[0..8); keys at or past n repeat the last
// key (their scores are computed and later given weight 0), so the block maximum is unaffected.
inline __m256 score8(const AttentionGroup& group, const float* q, const float* k_block, int64_t k_stride, int64_t n,
                     int64_t first, float* scores) {
  const float* k_rows[8];
  for (int lane = 0; lane < 8; ++lane) {
    k_rows[lane] = k_block + std::min<int64_t>(first + lane, n - 1) * k_stride;
  }
  __m256 s = _mm256_set_m128(dot4(q, k_rows + 4, group.head_dim), dot4(q, k_rows, group.head_dim));
  s = _mm256_mul_ps(s, _mm256_set1_ps(group.scale));
  if (group.softcap > 0.0f) {
    const __m256 cap = _mm256_set1_ps(group.softcap);
    s = _mm256_mul_ps(cap, vmath::tanh(_mm256_div_ps(s, cap)));
  }
  _mm256_storeu_ps(scores, s);
  return s;
}

// block_acc[d] = fma(w_j, v_j[d], block_acc[d]) for the four keys j in order.
inline void accumulate4(const float* w, const float* const* v_rows, int64_t head_dim, float* block_acc) {
  const int64_t n_vec = head_dim - head_dim % 8;
  const __m256 w0 = _mm256_set1_ps(w[0]);
  const __m256 w1 = _mm256_set1_ps(w[1]);
  const __m256 w2 = _mm256_set1_ps(w[2]);
  const __m256 w3 = _mm256_set1_ps(w[3]);
  for (int64_t d = 0; d < n_vec; d += 8) {
    __m256 a = _mm256_loadu_ps(block_acc + d);
    a = _mm256_fmadd_ps(w0, _mm256_loadu_ps(v_rows[0] + d), a);
    a = _mm256_fmadd_ps(w1, _mm256_loadu_ps(v_rows[1] + d), a);
    a = _mm256_fmadd_ps(w2, _mm256_loadu_ps(v_rows[2] + d), a);
    a = _mm256_fmadd_ps(w3, _mm256_loadu_ps(v_rows[3] + d), a);
    _mm256_storeu_ps(block_acc + d, a);
  }
  for (int64_t d = n_vec; d < head_dim; ++d) {
    float a = block_acc[d];
    for (int key = 0; key < 4; ++key) a = std::fma(w[key], v_rows[key][d], a);
    block_acc[d] = a;
  }
}

// block_acc[d] = fma(w, v_row[d], block_acc[d]): the same per-element operation as accumulate4.
inline void accumulate1(float w, const float* v_row, int64_t head_dim, float* block_acc) {
  const int64_t n_vec = head_dim - head_dim % 8;
  const __m256 w8 = _mm256_set1_ps(w);
  for (int64_t d = 0; d < n_vec; d += 8) {
    _mm256_storeu_ps(block_acc + d, _mm256_fmadd_ps(w8, _mm256_loadu_ps(v_row + d), _mm256_loadu_ps(block_acc + d)));
  }
  for (int64_t d = n_vec; d < head_dim; ++d) block_acc[d] = std::fma(w, v_row[d], block_acc[d]);
}

// The online-softmax state of one query head.
struct QueryState {
  float running_max;
  double weight_sum;
  double* acc;        // [head_dim], 32-byte aligned: sum of weight * value scaled to running_max
  float* weights;     // [kAttentionBlock]: the block's scores, then its weights
  float* block_acc;   // [head_dim]: the block's weighted values, in float
};

// Rescales the head's accumulators if the block raised its maximum, turns the block's scores into weights
// (0 past the n real keys) and adds them to the weight sum.
void block_weights(int64_t n, int64_t head_dim, __m256 max8, QueryState& state) {
  const int64_t n_vec4 = head_dim - head_dim % 4;
  const float block_max = vmath::reduce_max(max8);
  if (block_max > state.running_max) {
    const double factor = std::exp(static_cast<double>(state.running_max) - static_cast<double>(block_max));
    const __m256d factor4 = _mm256_set1_pd(factor);
    for (int64_t d = 0; d < n_vec4; d += 4) {
      _mm256_store_pd(state.acc + d, _mm256_mul_pd(_mm256_load_pd(state.acc + d), factor4));
    }
    for (int64_t d = n_vec4; d < head_dim; ++d) state.acc[d] *= factor;
    state.weight_sum *= factor;
    state.running_max = block_max;
  }
  const __m256 shift = _mm256_set1_ps(state.running_max);
  const __m256 lane_index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  __m256d sum_lo = _mm256_setzero_pd();
  __m256d sum_hi = _mm256_setzero_pd();
  for (int64_t j = 0; j < n; j += 8) {
    __m256 w = vmath::exp(_mm256_sub_ps(_mm256_load_ps(state.weights + j), shift));
    w = _mm256_and_ps(w, _mm256_cmp_ps(lane_index, _mm256_set1_ps(static_cast<float>(n - j)), _CMP_LT_OQ));
    _mm256_store_ps(state.weights + j, w);
    vmath::accumulate_double(w, sum_lo, sum_hi);
  }
  state.weight_sum += vmath::reduce_add(_mm256_add_pd(sum_lo, sum_hi));
}

// One block of n keys for every head of the group: the steps of block_step_scalar (attention.cpp), with the
// heads innermost so that each K and V row serves all of them while it is in L1.
void group_block(const AttentionGroup& group, const float* k_block, int64_t k_stride, const float* v_block,
                 int64_t v_stride, int64_t n, QueryState* states) {
  const int64_t head_dim = group.head_dim;
  const int64_t n_vec4 = head_dim - head_dim % 4;
  __m256 max8[kAttentionMaxGroup];
  for (int64_t i = 0; i < group.n_queries; ++i) max8[i] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < n; j += 8) {
    for (int64_t i = 0; i < group.n_queries; ++i) {
      max8[i] = _mm256_max_ps(max8[i], score8(group, group.q + i * head_dim, k_block, k_stride, n, j, states[i].weights + j));
    }
  }
  for (int64_t i = 0; i < group.n_queries; ++i) {
    block_weights(n, head_dim, max8[i], states[i]);
    std::fill(states[i].block_acc, states[i].block_acc + head_dim, 0.0f);
  }
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* v_rows[4];
    for (int key = 0; key < 4; ++key) v_rows[key] = v_block + (j + key) * v_stride;
    for (int64_t i = 0; i < group.n_queries; ++i) {
      accumulate4(states[i].weights + j, v_rows, head_dim, states[i].block_acc);
    }
  }
  for (; j < n; ++j) {
    for (int64_t i = 0; i < group.n_queries; ++i) {
      accumulate1(states[i].weights[j], v_block + j * v_stride, head_dim, states[i].block_acc);
    }
  }
  for (int64_t i = 0; i < group.n_queries; ++i) {
    double* acc = states[i].acc;
    const float* block_acc = states[i].block_acc;
    for (int64_t d = 0; d < n_vec4; d += 4) {
      _mm256_store_pd(acc + d, _mm256_add_pd(_mm256_load_pd(acc + d), _mm256_cvtps_pd(_mm_loadu_ps(block_acc + d))));
    }
    for (int64_t d = n_vec4; d < head_dim; ++d) acc[d] += block_acc[d];
  }
}

// kv_block with the conversions in AVX2/F16C, giving the reference conversions' values: f16 to f32 is exact,
// and a q8_0 value is the one float product d * q.
const float* kv_block_avx2(const KvSlice& slice, int64_t first, int64_t n, int64_t head_dim, float* scratch,
                           int64_t* stride) {
  if (slice.type == tensor::DType::f32) return kv_block(slice, first, n, head_dim, scratch, stride);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* row = key_row(slice, first + j);
    float* out = scratch + j * head_dim;
    if (slice.type == tensor::DType::f16) {
      const auto* halves = reinterpret_cast<const uint16_t*>(row);
      int64_t d = 0;
      for (; d + 8 <= head_dim; d += 8) {
        _mm256_storeu_ps(out + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves + d))));
      }
      for (; d < head_dim; ++d) out[d] = _cvtsh_ss(halves[d]);
    } else {  // q8_0: heads are whole blocks (KvCache::check_types)
      const auto* blocks = reinterpret_cast<const tensor::quant::BlockQ8_0*>(row);
      for (int64_t b = 0; b < head_dim / tensor::quant::kBlock32; ++b) {
        const __m256 scale = _mm256_set1_ps(_cvtsh_ss(blocks[b].d));
        for (int part = 0; part < 4; ++part) {
          const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].qs + 8 * part));
          _mm256_storeu_ps(out + b * tensor::quant::kBlock32 + 8 * part,
                           _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
        }
      }
    }
  }
  *stride = head_dim;
  return scratch;
}

}  // namespace

void attention_group_avx2(const AttentionGroup& group) {
  const int64_t head_dim = group.head_dim;
  // Each head's float64 accumulator starts on a 32-byte boundary for the aligned loads.
  const int64_t acc_stride = (head_dim + 3) / 4 * 4;
  alignas(32) double acc[kAttentionMaxGroup * kAttentionMaxHeadDim];
  alignas(32) float block_acc[kAttentionMaxGroup * kAttentionMaxHeadDim];
  alignas(32) float weights[kAttentionMaxGroup * kAttentionBlock];
  QueryState states[kAttentionMaxGroup];
  for (int64_t i = 0; i < group.n_queries; ++i) {
    states[i] = {.running_max = -std::numeric_limits<float>::infinity(),
                 .weight_sum = 0.0,
                 .acc = acc + i * acc_stride,
                 .weights = weights + i * kAttentionBlock,
                 .block_acc = block_acc + i * head_dim};
    std::fill(states[i].acc, states[i].acc + head_dim, 0.0);
  }
  for (int64_t block = 0; block < group.n_keys; block += kAttentionBlock) {
    const int64_t n = std::min(kAttentionBlock, group.n_keys - block);
    int64_t k_stride = 0;
    int64_t v_stride = 0;
    const float* k_block = kv_block_avx2(group.k, block, n, head_dim, group.k_scratch, &k_stride);
    const float* v_block = kv_block_avx2(group.v, block, n, head_dim, group.v_scratch, &v_stride);
    group_block(group, k_block, k_stride, v_block, v_stride, n, states);
  }
  const int64_t n_vec8 = head_dim - head_dim % 8;
  for (int64_t i = 0; i < group.n_queries; ++i) {
    const double* state_acc = states[i].acc;
    float* out = group.out + i * head_dim;
    const __m256d sum4 = _mm256_set1_pd(states[i].weight_sum);
    for (int64_t d = 0; d < n_vec8; d += 8) {
      const __m128 lo = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_load_pd(state_acc + d), sum4));
      const __m128 hi = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_load_pd(state_acc + d + 4), sum4));
      _mm256_storeu_ps(out + d, _mm256_set_m128(hi, lo));
    }
    for (int64_t d = n_vec8; d < head_dim; ++d) out[d] = static_cast<float>(state_acc[d] / states[i].weight_sum);
  }
}

}  // namespace rwd::kernels::cpu::detail
