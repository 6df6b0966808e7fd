// Internal to the dot-product AVX2 files (vec_dot_avx2.cpp, vec_dot_panel_avx2.cpp): register helpers they
// share, and the per-output arithmetic both must follow so that a panel (8 activation rows at once) and the
// one-row kernels give the same bits. Only *_avx2.cpp files and the VNNI kernels (vec_dot_vnni_impl.h, which
// follow the same arithmetic) may include it; every function here is always inlined, so none is emitted in an
// object compiled with other instructions. Nothing here is for other kernels.
//
// Per output (weight row w, activation row a), the integer part is exact and may be computed any way; the
// float part is fixed:
//   blocks of 32 (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4): D_b = the int32 dot of block b,
//     s_b = f(d_w) * f(d_a) (mxfp4: 2^(e - 128) * f(d_a), its levels doubled);
//     eight chains, block b going to chain k = b % 8: P[k] = fma(float(D_b), s_b, P[k]), then for q4_1 / q5_1
//     P[k] = fma(f(m_w), f(s_a), P[k]); result = sum_chains(P). One row keeps the chains in the lanes of one
//     vector (8 consecutive blocks per FMA); a panel keeps one vector per chain (lanes are activation rows).
//   q4_K / q5_K / q2_K: per super-block, S = sum over sub-blocks of scale * dot, N = sum of min * (sum of qa);
//     acc = fma(float(S), f(d_w) * d_a, acc), then acc = fnma(float(N), f(dmin_w) * d_a, acc).
//   q6_K, q3_K, iq4_xs, tq1_0, tq2_0 and the grid i-quants (iq2_*, iq3_*, iq1_*): S = sum over groups of scale *
//     dot of the signed levels with qa (scale 1 for the ternary types; the i-quants' odd scales 2 ls + 1 and
//     levels 8 grid +- 1 for iq1); acc = fma(float(S) * k, f(d_w) * d_a, acc), k = 1/8 (iq2_*, iq1_*), 1/4
//     (iq3_xxs), else 1 (an exact scaling; iq1_m's d is gathered from its scale words).
// f() is the fp16-to-float conversion, float() the round-to-nearest int32 conversion; accumulators start at +0.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "vec_dot_avx2.h needs -mavx2 -mfma -mf16c: include it only from *_avx2.cpp files"
#endif

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "tensor/quant/blocks.h"
#include "tensor/quant/iq_grids.h"

namespace rwd::kernels::cpu::avx2 {

#define REWIND_INLINE inline __attribute__((always_inline))
#define REWIND_INLINE_LAMBDA __attribute__((always_inline))

// An empty asm that takes and returns v: the compiler must have v in a register here, so it cannot reassociate
// a running sum into a tree of all its terms, which would need more registers than there are and spill.
REWIND_INLINE void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }
// The same for a float vector; also makes the compiler load a vector used by several FMAs once instead of
// folding the load into each of them.
REWIND_INLINE void keep_in_register(__m256& v) { asm("" : "+x"(v)); }

REWIND_INLINE float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

REWIND_INLINE __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

REWIND_INLINE uint32_t load_u32(const void* p) {
  uint32_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}
REWIND_INLINE uint64_t load_u64(const void* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

// All 8 lanes (4 of the 128-bit form) = the 4 bytes at p; broadcast_u64, all 4 64-bit lanes = the 8 bytes at
// p. A float broadcast from memory is a pure load; the integer forms cost a load and a shuffle.
REWIND_INLINE __m256i broadcast_u32(const void* p) {
  return _mm256_castps_si256(_mm256_broadcast_ss(static_cast<const float*>(p)));
}
REWIND_INLINE __m256i broadcast_u64(const void* p) {
  return _mm256_castpd_si256(_mm256_broadcast_sd(static_cast<const double*>(p)));
}
REWIND_INLINE __m128i broadcast_u32_128(const void* p) {
  return _mm_castps_si128(_mm_broadcast_ss(static_cast<const float*>(p)));
}

// The int32 sum of the 8 lanes, in lane 0 (exact: any order gives it).
REWIND_INLINE __m128i hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
}

