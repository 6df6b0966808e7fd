// The kernels of the packed layouts (packed_weights.cpp) with AVX-512 VNNI: each int32 lane of a zmm is one of
// a group's 16 weight rows, and a vpdpbusd against 4 activation bytes broadcast from memory does 4 values of all
// 16 rows. Up to kMaxActRows activation rows (blocks of 32: kMaxBlock32ActRows) share each unpacked body; more
// rows take more passes over the group while it sits in L1. The int32 sums per block are exact whatever their
// order, and the float steps are the avx2 one-row kernels' (vec_dot_avx2.h), one lane per row: every output is
// bit-identical to the avx2 table's.
// GCC 12's 512-bit intrinsics pass an _mm512_undefined_* value as the unused merge source, which its own
// -Wuninitialized then reports at every call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/packed_weights.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::avx512vnni {
namespace {

namespace q = tensor::quant;

constexpr int kMaxActRows = 4;
// Blocks of 32 keep 8 chains per activation row in registers: 2 rows at a time.
constexpr int64_t kMaxBlock32ActRows = 2;
constexpr size_t kZmm = 64;

inline __attribute__((always_inline)) __m512i load(const uint8_t* p) { return _mm512_load_si512(p); }

// 4 bytes of an activation row in every int32 lane (folded into the vpdpbusd as a {1to16} memory operand).
inline __attribute__((always_inline)) __m512i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// A vpshufb control giving each int32 lane, in its bytes 0..3, the lane's own bytes b0..b3 (-1: zero).
inline __attribute__((always_inline)) __m512i lane_bytes(int b0, int b1, int b2, int b3) {
  const int picks[4] = {b0, b1, b2, b3};
  alignas(16) int8_t control[16];
  for (int lane = 0; lane < 4; ++lane) {
    for (int t = 0; t < 4; ++t) control[4 * lane + t] = static_cast<int8_t>(picks[t] < 0 ? -128 : 4 * lane + picks[t]);
  }
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(control)));
}

// q4_K: S = sum_j sc_j dot_j and N = sum_j m_j bsum_j per row and super-block, as DotKAffine of the avx2 set.
template <int NA>
void q4_k_group(int64_t n_blocks, const uint8_t* group, const q::BlockQ8K* const (&act)[NA], float* out,
                int64_t out_stride) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i low6 = _mm512_set1_epi8(0x3F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[NA];
  for (int r = 0; r < NA; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* body = group + b * packed::kQ4KBlockBytes;
    // Scale bytes 0-3 / 4-7 / 8-11 of each row; sub-block j's scale is byte j % 4 of scales_low (j < 4) or
    // scales_high, its min likewise of mins_low / mins_high (the 6-bit packing of blocks.h).
    const __m512i bytes03 = load(body), bytes47 = load(body + kZmm), bytes811 = load(body + 2 * kZmm);
    const __m512i scales_low = _mm512_and_si512(bytes03, low6);
    const __m512i scales_high =
        _mm512_or_si512(_mm512_and_si512(bytes811, low4), _mm512_and_si512(_mm512_srli_epi16(bytes03, 2), bits45));
    __m512i sum[NA];
    for (int r = 0; r < NA; ++r) sum[r] = zero;
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i scales = c < 2 ? scales_low : scales_high;
      const __m512i scale_even = _mm512_shuffle_epi8(scales, lane_bytes((2 * c) % 4, -1, -1, -1));
      const __m512i scale_odd = _mm512_shuffle_epi8(scales, lane_bytes((2 * c + 1) % 4, -1, -1, -1));
      __m512i dot_even[NA], dot_odd[NA];
      for (int r = 0; r < NA; ++r) dot_even[r] = dot_odd[r] = zero;
      const uint8_t* runs = body + packed::kQ4KScaleBytes + 8 * c * kZmm;
#pragma GCC unroll 8
      for (int quad = 0; quad < 8; ++quad) {
        const __m512i packed_values = load(runs + quad * kZmm);
        const __m512i low = _mm512_and_si512(packed_values, low4);
        const __m512i high = _mm512_and_si512(_mm512_srli_epi16(packed_values, 4), low4);
        for (int r = 0; r < NA; ++r) {
          const int8_t* a = act[r][b].qs + 64 * c + 4 * quad;
          dot_even[r] = _mm512_dpbusd_epi32(dot_even[r], low, broadcast4(a));
          dot_odd[r] = _mm512_dpbusd_epi32(dot_odd[r], high, broadcast4(a + 32));
        }
      }
      for (int r = 0; r < NA; ++r) {
        sum[r] = _mm512_add_epi32(sum[r], _mm512_add_epi32(_mm512_mullo_epi32(dot_even[r], scale_even),
                                                           _mm512_mullo_epi32(dot_odd[r], scale_odd)));
      }
    }
    const __m512i mins_low = _mm512_and_si512(bytes47, low6);
    const __m512i mins_high = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(bytes811, 4), low4),
                                              _mm512_and_si512(_mm512_srli_epi16(bytes47, 2), bits45));
    __m512i min_sum[NA];
    for (int r = 0; r < NA; ++r) min_sum[r] = zero;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // (m_j, m_j) as int16 against the bsums of the sub-block's two groups of 16.
      const __m512i min_pair = _mm512_shuffle_epi8(j < 4 ? mins_low : mins_high, lane_bytes(j % 4, -1, j % 4, -1));
      for (int r = 0; r < NA; ++r) {
        min_sum[r] = _mm512_dpwssd_epi32(min_sum[r], min_pair, broadcast4(act[r][b].bsums + 2 * j));
      }
    }
    const uint8_t* d = body + packed::kQ4KBodyBytes;
    const __m512 scale = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d)));
    const __m512 min_scale = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d + 32)));
    for (int r = 0; r < NA; ++r) {
      const __m512 act_scale = _mm512_set1_ps(act[r][b].d);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), _mm512_mul_ps(scale, act_scale), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sum[r]), _mm512_mul_ps(min_scale, act_scale), acc[r]);
    }
  }
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out + r * out_stride, acc[r]);
}

