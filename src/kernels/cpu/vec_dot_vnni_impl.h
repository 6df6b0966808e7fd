// The VNNI dot products of the quantized weight types, written once in 256-bit form and compiled three times:
// vec_dot_avx512vnni.cpp (EVEX vpdpbusd), vec_dot_avxvnni.cpp (VEX vpdpbusd) and vec_dot_vnni_emulated.cpp
// (the same instructions spelled with AVX2 widening ops, so that this logic is tested bit for bit on CPUs
// without VNNI). Each includer first defines, in namespace rwd::kernels::cpu::vnni::(anonymous):
//   __m256i dpbusd(__m256i acc, __m256i u, __m256i s)  // acc + the 4 products u8 × s8 of each int32 lane
//   __m256i dpwssd(__m256i acc, __m256i a, __m256i b)  // acc + the 2 products int16 × int16 of each lane
// both wrapping (never saturating), and includes this file once. Everything here has internal linkage, so no
// copy compiled with one flavour's instructions can be linked into another's callers; the helpers taken from
// vec_dot_avx2.h are always inlined. The float arithmetic per output is the one vec_dot_avx2.h fixes (the
// int32 block sums are exact, however they are formed), so every result is bit-identical to the AVX2 table.
// Activation rows are the quantizers' (values in -127..127); only the panels repack them.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "vec_dot_vnni_impl.h needs -mavx2 -mfma -mf16c: include it only from the vec_dot_*vnni*.cpp files"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "kernels/cpu/vec_dot_tiles.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::vnni {
namespace {

using tensor::DType;
namespace q = tensor::quant;
using avx2::gather_halves;
using avx2::broadcast_word;
using avx2::half_to_float;
using avx2::hsum_i32;
using avx2::load256;
using avx2::row_scales;
using avx2::spread_bits;
using avx2::store_rows;
using avx2::sum_chains;
using avx2::unpack_k_scales;
using avx2::unpack_nibbles;
using avx2::widen_bytes;

constexpr int kRows = kPanelRows;

// ---- weight blocks of 32 as bytes ----
//
// unsigned_values: the 32 values as u8 lanes (lane j = value j), each = signed value + (1 << kOffsetShift) for
// the symmetric types; signed_values: the signed values as int8 (symmetric types only).

struct TypeQ4_0 {
  using Block = q::BlockQ4_0;
  static constexpr bool kAffine = false;
  static constexpr int kOffsetShift = 3;
  static REWIND_INLINE __m256i unsigned_values(const Block& w) { return unpack_nibbles(w.qs); }
  static REWIND_INLINE __m256i signed_values(const Block& w) {
    return _mm256_sub_epi8(unpack_nibbles(w.qs), _mm256_set1_epi8(8));
  }
};
struct TypeQ5_0 {
  using Block = q::BlockQ5_0;
  static constexpr bool kAffine = false;
  static constexpr int kOffsetShift = 4;
  static REWIND_INLINE __m256i unsigned_values(const Block& w) {
    return _mm256_or_si256(unpack_nibbles(w.qs), _mm256_and_si256(spread_bits(w.qh), _mm256_set1_epi8(0x10)));
  }
  // (nibble | bit << 4) - 16 is the nibble with 0xF0 set where the fifth bit is clear.
  static REWIND_INLINE __m256i signed_values(const Block& w) {
    const __m256i high = _mm256_andnot_si256(spread_bits(w.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(unpack_nibbles(w.qs), high);
  }
};
struct TypeQ8_0 {
  using Block = q::BlockQ8_0;
  static constexpr bool kAffine = false;
  static constexpr int kOffsetShift = 7;
  static REWIND_INLINE __m256i unsigned_values(const Block& w) {
    return _mm256_xor_si256(load256(w.qs), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  static REWIND_INLINE __m256i signed_values(const Block& w) { return load256(w.qs); }
};
struct TypeQ4_1 {
  using Block = q::BlockQ4_1;
  static constexpr bool kAffine = true;
  static constexpr int kOffsetShift = 0;
  static REWIND_INLINE __m256i unsigned_values(const Block& w) { return unpack_nibbles(w.qs); }
};
struct TypeQ5_1 {
  using Block = q::BlockQ5_1;
  static constexpr bool kAffine = true;
  static constexpr int kOffsetShift = 0;
  static REWIND_INLINE __m256i unsigned_values(const Block& w) {
    return _mm256_or_si256(unpack_nibbles(w.qs), _mm256_and_si256(spread_bits(w.qh), _mm256_set1_epi8(0x10)));
  }
};

// ---- one row and tiles, blocks of 32 ----
//
// Per block and activation row one vpdpbusd gives 8 partial int32 sums: q4_1 / q5_1 are unsigned against the
// signed activations as they are; the symmetric types move the weight's sign onto the activation (|w| is the
// unsigned side; |-128| = 128 as u8). Pairs of blocks are joined with hadd into lane-per-block vectors (8
// blocks, 8 lanes), which then take the float steps of vec_dot_avx2.h. Up to kMaxRows activation rows share
// each weight block's unpacking and |w|; more would not fit the 16 registers with the partial sums. A tile
// converts its rows' fp16 scales once for all its weight rows (one() gathers them per 8 blocks).

template <typename Type>
struct DotBlock32 {
  static constexpr bool kAffine = Type::kAffine;
  using Block = typename Type::Block;
  using ActBlock = std::conditional_t<kAffine, q::BlockQ8_1, q::BlockQ8_0>;
  static constexpr int kMaxRows = 4;

  // Lane j of dots[r] = the int32 dot of block b0 + j with row r, for j < count; 0 from count on.
  template <int NA>
  static REWIND_INLINE void group_dots_rows(const Block* w, const ActBlock* const (&a)[NA], int64_t b0, int count,
                                            __m256i (&dots)[NA]) {
    auto block_dots = [&](int j, __m256i (&d)[NA]) REWIND_INLINE_LAMBDA {
      const __m256i zero = _mm256_setzero_si256();
      if (j >= count) {
        for (__m256i& v : d) v = zero;
        return;
      }
      if constexpr (kAffine) {
        const __m256i values = Type::unsigned_values(w[b0 + j]);
        for (int r = 0; r < NA; ++r) d[r] = dpbusd(zero, values, load256(a[r][b0 + j].qs));
      } else {
        const __m256i values = Type::signed_values(w[b0 + j]);
        const __m256i magnitudes = _mm256_sign_epi8(values, values);
        for (int r = 0; r < NA; ++r) {
          d[r] = dpbusd(zero, magnitudes, _mm256_sign_epi8(load256(a[r][b0 + j].qs), values));
        }
      }
    };
    __m256i halves[2][NA];  // blocks 0..3, blocks 4..7
    for (int h = 0; h < 2; ++h) {
      __m256i pairs[2][NA];
      for (int p = 0; p < 2; ++p) {
        __m256i first[NA], second[NA];
        block_dots(4 * h + 2 * p, first);
        block_dots(4 * h + 2 * p + 1, second);
        for (int r = 0; r < NA; ++r) pairs[p][r] = _mm256_hadd_epi32(first[r], second[r]);
      }
      for (int r = 0; r < NA; ++r) halves[h][r] = _mm256_hadd_epi32(pairs[0][r], pairs[1][r]);
    }
    for (int r = 0; r < NA; ++r) {
      dots[r] = _mm256_add_epi32(_mm256_permute2x128_si256(halves[0][r], halves[1][r], 0x20),
                                 _mm256_permute2x128_si256(halves[0][r], halves[1][r], 0x31));
    }
  }

  // The activation rows' fp16 d (and q8_1's s) as floats, block by block, converted once by a tile for all its
  // weight rows (the gather per group of 8 blocks costs more than the dot products of a block): row r's d at
  // d + r * stride, its s at s + r * stride, each zero from the last block on for 8 more. Null: gather them.
  struct ActScales {
    const float* d = nullptr;
    const float* s = nullptr;
    size_t stride = 0;
  };

  // Blocks b0 .. b0 + count - 1 into chains 0 .. count - 1 of each row (vec_dot_avx2.h).
  template <int NA, bool kConverted>
  static REWIND_INLINE void group_rows(const Block* w, const ActBlock* const (&a)[NA], const ActScales& converted,
                                       int64_t b0, int count, __m256 (&chains)[NA]) {
    __m256i dots[NA];
    group_dots_rows(w, a, b0, count, dots);
    // Lanes from count on are 0 either way (and blended away by rows()).
    auto act_field = [&](const float* first_row, const uint16_t& field, int r) REWIND_INLINE_LAMBDA {
      if constexpr (kConverted) {
        return _mm256_loadu_ps(first_row + static_cast<size_t>(r) * converted.stride + b0);
      } else {
        return gather_halves(&field, sizeof(ActBlock), count);
      }
    };
    const __m256 weight_scales = gather_halves(&w[b0].d, sizeof(Block), count);
    for (int r = 0; r < NA; ++r) {
      const __m256 scales = _mm256_mul_ps(weight_scales, act_field(converted.d, a[r][b0].d, r));
      chains[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), scales, chains[r]);
    }
    if constexpr (kAffine) {
      const __m256 weight_mins = gather_halves(&w[b0].m, sizeof(Block), count);
      for (int r = 0; r < NA; ++r) {
        chains[r] = _mm256_fmadd_ps(weight_mins, act_field(converted.s, a[r][b0].s, r), chains[r]);
      }
    }
  }

  // out[r * out_stride] for NA activation rows against one weight row.
  template <int NA, bool kConverted = false>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride, const ActScales& converted = {}) {
    const auto* w = static_cast<const Block*>(weight);
    const ActBlock* a[NA];
    for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const ActBlock*>(act + static_cast<size_t>(r) * act_row_bytes);
    const int64_t n_blocks = n / q::kBlock32;
    __m256 chains[NA];
    for (__m256& c : chains) c = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) group_rows<NA, kConverted>(w, a, converted, b, 8, chains);
    if (b < n_blocks) {
      const int count = static_cast<int>(n_blocks - b);
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 next[NA];
      for (int r = 0; r < NA; ++r) next[r] = chains[r];
      group_rows<NA, kConverted>(w, a, converted, b, count, next);
      for (int r = 0; r < NA; ++r) chains[r] = _mm256_blendv_ps(chains[r], next[r], _mm256_castsi256_ps(live));
    }
    for (int r = 0; r < NA; ++r) out[r * out_stride] = sum_chains(chains[r]);
  }

  static float one(int64_t n, const void* weight, const void* activation) {
    float out;
    rows<1>(n, weight, static_cast<const uint8_t*>(activation), 0, &out, 1);
    return out;
  }

  // Rows up to this long get their scales converted once per tile; longer ones gather them (stack space).
  static constexpr int64_t kMaxConvertedBlocks = 1024;
  static constexpr size_t kConvertedStride = kMaxConvertedBlocks + 8;

  // Groups of up to kMaxRows activation rows, of equal size (5 rows as 3 + 2, not 4 + 1); each group's scales
  // converted once, then every weight row against the group (which stays in L1).
  static void tile(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                   const void* activations, size_t act_row_bytes, int64_t n_act_rows, float* out, int64_t out_stride) {
    const int64_t n_blocks = n / q::kBlock32;
    if (n_blocks > kMaxConvertedBlocks) {
      tiles::tile_by_row_groups<DotBlock32>(n, weights, weight_row_bytes, n_weight_rows, activations, act_row_bytes,
                                     n_act_rows, out, out_stride);
      return;
    }
    const auto* w = static_cast<const uint8_t*>(weights);
    const auto* act = static_cast<const uint8_t*>(activations);
    alignas(32) float d[kMaxRows][kConvertedStride];
    alignas(32) float s[kAffine ? kMaxRows : 1][kAffine ? kConvertedStride : 1];
    const ActScales converted{&d[0][0], &s[0][0], kConvertedStride};
    const int64_t n_groups = (n_act_rows + kMaxRows - 1) / kMaxRows;
    for (int64_t g = 0, r0 = 0; g < n_groups; ++g) {
      const int64_t n_group = (n_act_rows - r0) / (n_groups - g);
      const uint8_t* group = act + static_cast<size_t>(r0) * act_row_bytes;
      for (int64_t r = 0; r < n_group; ++r) {
        const auto* a = reinterpret_cast<const ActBlock*>(group + static_cast<size_t>(r) * act_row_bytes);
        for (int64_t b = 0; b < n_blocks + 8; ++b) d[r][b] = b < n_blocks ? half_to_float(a[b].d) : 0.0f;
        if constexpr (kAffine) {
          for (int64_t b = 0; b < n_blocks + 8; ++b) s[r][b] = b < n_blocks ? half_to_float(a[b].s) : 0.0f;
        }
      }
      for (int64_t i = 0; i < n_weight_rows; ++i) {
        const uint8_t* weight = w + static_cast<size_t>(i) * weight_row_bytes;
        float* o = out + r0 * out_stride + i;
        switch (n_group) {
          case 1: rows<1, true>(n, weight, group, act_row_bytes, o, out_stride, converted); break;
          case 2: rows<2, true>(n, weight, group, act_row_bytes, o, out_stride, converted); break;
          case 3: rows<3, true>(n, weight, group, act_row_bytes, o, out_stride, converted); break;
          default: rows<kMaxRows, true>(n, weight, group, act_row_bytes, o, out_stride, converted); break;
        }
      }
      r0 += n_group;
    }
  }
};

// ---- one row and tiles, k-quants against q8_K ----
//
// The weights are unsigned (q4_K 0..15, q5_K 0..31, q6_K 0..63) against the signed activations: maddubs gives
// int16 pairs (at most 2 * 63 * 127, never saturating) and one vpdpwssd applies the sub-block scales and
// accumulates, where AVX2 needs madd and add. Up to kMaxRows activation rows share each super-block's unpacking;
// each row keeps one int32 accumulator.

constexpr int kMaxKRows = 8;

REWIND_INLINE __m256i load_high_bits(const q::BlockQ4K&) { return _mm256_setzero_si256(); }
REWIND_INLINE __m256i load_high_bits(const q::BlockQ5K& w) { return load256(w.qh); }

// Lanes 0..1 = the sums of the 8 lanes of a and of b (exact, any order).
REWIND_INLINE __m128i sum2(__m256i a, __m256i b) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i quads = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), zero);
  return _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
}