// The chains of 32-blocks summed as ((P0 + P1) + (P2 + P3)) + ((P4 + P5) + (P6 + P7)), from the lanes of one
// vector (one row) or lane by lane from 8 vectors (a panel).
REWIND_INLINE float sum_chains(__m256 p) {
  const __m128 low = _mm256_castps256_ps128(p), high = _mm256_extractf128_ps(p, 1);
  const __m128 pairs_low = _mm_hadd_ps(low, low);     // P0 + P1, P2 + P3
  const __m128 pairs_high = _mm_hadd_ps(high, high);  // P4 + P5, P6 + P7
  const __m128 quads = _mm_hadd_ps(pairs_low, pairs_high);  // lane 0: (P0 + P1) + (P2 + P3); lane 2: the rest
  return _mm_cvtss_f32(_mm_add_ss(quads, _mm_movehl_ps(quads, quads)));
}

REWIND_INLINE __m256 sum_chains(const __m256 (&p)[8]) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(p[0], p[1]), _mm256_add_ps(p[2], p[3])),
                       _mm256_add_ps(_mm256_add_ps(p[4], p[5]), _mm256_add_ps(p[6], p[7])));
}

// Lane j = 0xFF where bit j of the 32 bits at qh is set, else 0.
REWIND_INLINE __m256i spread_bits(const uint8_t* qh) {
  const __m256i word = _mm256_set1_epi32(static_cast<int>(load_u32(qh)));
  const __m256i byte_of_lane =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit_of_lane = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(word, byte_of_lane);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit_of_lane), bit_of_lane);
}

// The 8 bytes of packed (a k-quant block's scales or mins) as int16 words, in both 128-bit lanes.
REWIND_INLINE __m256i widen_bytes(uint64_t packed) {
  return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(packed))));
}

// Every lane = int16 word `word` of v (v holds the same 8 words in both 128-bit lanes, as widen_bytes gives).
REWIND_INLINE __m256i broadcast_word(__m256i v, int word) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<short>(((2 * word + 1) << 8) | (2 * word))));
}

// Low 128-bit lane = word `low_word` of v, high lane = word `high_word`.
REWIND_INLINE __m256i broadcast_words(__m256i v, int low_word, int high_word) {
  const __m128i low = _mm_set1_epi16(static_cast<short>(((2 * low_word + 1) << 8) | (2 * low_word)));
  const __m128i high = _mm_set1_epi16(static_cast<short>(((2 * high_word + 1) << 8) | (2 * high_word)));
  return _mm256_shuffle_epi8(v, _mm256_set_m128i(high, low));
}

// Lane j = value j of a 32-value block: byte i of qs holds value i (low nibble) and value i + 16 (high).
REWIND_INLINE __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Lane j = the signed level that nibble j of a 32-value block (layout as unpack_nibbles) indexes in levels
// (iq4_nl, mxfp4).
REWIND_INLINE __m256i lookup_levels(const int8_t (&levels)[16], const uint8_t* qs) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)));
  return _mm256_shuffle_epi8(table, unpack_nibbles(qs));
}