// q6_K: S = sum_g sc_g dot_g - 32 sum_g sc_g bsum_g per row and super-block (values stored as q + 32), as
// DotQ6K of the avx2 set.
template <int NA>
void q6_k_group(int64_t n_blocks, const uint8_t* group, const q::BlockQ8K* const (&act)[NA], float* out,
                int64_t out_stride) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i zero = _mm512_setzero_si512();
  const uint8_t* factors = group + n_blocks * packed::kQ6KBodyBytes;
  __m512 acc[NA];
  for (int r = 0; r < NA; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* body = group + b * packed::kQ6KBodyBytes;
    __m512i sum[NA], bias[NA];
    for (int r = 0; r < NA; ++r) sum[r] = bias[r] = zero;
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512i scales = load(body + p * kZmm);  // int8 scales 4p .. 4p + 3 of each row
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const int g = 4 * p + j;
        const __m512i scale = _mm512_srai_epi32(_mm512_shuffle_epi8(scales, lane_bytes(-1, -1, -1, j)), 24);
        const uint8_t* runs = body + packed::kQ6KScaleBytes + g * packed::kQ6KGroupRunBytes;
        const __m512i low01 = load(runs), low23 = load(runs + kZmm), high = load(runs + 2 * kZmm);
        const __m512i v0 = _mm512_or_si512(_mm512_and_si512(low01, low4),
                                           _mm512_and_si512(_mm512_slli_epi16(high, 4), bits45));
        const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low01, 4), low4),
                                           _mm512_and_si512(_mm512_slli_epi16(high, 2), bits45));
        const __m512i v2 = _mm512_or_si512(_mm512_and_si512(low23, low4), _mm512_and_si512(high, bits45));
        const __m512i v3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low23, 4), low4),
                                           _mm512_and_si512(_mm512_srli_epi16(high, 2), bits45));
        for (int r = 0; r < NA; ++r) {
          const int8_t* a = act[r][b].qs + 16 * g;
          __m512i dot = _mm512_dpbusd_epi32(zero, v0, broadcast4(a));
          dot = _mm512_dpbusd_epi32(dot, v1, broadcast4(a + 4));
          dot = _mm512_dpbusd_epi32(dot, v2, broadcast4(a + 8));
          dot = _mm512_dpbusd_epi32(dot, v3, broadcast4(a + 12));
          sum[r] = _mm512_add_epi32(sum[r], _mm512_mullo_epi32(dot, scale));
        }
      }
      // (sc_4p, sc_4p+1) and (sc_4p+2, sc_4p+3) as int16 against the matching bsums.
      const __m512i scale_pair01 = _mm512_srai_epi16(_mm512_shuffle_epi8(scales, lane_bytes(-1, 0, -1, 1)), 8);
      const __m512i scale_pair23 = _mm512_srai_epi16(_mm512_shuffle_epi8(scales, lane_bytes(-1, 2, -1, 3)), 8);
      for (int r = 0; r < NA; ++r) {
        bias[r] = _mm512_dpwssd_epi32(bias[r], scale_pair01, broadcast4(act[r][b].bsums + 4 * p));
        bias[r] = _mm512_dpwssd_epi32(bias[r], scale_pair23, broadcast4(act[r][b].bsums + 4 * p + 2));
      }
    }
    const __m512 scale = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(factors + b * packed::kQ6KFactorBytes)));
    for (int r = 0; r < NA; ++r) {
      const __m512i total = _mm512_sub_epi32(sum[r], _mm512_slli_epi32(bias[r], 5));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(scale, _mm512_set1_ps(act[r][b].d)), acc[r]);
    }
  }
  for (int r = 0; r < NA; ++r) _mm512_storeu_ps(out + r * out_stride, acc[r]);
}