template <bool kFifthBit, typename Block>
struct DotKAffine {
  static constexpr int kMaxRows = kMaxKRows;

  // The int32 lanes whose totals are S (sum) and N (min_sum) of vec_dot_avx2.h, per row.
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA],
                                 __m256i (&min_sum)[NA]) {
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    uint64_t scales, mins;
    unpack_k_scales(w.scales, scales, mins);
    const __m256i scales16 = widen_bytes(scales);
    __m256i high_bits = load_high_bits(w);
    for (int r = 0; r < NA; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = load256(w.qs + 32 * c);
      __m256i low = _mm256_and_si256(packed, low_nibble);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
      if constexpr (kFifthBit) {
        const __m256i one = _mm256_set1_epi8(1);
        low = _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
        high = _mm256_or_si256(high, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
        high_bits = _mm256_srli_epi16(high_bits, 2);
      }
      const __m256i scale_low = broadcast_word(scales16, 2 * c);
      const __m256i scale_high = broadcast_word(scales16, 2 * c + 1);
      for (int r = 0; r < NA; ++r) {
        sum[r] = dpwssd(sum[r], _mm256_maddubs_epi16(low, load256(a[r]->qs + 64 * c)), scale_low);
        sum[r] = dpwssd(sum[r], _mm256_maddubs_epi16(high, load256(a[r]->qs + 64 * c + 32)), scale_high);
      }
    }
    // mins16 lane k = min of sub-block k / 2, matching bsums lane k (group of 16 values k).
    const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    for (int r = 0; r < NA; ++r) min_sum[r] = _mm256_madd_epi16(load256(a[r]->bsums), mins16);
  }

  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    __m128 acc[NA];
    for (int r = 0; r < NA; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const q::BlockQ8K* a[NA];
      for (int r = 0; r < NA; ++r) {
        a[r] = reinterpret_cast<const q::BlockQ8K*>(act + static_cast<size_t>(r) * act_row_bytes) + b;
      }
      __m256i sum[NA], min_sum[NA];
      sums<NA>(w[b], a, sum, min_sum);
      for (int r = 0; r < NA; ++r) {
        // One reduction for both: lane 0 = S, lane 1 = N.
        const __m128 totals = _mm_cvtepi32_ps(sum2(sum[r], min_sum[r]));
        acc[r] = _mm_fmadd_ss(totals, _mm_set_ss(half_to_float(w[b].d) * a[r]->d), acc[r]);
        acc[r] = _mm_fnmadd_ss(_mm_movehdup_ps(totals), _mm_set_ss(half_to_float(w[b].dmin) * a[r]->d), acc[r]);
      }
    }
    for (int r = 0; r < NA; ++r) out[r * out_stride] = _mm_cvtss_f32(acc[r]);
  }

  static float one(int64_t n, const void* weight, const void* activation) {
    float out;
    rows<1>(n, weight, static_cast<const uint8_t*>(activation), 0, &out, 1);
    return out;
  }
};