// Half an mxfp4 block's e8m0 scale, 2^(e - 128), as a float (e < 2: subnormal); tensor/quant/blocks.h's
// e8m0_half_to_fp32, kept here so that no copy of it is compiled with AVX2.
REWIND_INLINE float e8m0_half_to_float(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Lanes = the 2-bit levels k (0..3) of 32 bytes: bits 2k, 2k + 1 of each.
REWIND_INLINE __m256i two_bit_levels(__m256i packed, int k) {
  return _mm256_and_si256(_mm256_srli_epi16(packed, 2 * k), _mm256_set1_epi8(3));
}

// The base-3 digit of each byte x that powers (int16 lanes, the same for both bytes of a lane; 3^k for digit k)
// selects: ((uint8_t)(x * 3^k) * 3) >> 8. Even and odd bytes are multiplied apart so that no carry crosses a byte.
REWIND_INLINE __m256i ternary_digits(__m256i bytes, __m256i powers) {
  const __m256i low_byte = _mm256_set1_epi16(0x00FF);
  const __m256i three = _mm256_set1_epi16(3);
  const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(bytes, low_byte), powers), low_byte);
  const __m256i even_digits = _mm256_srli_epi16(_mm256_mullo_epi16(even, three), 8);
  const __m256i odd = _mm256_mullo_epi16(_mm256_andnot_si256(low_byte, bytes), powers);  // (x 3^k mod 256) << 8
  const __m256i odd_digits = _mm256_mulhi_epu16(odd, three);                            // its digit, low byte
  return _mm256_or_si256(even_digits, _mm256_slli_epi16(odd_digits, 8));
}

// Vector i (0..7) of the digits of a tq1_0 super-block, values 32i .. 32i + 31 in order (layout in
// tensor/quant/blocks.h): digits 0..4 of qs[0..31] (i = 0..4), digits 0 and 1, then 2 and 3, of qs[32..47] (one
// per 128-bit lane; i = 5, 6), and digit 4 of qs[32..47] beside digits 0..3 of qh[0..3] (i = 7).
REWIND_INLINE __m256i tq1_0_digits(const uint8_t* qs, const uint8_t* qh, int i) {
  if (i < 5) {
    static constexpr short kPowers[5] = {1, 3, 9, 27, 81};
    return ternary_digits(load256(qs), _mm256_set1_epi16(kPowers[i]));
  }
  const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 32));
  if (i == 5) {
    return ternary_digits(_mm256_broadcastsi128_si256(second), _mm256_set_m128i(_mm_set1_epi16(3), _mm_set1_epi16(1)));
  }
  if (i == 6) {
    return ternary_digits(_mm256_broadcastsi128_si256(second), _mm256_set_m128i(_mm_set1_epi16(27), _mm_set1_epi16(9)));
  }
  return ternary_digits(_mm256_set_m128i(broadcast_u32_128(qh), second),
                        _mm256_set_m128i(_mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27), _mm_set1_epi16(81)));
}

// The fp16 field at `first` and at the same offset of the next count - 1 <= 7 blocks (stride bytes apart) as
// floats; lanes from count on are 0.
REWIND_INLINE __m256 gather_halves(const void* first, size_t stride, int count) {
  const auto* p = static_cast<const uint8_t*>(first);
  auto half_at = [p, stride](int j) {
    uint16_t h;
    std::memcpy(&h, p + static_cast<size_t>(j) * stride, sizeof(h));
    return static_cast<int>(h);
  };
  __m128i v = _mm_cvtsi32_si128(half_at(0));
  if (count > 1) v = _mm_insert_epi16(v, half_at(1), 1);
  if (count > 2) v = _mm_insert_epi16(v, half_at(2), 2);
  if (count > 3) v = _mm_insert_epi16(v, half_at(3), 3);
  if (count > 4) v = _mm_insert_epi16(v, half_at(4), 4);
  if (count > 5) v = _mm_insert_epi16(v, half_at(5), 5);
  if (count > 6) v = _mm_insert_epi16(v, half_at(6), 6);
  if (count > 7) v = _mm_insert_epi16(v, half_at(7), 7);
  return _mm256_cvtph_ps(v);
}

// Panels: lanes r < n_rows (of 8, one per activation row) of v to out[r * out_stride].
REWIND_INLINE void store_rows(__m256 v, int64_t n_rows, float* out, int64_t out_stride) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  for (int64_t r = 0; r < n_rows; ++r) out[r * out_stride] = lanes[r];
}