// ---- blocks of 32 (q8_0, q4_0, q5_0) against q8_0 ----

// The 8 value vectors of a body (vector v: values 4v .. 4v + 3 of the 16 rows), stored as value + kBias.
struct Q8_0Values {
  static constexpr size_t kBodyBytes = packed::kQ8_0BodyBytes;
  static constexpr int kBiasShift = 7;  // + 128
  static inline __attribute__((always_inline)) void values(const uint8_t* body, __m512i (&v)[8]) {
    for (int j = 0; j < 8; ++j) v[j] = load(body + j * kZmm);
  }
};
struct Q4_0Values {
  static constexpr size_t kBodyBytes = packed::kQ4_0BodyBytes;
  static constexpr int kBiasShift = 3;  // + 8
  static inline __attribute__((always_inline)) void values(const uint8_t* body, __m512i (&v)[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int run = 0; run < 4; ++run) {
      const __m512i nibbles = load(body + run * kZmm);
      v[run] = _mm512_and_si512(nibbles, low4);
      v[run + 4] = _mm512_and_si512(_mm512_srli_epi16(nibbles, 4), low4);
    }
  }
};
struct Q5_0Values {
  static constexpr size_t kBodyBytes = packed::kQ5_0BodyBytes;
  static constexpr int kBiasShift = 4;  // + 16
  static inline __attribute__((always_inline)) void values(const uint8_t* body, __m512i (&v)[8]) {
    Q4_0Values::values(body, v);
    const __m512i fifth = _mm512_set1_epi8(0x10);
    const __m512i high_bits = load(body + 4 * kZmm);  // bit j of byte t: value 4j + t
    // Bit j to bit 4 of each byte; the 16-bit shifts carry bits across bytes only outside bit 4.
    v[0] = _mm512_or_si512(v[0], _mm512_and_si512(_mm512_slli_epi16(high_bits, 4), fifth));
    v[1] = _mm512_or_si512(v[1], _mm512_and_si512(_mm512_slli_epi16(high_bits, 3), fifth));
    v[2] = _mm512_or_si512(v[2], _mm512_and_si512(_mm512_slli_epi16(high_bits, 2), fifth));
    v[3] = _mm512_or_si512(v[3], _mm512_and_si512(_mm512_slli_epi16(high_bits, 1), fifth));
    v[4] = _mm512_or_si512(v[4], _mm512_and_si512(high_bits, fifth));
    v[5] = _mm512_or_si512(v[5], _mm512_and_si512(_mm512_srli_epi16(high_bits, 1), fifth));
    v[6] = _mm512_or_si512(v[6], _mm512_and_si512(_mm512_srli_epi16(high_bits, 2), fifth));
    v[7] = _mm512_or_si512(v[7], _mm512_and_si512(_mm512_srli_epi16(high_bits, 3), fifth));
  }
};