// The 32 values 128h + 32k + l (l = 0..31) of a q6_K super-block, each 0..63 (layout in blocks.h), from the
// half's ql and qh vectors.
REWIND_INLINE __m256i q6_values(__m256i ql0, __m256i ql1, __m256i qh, int k) {
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  const __m256i low4 =
      _mm256_and_si256(k < 2 ? (k == 0 ? ql0 : ql1) : _mm256_srli_epi16(k == 2 ? ql0 : ql1, 4), low_nibble);
  const __m256i high2 = k == 0   ? _mm256_slli_epi16(qh, 4)
                        : k == 1 ? _mm256_slli_epi16(qh, 2)
                        : k == 2 ? qh
                                 : _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(low4, _mm256_and_si256(high2, bits45));
}

// q6_K: values are (q6 - 32); the -32 is taken out with the bsums: sum sc_g (q - 32) qa = sum sc_g q qa
// - 32 sum sc_g bsum_g, all in int32.
struct DotQ6K {
  static constexpr int kMaxRows = kMaxKRows;

  template <int NA>
  static REWIND_INLINE void sums(const q::BlockQ6K& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    const auto* sc = reinterpret_cast<const uint8_t*>(w.scales);
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    for (int r = 0; r < NA; ++r) {
      sum[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                _mm256_slli_epi32(_mm256_madd_epi16(load256(a[r]->bsums), scales16), 5));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      // The 8 scales of this half as int16, in both 128-bit lanes, for pick_pair below.
      const __m256i half_scales = _mm256_broadcastsi128_si256(
          _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
      const __m256i ql0 = load256(w.ql + 64 * h);
      const __m256i ql1 = load256(w.ql + 64 * h + 32);
      const __m256i qh = load256(w.qh + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i values = q6_values(ql0, ql1, qh, k);
        // Lanes 0..15 are group 8h + 2k, lanes 16..31 group 8h + 2k + 1.
        const __m256i pick_pair =
            _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                             _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | (4 * k))));
        const __m256i scale = _mm256_shuffle_epi8(half_scales, pick_pair);
        for (int r = 0; r < NA; ++r) {
          sum[r] = dpwssd(sum[r], _mm256_maddubs_epi16(values, load256(a[r]->qs + 128 * h + 32 * k)), scale);
        }
      }
    }
  }

  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const q::BlockQ6K*>(weight);
    __m128 acc[NA];
    for (int r = 0; r < NA; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const q::BlockQ8K* a[NA];
      for (int r = 0; r < NA; ++r) {
        a[r] = reinterpret_cast<const q::BlockQ8K*>(act + static_cast<size_t>(r) * act_row_bytes) + b;
      }
      __m256i sum[NA];
      sums<NA>(w[b], a, sum);
      for (int r = 0; r < NA; ++r) {
        acc[r] = _mm_fmadd_ss(_mm_cvtepi32_ps(hsum_i32(sum[r])), _mm_set_ss(half_to_float(w[b].d) * a[r]->d), acc[r]);
      }
    }
    for (int r = 0; r < NA; ++r) out[r * out_stride] = _mm_cvtss_f32(acc[r]);
  }

  static float one(int64_t n, const void* weight, const void* activation) {
    float out;
    rows<1>(n, weight, static_cast<const uint8_t*>(activation), 0, &out, 1);
    return out;
  }
};