// Panels: f(weight fp16 scale) times the 8 rows' float scales; lane r is the one-row kernel's scalar product.
REWIND_INLINE __m256 row_scales(uint16_t weight_scale, const float* panel_scales) {
  return _mm256_mul_ps(_mm256_set1_ps(half_to_float(weight_scale)), _mm256_loadu_ps(panel_scales));
}

// The eight 6-bit scales and mins of a q4_K / q5_K block (layout in tensor/quant/blocks.h), one per byte.
REWIND_INLINE void unpack_k_scales(const uint8_t* packed, uint64_t& scales, uint64_t& mins) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof(word));
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
  const uint64_t scale_low = word[0] & low6, scale_high = (word[2] & low4) | (((word[0] >> 6) & low2) << 4);
  const uint64_t min_low = word[1] & low6, min_high = ((word[2] >> 4) & low4) | (((word[1] >> 6) & low2) << 4);
  scales = scale_low | scale_high << 32;
  mins = min_low | min_high << 32;
}

// ---- the grid i-quants (iq2_*, iq3_*, iq1_*): one sub-block of 32 values at a time ----
//
// A decoder gives sub-block j of a super-block as grid magnitudes (unsigned bytes, at most 62; iq1: |8 grid +-
// 1| <= 9), signs (+1 / -1 bytes, to move onto the activations), and the odd scale 2 ls + 1 of its first and
// of its last 16 values (int16 lanes beside maddubs' pairs). S = sum over values of scale * sign * magnitude *
// qa; the value is d * S * kSumScale.

struct IqSubBlock {
  __m256i magnitudes;
  __m256i signs;
  __m256i scale16;
};

// Per 7-bit sign code: its 8 signs (bit j set: value j negative; an eighth bit makes their count even) as
// bytes +1 / -1. Computed here rather than by tensor/quant's even_parity_signs, whose call would compile an
// AVX2 copy of it.
constexpr std::array<uint64_t, 128> make_even_sign_bytes() {
  std::array<uint64_t, 128> table{};
  for (uint32_t code = 0; code < 128; ++code) {
    uint32_t signs = code;
    if (std::popcount(code) % 2 == 1) signs |= 128;
    for (int j = 0; j < 8; ++j) table[code] |= static_cast<uint64_t>((signs >> j) & 1 ? 0xFF : 0x01) << (8 * j);
  }
  return table;
}
inline constexpr std::array<uint64_t, 128> kEvenSignBytes = make_even_sign_bytes();

// Signs of 32 values from four 7-bit codes in bits 0..27.
REWIND_INLINE __m256i sign_bytes_from_codes(uint32_t codes) {
  return _mm256_set_epi64x(static_cast<long long>(kEvenSignBytes[(codes >> 21) & 127]),
                           static_cast<long long>(kEvenSignBytes[(codes >> 14) & 127]),
                           static_cast<long long>(kEvenSignBytes[(codes >> 7) & 127]),
                           static_cast<long long>(kEvenSignBytes[codes & 127]));
}

// Signs of 32 values from 32 plain sign bits (bit j set: value j negative).
REWIND_INLINE __m256i sign_bytes_from_bits(const uint8_t* bits) {
  return _mm256_or_si256(spread_bits(bits), _mm256_set1_epi8(1));
}

REWIND_INLINE __m256i grid_entries(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_set_epi64x(static_cast<long long>(grid[i3]), static_cast<long long>(grid[i2]),
                           static_cast<long long>(grid[i1]), static_cast<long long>(grid[i0]));
}

REWIND_INLINE __m256i grid_entries(const uint32_t* grid, const int (&i)[8]) {
  return _mm256_set_epi32(static_cast<int>(grid[i[7]]), static_cast<int>(grid[i[6]]), static_cast<int>(grid[i[5]]),
                          static_cast<int>(grid[i[4]]), static_cast<int>(grid[i[3]]), static_cast<int>(grid[i[2]]),
                          static_cast<int>(grid[i[1]]), static_cast<int>(grid[i[0]]));
}