// The avx2 arithmetic of blocks of 32 (vec_dot_avx2.h): block b's int32 dot D_b, times f(d_w) * f(d_a), fused
// into chain b % 8, and the chains summed ((P0 + P1) + (P2 + P3)) + ((P4 + P5) + (P6 + P7)). Each lane keeps its
// row's 8 chains, and the blocks go in memory order (a pass per chain read each group 8 times with a stride the
// prefetchers do not follow: the 0.5B draft decoded 15 % slower than with the avx2 kernels).
template <typename Values, int NA>
void block32_group(int64_t n_blocks, const uint8_t* group, const q::BlockQ8_0* const (&act)[NA],
                   const Block32ActivationTerms* const (&terms)[NA], float* out, int64_t out_stride) {
  const __m512i zero = _mm512_setzero_si512();
  __m512 chains[8][NA];
  for (int c = 0; c < 8; ++c) {
    for (int r = 0; r < NA; ++r) chains[c][r] = _mm512_setzero_ps();
  }
  for (int64_t b0 = 0; b0 < n_blocks; b0 += 8) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const int64_t b = b0 + c;
      if (b >= n_blocks) break;
      __m512i v[8];
      Values::values(group + packed::block32_body_offset(b, Values::kBodyBytes), v);
      const __m512 weight_scale = _mm512_cvtph_ps(_mm256_load_si256(
          reinterpret_cast<const __m256i*>(group + packed::block32_factor_offset(b, Values::kBodyBytes))));
      for (int r = 0; r < NA; ++r) {
        const int8_t* a = act[r][b].qs;
        __m512i dot = _mm512_dpbusd_epi32(zero, v[0], broadcast4(a));
        for (int j = 1; j < 8; ++j) dot = _mm512_dpbusd_epi32(dot, v[j], broadcast4(a + 4 * j));
        dot = _mm512_sub_epi32(dot, _mm512_slli_epi32(_mm512_set1_epi32(terms[r][b].sum), Values::kBiasShift));
        chains[c][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                       _mm512_mul_ps(weight_scale, _mm512_set1_ps(terms[r][b].scale)), chains[c][r]);
      }
    }
  }
  for (int r = 0; r < NA; ++r) {
    const __m512 low =
        _mm512_add_ps(_mm512_add_ps(chains[0][r], chains[1][r]), _mm512_add_ps(chains[2][r], chains[3][r]));
    const __m512 high =
        _mm512_add_ps(_mm512_add_ps(chains[4][r], chains[5][r]), _mm512_add_ps(chains[6][r], chains[7][r]));
    _mm512_storeu_ps(out + r * out_stride, _mm512_add_ps(low, high));
  }
}

// Groups one after another, each against the activation rows max_rows at a time.
template <typename RunGroup>
void for_each_group(int64_t n, const uint8_t* groups, int64_t n_groups, int64_t n_act_rows, int64_t max_rows,
                    float* out, int64_t out_stride, tensor::DType type, RunGroup run_group) {
  const size_t group_bytes = packed_group_bytes(type, n);
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t r0 = 0; r0 < n_act_rows; r0 += max_rows) {
      run_group(groups + static_cast<size_t>(g) * group_bytes, r0, std::min(max_rows, n_act_rows - r0),
                out + r0 * out_stride + g * kPackedGroupRows);
    }
  }
}

// Activation row r's first block.
template <typename Block>
const Block* activation_row(const PackedActivations& act, int64_t r) {
  return reinterpret_cast<const Block*>(act.rows + static_cast<size_t>(r) * act.row_bytes);
}

template <void (*kGroup1)(int64_t, const uint8_t*, const q::BlockQ8K* const (&)[1], float*, int64_t),
          void (*kGroup2)(int64_t, const uint8_t*, const q::BlockQ8K* const (&)[2], float*, int64_t),
          void (*kGroup3)(int64_t, const uint8_t*, const q::BlockQ8K* const (&)[3], float*, int64_t),
          void (*kGroup4)(int64_t, const uint8_t*, const q::BlockQ8K* const (&)[4], float*, int64_t)>