// ---- panels ----
//
// 32 activation values of 8 rows in 256 bytes: for m = 0..3 and the half h of the rows (4h .. 4h + 3), qs[m][h]
// holds values 4m .. 4m + 3 of those four rows, then values 16 + 4m .. 16 + 4m + 3 of them. That is what pshufd
// makes of 32 weight values loaded in order ([0..15 | 16..31]): chunk m in the low 128-bit lane and chunk 4 + m
// in the high one, so one vpdpbusd serves four rows and two chunks, and a panel of up to 4 rows needs h = 0
// only. The weights are the unsigned side (symmetric types offset into 0..255, the offset taken out with the
// rows' sums); each lane of a panel kernel follows vec_dot_avx2.h's arithmetic for its row.

struct Panel32 {
  int8_t qs[4][2][2][kRows / 2][4];  // [m][h][value half][row in half][byte]
};
static_assert(sizeof(Panel32) == 256);

// q8_0 partner of q4_0 / q5_0 / q8_0: the rows' d as floats and the sums of their block values.
struct PanelQ8_0 {
  Panel32 values;
  float d[kRows];
  int32_t sum[kRows];
};
static_assert(sizeof(PanelQ8_0) == 320);

// q8_1 partner of q4_1 / q5_1: the rows' d and s (d * sum, the min term's partner) as floats.
struct PanelQ8_1 {
  Panel32 values;
  float d[kRows];
  float s[kRows];
};
static_assert(sizeof(PanelQ8_1) == 320);