REWIND_INLINE __m256i half_scales(int first, int second) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(second)), _mm_set1_epi16(static_cast<short>(first)));
}

REWIND_INLINE __m256i same_scales(uint32_t scale) { return _mm256_set1_epi16(static_cast<short>(scale)); }

// Layouts of the blocks in tensor/quant/blocks.h. prepare() reads what all sub-blocks share; most share nothing.
struct NothingShared {};

struct NothingToPrepare {
  using Prepared = NothingShared;
  template <typename Block>
  static REWIND_INLINE Prepared prepare(const Block&) {
    return {};
  }
};

// iq2_xs / iq2_s: the low nibble of a sub-block's scale byte for its first 16 values, the high one for the rest.
REWIND_INLINE __m256i iq2_half_scales(uint8_t scales) {
  return half_scales(2 * (scales & 15) + 1, 2 * (scales >> 4) + 1);
}

struct DecodeIQ2XXS : NothingToPrepare {
  using Block = tensor::quant::BlockIQ2XXS;
  static constexpr float kSumScale = 0.125f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(w.qs) + 8 * j;
    const uint32_t codes = load_u32(bytes + 4);
    return {grid_entries(tensor::quant::kIq2XxsGrid, bytes[0], bytes[1], bytes[2], bytes[3]),
            sign_bytes_from_codes(codes), same_scales(2 * (codes >> 28) + 1)};
  }
};

struct DecodeIQ2XS : NothingToPrepare {
  using Block = tensor::quant::BlockIQ2XS;
  static constexpr float kSumScale = 0.125f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const uint16_t* code = w.qs + 4 * j;
    const uint32_t sign_codes = static_cast<uint32_t>(code[0] >> 9) | static_cast<uint32_t>(code[1] >> 9) << 7 |
                                static_cast<uint32_t>(code[2] >> 9) << 14 | static_cast<uint32_t>(code[3] >> 9) << 21;
    return {grid_entries(tensor::quant::kIq2XsGrid, code[0] & 511, code[1] & 511, code[2] & 511, code[3] & 511),
            sign_bytes_from_codes(sign_codes), iq2_half_scales(w.scales[j])};
  }
};

struct DecodeIQ2S : NothingToPrepare {
  using Block = tensor::quant::BlockIQ2S;
  static constexpr float kSumScale = 0.125f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const uint8_t* low = w.qs + 4 * j;
    const int high = w.qh[j];
    return {grid_entries(tensor::quant::kIq2SGrid, low[0] | (high & 3) << 8, low[1] | (high & 12) << 6,
                         low[2] | (high & 48) << 4, low[3] | (high & 192) << 2),
            sign_bytes_from_bits(w.qs + 32 + 4 * j), iq2_half_scales(w.scales[j])};
  }
};

struct DecodeIQ3XXS : NothingToPrepare {
  using Block = tensor::quant::BlockIQ3XXS;
  static constexpr float kSumScale = 0.25f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const uint8_t* index = w.qs + 8 * j;
    const int indices[8] = {index[0], index[1], index[2], index[3], index[4], index[5], index[6], index[7]};
    const uint32_t codes = load_u32(w.qs + 64 + 4 * j);
    return {grid_entries(tensor::quant::kIq3XxsGrid, indices), sign_bytes_from_codes(codes),
            same_scales(2 * (codes >> 28) + 1)};
  }
};

struct DecodeIQ3S : NothingToPrepare {
  using Block = tensor::quant::BlockIQ3S;
  static constexpr float kSumScale = 1.0f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const uint8_t* low = w.qs + 8 * j;
    const int high = w.qh[j];
    int indices[8];
    for (int k = 0; k < 8; ++k) indices[k] = low[k] | ((high >> k) & 1) << 8;
    const uint32_t ls = (w.scales[j / 2] >> (4 * (j % 2))) & 15;
    return {grid_entries(tensor::quant::kIq3SGrid, indices), sign_bytes_from_bits(w.signs + 4 * j),
            same_scales(2 * ls + 1)};
  }
};