void packed_dot_k(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act, int64_t n_act_rows,
                  float* out, int64_t out_stride, tensor::DType type) {
  const int64_t n_blocks = n / q::kBlockK;
  for_each_group(n, groups, n_groups, n_act_rows, kMaxActRows, out, out_stride, type,
                 [&](const uint8_t* group, int64_t r0, int64_t count, float* o) {
                   const auto row = [&](int64_t r) { return activation_row<q::BlockQ8K>(act, r0 + r); };
                   switch (count) {
                     case 1: kGroup1(n_blocks, group, {row(0)}, o, out_stride); break;
                     case 2: kGroup2(n_blocks, group, {row(0), row(1)}, o, out_stride); break;
                     case 3: kGroup3(n_blocks, group, {row(0), row(1), row(2)}, o, out_stride); break;
                     default: kGroup4(n_blocks, group, {row(0), row(1), row(2), row(3)}, o, out_stride); break;
                   }
                 });
}

template <typename Values>
void packed_dot_block32(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                        int64_t n_act_rows, float* out, int64_t out_stride, tensor::DType type) {
  const int64_t n_blocks = n / q::kBlock32;
  for_each_group(n, groups, n_groups, n_act_rows, kMaxBlock32ActRows, out, out_stride, type,
                 [&](const uint8_t* group, int64_t r0, int64_t count, float* o) {
                   const auto row = [&](int64_t r) { return activation_row<q::BlockQ8_0>(act, r0 + r); };
                   const auto terms = [&](int64_t r) { return act.terms + (r0 + r) * n_blocks; };
                   if (count == 1) {
                     block32_group<Values, 1>(n_blocks, group, {row(0)}, {terms(0)}, o, out_stride);
                   } else {
                     block32_group<Values, 2>(n_blocks, group, {row(0), row(1)}, {terms(0), terms(1)}, o, out_stride);
                   }
                 });
}

void packed_dot_q4_k(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                     int64_t n_act_rows, float* out, int64_t out_stride) {
  packed_dot_k<q4_k_group<1>, q4_k_group<2>, q4_k_group<3>, q4_k_group<4>>(n, groups, n_groups, act, n_act_rows, out,
                                                                          out_stride, tensor::DType::q4_k);
}
void packed_dot_q6_k(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                     int64_t n_act_rows, float* out, int64_t out_stride) {
  packed_dot_k<q6_k_group<1>, q6_k_group<2>, q6_k_group<3>, q6_k_group<4>>(n, groups, n_groups, act, n_act_rows, out,
                                                                          out_stride, tensor::DType::q6_k);
}
void packed_dot_q8_0(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                     int64_t n_act_rows, float* out, int64_t out_stride) {
  packed_dot_block32<Q8_0Values>(n, groups, n_groups, act, n_act_rows, out, out_stride, tensor::DType::q8_0);
}
void packed_dot_q4_0(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                     int64_t n_act_rows, float* out, int64_t out_stride) {
  packed_dot_block32<Q4_0Values>(n, groups, n_groups, act, n_act_rows, out, out_stride, tensor::DType::q4_0);
}
void packed_dot_q5_0(int64_t n, const uint8_t* groups, int64_t n_groups, const PackedActivations& act,
                     int64_t n_act_rows, float* out, int64_t out_stride) {
  packed_dot_block32<Q5_0Values>(n, groups, n_groups, act, n_act_rows, out, out_stride, tensor::DType::q5_0);
}

}  // namespace

PackedDotFn packed_dot_fn(tensor::DType weight_type) {
  switch (weight_type) {
    case tensor::DType::q4_k: return packed_dot_q4_k;
    case tensor::DType::q6_k: return packed_dot_q6_k;
    case tensor::DType::q8_0: return packed_dot_q8_0;
    case tensor::DType::q4_0: return packed_dot_q4_0;
    case tensor::DType::q5_0: return packed_dot_q5_0;
    default: return nullptr;
  }
}

}  // namespace rwd::kernels::cpu::avx512vnni