// q8_K partner of q4_K / q5_K / q6_K: the 8 runs of 32 values, the rows' d, and the rows' sums of 16-value
// groups 2p and 2p + 1 as an int16 pair in bsums[p][r].
struct PanelQ8K {
  Panel32 values[8];
  float d[kRows];
  int16_t bsums[8][kRows][2];
};
static_assert(sizeof(PanelQ8K) == 2336);

template <typename Panel, int kBlockValues>
size_t panel_bytes(int64_t n) {
  return static_cast<size_t>(n / kBlockValues) * sizeof(Panel);
}

template <typename Block>
const Block* row_at(const void* rows, size_t row_bytes, int64_t r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + static_cast<size_t>(r) * row_bytes);
}

void pack_values(const int8_t* values, int64_t r, Panel32& panel) {
  for (int m = 0; m < 4; ++m) {
    std::memcpy(panel.qs[m][r / 4][0][r % 4], values + 4 * m, 4);
    std::memcpy(panel.qs[m][r / 4][1][r % 4], values + 16 + 4 * m, 4);
  }
}

// Rows past n_rows stay zero.
void pack_q8_0(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8_0*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8_0, q::kBlock32>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8_0>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlock32; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < q::kBlock32; ++j) sum += a[b].qs[j];
      pack_values(a[b].qs, r, out[b].values);
      out[b].d[r] = half_to_float(a[b].d);
      out[b].sum[r] = sum;
    }
  }
}