// The iq1 types: per value 8 grid + delta_sign (grid in -1..1, delta +-1/8 per group) in -9..9, never 0; these
// signed levels are their own signs.
REWIND_INLINE IqSubBlock iq1_sub_block(__m256i grid, __m256i delta_signs, __m256i scale16) {
  const __m256i levels = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), delta_signs);
  return {_mm256_sign_epi8(levels, levels), levels, scale16};
}

struct DecodeIQ1S : NothingToPrepare {
  using Block = tensor::quant::BlockIQ1S;
  static constexpr float kSumScale = 0.125f;
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, Prepared, int j) {
    const uint8_t* low = w.qs + 4 * j;
    const int high = w.qh[j];
    const __m256i grid = grid_entries(tensor::quant::kIq1SGrid, low[0] | (high & 7) << 8, low[1] | (high & 0x38) << 5,
                                      low[2] | (high & 0x1c0) << 2, low[3] | (high & 0xe00) >> 1);
    return iq1_sub_block(grid, _mm256_set1_epi8((high & 0x8000) != 0 ? -1 : 1),
                         same_scales(2 * static_cast<uint32_t>((high >> 12) & 7) + 1));
  }
};

// iq1_m's four scale words, whose top nibbles are its fp16 d.
REWIND_INLINE uint64_t iq1_m_scale_words(const tensor::quant::BlockIQ1M& w) {
  uint64_t words;
  std::memcpy(&words, w.scales, sizeof(words));
  return words;
}

REWIND_INLINE uint16_t iq1_m_half_d(const tensor::quant::BlockIQ1M& w) {
  const uint64_t words = iq1_m_scale_words(w);
  return static_cast<uint16_t>(((words >> 12) & 0xF) | ((words >> 24) & 0xF0) | ((words >> 36) & 0xF00) |
                               ((words >> 48) & 0xF000));
}

struct DecodeIQ1M {
  using Block = tensor::quant::BlockIQ1M;
  struct Prepared {
    int16_t odd_scales[16];  // 2 ls + 1 of the values 16 s .. 16 s + 15
  };
  static constexpr float kSumScale = 0.125f;
  static REWIND_INLINE Prepared prepare(const Block& w) {
    const uint64_t words = iq1_m_scale_words(w);
    Prepared prepared;
    for (int s = 0; s < 16; ++s) {
      prepared.odd_scales[s] = static_cast<int16_t>(2 * ((words >> (16 * (s / 4) + 3 * (s % 4))) & 7) + 1);
    }
    return prepared;
  }
  static REWIND_INLINE IqSubBlock sub_block(const Block& w, const Prepared& prepared, int j) {
    const uint8_t* low = w.qs + 4 * j;
    const int high = w.qh[2 * j] | w.qh[2 * j + 1] << 8;  // four nibbles, one per group of 8
    const __m256i grid = grid_entries(tensor::quant::kIq1SGrid, low[0] | (high & 7) << 8, low[1] | (high & 0x70) << 4,
                                      low[2] | (high & 0x700), low[3] | (high & 0x7000) >> 4);
    // Bit 3 of nibble g (bit 4 g + 3 of high) set: group g's 8 deltas are -1, else +1.
    const __m256i one = _mm256_set1_epi64x(1);
    const __m256i delta_bits =
        _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(high), _mm256_setr_epi64x(3, 7, 11, 15)), one);
    const __m256i deltas = _mm256_or_si256(_mm256_cmpeq_epi64(delta_bits, one), _mm256_set1_epi8(1));
    return iq1_sub_block(grid, deltas, half_scales(prepared.odd_scales[2 * j], prepared.odd_scales[2 * j + 1]));
  }
};

}  // namespace rwd::kernels::cpu::avx2