void pack_q8_1(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8_1*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8_1, q::kBlock32>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8_1>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlock32; ++b) {
      pack_values(a[b].qs, r, out[b].values);
      out[b].d[r] = half_to_float(a[b].d);
      out[b].s[r] = half_to_float(a[b].s);
    }
  }
}

void pack_q8_k(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8K*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8K, q::kBlockK>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8K>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      for (int s = 0; s < 8; ++s) pack_values(a[b].qs + 32 * s, r, out[b].values[s]);
      out[b].d[r] = a[b].d;
      for (int p = 0; p < 8; ++p) {
        out[b].bsums[p][r][0] = a[b].bsums[2 * p];
        out[b].bsums[p][r][1] = a[b].bsums[2 * p + 1];
      }
    }
  }
}

// The dots of 32 unsigned weight values (lanes in order) with the rows of a Panel32, not yet joined: lane r of
// low_rows (r < 4) and lane 4 + r hold row r's sums over chunks 0..3 and 4..7; high_rows the same for rows
// 4..7 (left alone unless kUpper).
template <bool kUpper>
REWIND_INLINE void dot32(__m256i values, const Panel32& a, __m256i& low_rows, __m256i& high_rows) {
  // pshufd wants an immediate, which a loop index is not in unoptimized builds.
  const __m256i chunks[4] = {_mm256_shuffle_epi32(values, 0x00), _mm256_shuffle_epi32(values, 0x55),
                             _mm256_shuffle_epi32(values, 0xAA), _mm256_shuffle_epi32(values, 0xFF)};
  const __m256i zero = _mm256_setzero_si256();
  low_rows = dpbusd(zero, chunks[0], load256(a.qs[0][0]));
  if constexpr (kUpper) high_rows = dpbusd(zero, chunks[0], load256(a.qs[0][1]));
#pragma GCC unroll 3
  for (int m = 1; m < 4; ++m) {
    low_rows = dpbusd(low_rows, chunks[m], load256(a.qs[m][0]));
    if constexpr (kUpper) high_rows = dpbusd(high_rows, chunks[m], load256(a.qs[m][1]));
  }
}

// Lane r = row r's total from dot32's two halves (high_rows ignored unless kUpper).
template <bool kUpper>
REWIND_INLINE __m256i join_rows(__m256i low_rows, __m256i high_rows) {
  if constexpr (!kUpper) high_rows = _mm256_setzero_si256();
  return _mm256_add_epi32(_mm256_permute2x128_si256(low_rows, high_rows, 0x20),
                          _mm256_permute2x128_si256(low_rows, high_rows, 0x31));
}

// ---- blocks of 32 ----

template <typename Type, bool kUpper>
void panel_dot_blocks32_rows(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                             const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  using Block = typename Type::Block;
  using Panel = std::conditional_t<Type::kAffine, PanelQ8_1, PanelQ8_0>;
  const auto* a = static_cast<const Panel*>(panel);
  const int64_t n_blocks = n / q::kBlock32;
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 chains[8];
    for (__m256& chain : chains) chain = _mm256_setzero_ps();
    // Block b into chain j = b % 8 (vec_dot_avx2.h).
    auto step = [&](int64_t b, int j) REWIND_INLINE_LAMBDA {
      __m256i low_rows, high_rows = _mm256_setzero_si256();
      dot32<kUpper>(Type::unsigned_values(w[b]), a[b].values, low_rows, high_rows);
      __m256i dot = join_rows<kUpper>(low_rows, high_rows);
      if constexpr (!Type::kAffine) {
        dot = _mm256_sub_epi32(dot, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].sum)),
                                                      Type::kOffsetShift));
      }
      chains[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), row_scales(w[b].d, a[b].d), chains[j]);
      if constexpr (Type::kAffine) {
        chains[j] = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(w[b].m)), _mm256_loadu_ps(a[b].s), chains[j]);
      }
    };
    int64_t b0 = 0;
    for (; b0 + 8 <= n_blocks; b0 += 8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) step(b0 + j, j);
    }
#pragma GCC unroll 7
    for (int j = 0; j < 7; ++j) {
      if (b0 + j < n_blocks) step(b0 + j, j);
    }
    store_rows(sum_chains(chains), n_rows, out + i, out_stride);
  }
}

// Up to 4 rows: only the lower half of the panel.
template <typename Type>
void panel_dot_blocks32(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                        const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  if (n_rows <= kRows / 2) {
    panel_dot_blocks32_rows<Type, false>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  } else {
    panel_dot_blocks32_rows<Type, true>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  }
}

// ---- k-quants ----
//
// Each run of 32 values has one scale (q4_K / q5_K) or one per 16 (q6_K: a scale vector with the first group's in
// the low 128-bit lane, the second's in the high one, matching dot32's halves): the run's int32 dots are
// multiplied by it (vpmulld) and summed; the rows' halves are joined once per super-block.

template <bool kUpper>
REWIND_INLINE void add_scaled_run(__m256i values, const Panel32& a, __m256i scale, __m256i& low_sum,
                                  __m256i& high_sum) {
  __m256i low_rows, high_rows = _mm256_setzero_si256();
  dot32<kUpper>(values, a, low_rows, high_rows);
  low_sum = _mm256_add_epi32(low_sum, _mm256_mullo_epi32(low_rows, scale));
  if constexpr (kUpper) high_sum = _mm256_add_epi32(high_sum, _mm256_mullo_epi32(high_rows, scale));
}

template <bool kFifthBit, typename Block, bool kUpper>
void panel_dot_k_affine_rows(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                             const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8K*>(panel);
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      uint64_t scales, mins;
      unpack_k_scales(w[b].scales, scales, mins);
      // The runs' scales as int32 and their mins as int16 pairs (min, min), in memory: one broadcast load each.
      alignas(32) int32_t run_scales[8], min_pairs[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(run_scales),
                         _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(scales))));
      const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins));
      _mm256_store_si256(reinterpret_cast<__m256i*>(min_pairs), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8)));
      __m256i low_sum = _mm256_setzero_si256(), high_sum = _mm256_setzero_si256();
      __m256i high_bits = load_high_bits(w[b]);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        // Runs 2c (low nibbles) and 2c + 1 (high nibbles), values in order.
        const __m256i packed = load256(w[b].qs + 32 * c);
        __m256i low = _mm256_and_si256(packed, low_nibble);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
        if constexpr (kFifthBit) {
          const __m256i one = _mm256_set1_epi8(1);
          low = _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
          high =
              _mm256_or_si256(high, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
          high_bits = _mm256_srli_epi16(high_bits, 2);
        }
        add_scaled_run<kUpper>(low, a[b].values[2 * c], _mm256_set1_epi32(run_scales[2 * c]), low_sum, high_sum);
        add_scaled_run<kUpper>(high, a[b].values[2 * c + 1], _mm256_set1_epi32(run_scales[2 * c + 1]), low_sum,
                               high_sum);
      }
      const __m256i sum = join_rows<kUpper>(low_sum, high_sum);
      // Sub-block j's min times the row's sum over its 32 values, from the pair of 16-value sums.
      __m256i min_sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        min_sum = dpwssd(min_sum, load256(a[b].bsums[j]), _mm256_set1_epi32(min_pairs[j]));
      }
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), row_scales(w[b].d, a[b].d), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), row_scales(w[b].dmin, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

template <bool kFifthBit, typename Block>
void panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                        const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  if (n_rows <= kRows / 2) {
    panel_dot_k_affine_rows<kFifthBit, Block, false>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out,
                                                     out_stride);
  } else {
    panel_dot_k_affine_rows<kFifthBit, Block, true>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out,
                                                    out_stride);
  }
}

template <bool kUpper>
void panel_dot_q6_k_rows(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                         const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8K*>(panel);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<q::BlockQ6K>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
      // The scales of groups 2p and 2p + 1 as an int16 pair in scale_pairs[p], in memory: one broadcast load each.
      alignas(32) int32_t scale_pairs[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(scale_pairs), _mm256_cvtepi8_epi16(scales8));
      // sum_g sc_g bsum_g, taken out 32 times below.
      __m256i offset_sum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) {
        offset_sum = dpwssd(offset_sum, load256(a[b].bsums[p]), _mm256_set1_epi32(scale_pairs[p]));
      }
      __m256i low_sum = _mm256_setzero_si256(), high_sum = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(w[b].ql + 64 * h);
        const __m256i ql1 = load256(w[b].ql + 64 * h + 32);
        const __m256i qh = load256(w[b].qh + 32 * h);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          // Values 128h + 32k + l: groups g = 8h + 2k (l < 16) and g + 1, whose scales go to the low and the high
          // 128-bit lane.
          const auto g = static_cast<char>(8 * h + 2 * k), next = static_cast<char>(g + 1);
          const __m128i pick = _mm_setr_epi8(g, g, g, g, next, next, next, next, 0, 0, 0, 0, 0, 0, 0, 0);
          const __m256i scale = _mm256_cvtepi8_epi32(_mm_shuffle_epi8(scales8, pick));
          add_scaled_run<kUpper>(q6_values(ql0, ql1, qh, k), a[b].values[4 * h + k], scale, low_sum, high_sum);
        }
      }
      const __m256i sum = _mm256_sub_epi32(join_rows<kUpper>(low_sum, high_sum), _mm256_slli_epi32(offset_sum, 5));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), row_scales(w[b].d, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

void panel_dot_q6_k(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows, const void* panel,
                    int64_t n_rows, float* out, int64_t out_stride) {
  if (n_rows <= kRows / 2) {
    panel_dot_q6_k_rows<false>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  } else {
    panel_dot_q6_k_rows<true>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  }
}

// min_rows (where the matmul switches from tiles to panels) from instruction counts (callgrind, n = 4096, with
// the VNNI instructions counted as one each), not from timings. Per 32 values and weight row, tiles of 1, 2,
// 3, 4 rows against panels of up to 4 rows (which need only the lower half of the panel) and of 5..8 rows:
// q4_0 14, 19, 24, 31 against 26 and 33; q4_1 11, 15, 18, 22 against 27 and 34; q4_K 13, 18, 23, 27 (8 rows:
// 46) against 24 and 33. So panels from 4 rows for every type (the matmul's groups of long activation rows
// hold fewer rows than the tiles could take, which favours the panels further).
// TODO(when: a machine with VNNI runs the benchmarks): time these thresholds.
PanelKernel panel_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::q4_0:
      return {pack_q8_0, panel_dot_blocks32<TypeQ4_0>, panel_bytes<PanelQ8_0, q::kBlock32>, 4, kPanelRows};
    case DType::q5_0:
      return {pack_q8_0, panel_dot_blocks32<TypeQ5_0>, panel_bytes<PanelQ8_0, q::kBlock32>, 4, kPanelRows};
    case DType::q8_0:
      return {pack_q8_0, panel_dot_blocks32<TypeQ8_0>, panel_bytes<PanelQ8_0, q::kBlock32>, 4, kPanelRows};
    case DType::q4_1:
      return {pack_q8_1, panel_dot_blocks32<TypeQ4_1>, panel_bytes<PanelQ8_1, q::kBlock32>, 4, kPanelRows};
    case DType::q5_1:
      return {pack_q8_1, panel_dot_blocks32<TypeQ5_1>, panel_bytes<PanelQ8_1, q::kBlock32>, 4, kPanelRows};
    case DType::q4_k:
      return {pack_q8_k, panel_dot_k_affine<false, q::BlockQ4K>, panel_bytes<PanelQ8K, q::kBlockK>, 4, kPanelRows};
    case DType::q5_k:
      return {pack_q8_k, panel_dot_k_affine<true, q::BlockQ5K>, panel_bytes<PanelQ8K, q::kBlockK>, 4, kPanelRows};
    case DType::q6_k:
      return {pack_q8_k, panel_dot_q6_k, panel_bytes<PanelQ8K, q::kBlockK>, 4, kPanelRows};
    default: return {};
  }
}

template <typename Kernel>
VecDotKernel make_kernel(PanelKernel panel) {
  return {Kernel::one, tiles::tile_by_row_groups<Kernel>, panel, {}};
}

// A decode step's row of q4_0 / q5_0 goes through AVX2's one-row panel (the row packed once per matmul, two
// weight blocks per unpacking step): its bits are the table's, and on Zen 4 it beats this table's one-row
// kernel (BM_Matmul rows:1, 1 thread, n = 2048, fastest of 32 runs: q4_0 153 -> 92 us, q5_0 195 -> 162 us).
template <typename Type>
VecDotKernel make_block32_kernel(PanelKernel panel, DType weight_type) {
  const PanelKernel single_row = avx2::narrow_panel_kernel(weight_type);
  return {DotBlock32<Type>::one, DotBlock32<Type>::tile, panel, single_row.rows == 1 ? single_row : PanelKernel{}};
}

// The quantized types' kernels of this flavour; the float types keep the AVX2 kernels.
VecDotKernel kernel_table(DType weight_type) {
  switch (weight_type) {
    case DType::q4_0: return make_block32_kernel<TypeQ4_0>(panel_kernel(weight_type), weight_type);
    case DType::q4_1: return make_block32_kernel<TypeQ4_1>(panel_kernel(weight_type), weight_type);
    case DType::q5_0: return make_block32_kernel<TypeQ5_0>(panel_kernel(weight_type), weight_type);
    case DType::q5_1: return make_block32_kernel<TypeQ5_1>(panel_kernel(weight_type), weight_type);
    case DType::q8_0: return make_block32_kernel<TypeQ8_0>(panel_kernel(weight_type), weight_type);
    case DType::q4_k: return make_kernel<DotKAffine<false, q::BlockQ4K>>(panel_kernel(weight_type));
    case DType::q5_k: return make_kernel<DotKAffine<true, q::BlockQ5K>>(panel_kernel(weight_type));
    case DType::q6_k: return make_kernel<DotQ6K>(panel_kernel(weight_type));
    default: return avx2::vec_dot_kernel(weight_type);
  }
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni
