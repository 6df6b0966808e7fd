// AVX2/FMA/F16C dot-product kernels and activation quantizers (this file alone is compiled with those
// instructions; dispatch.cpp calls it only after checking the CPU). Quantized blocks are unpacked to int8 in
// registers and multiplied with maddubs/madd. Each kernel is a template over a tile of NW weight rows by NA
// activation rows that shares block unpacking and loads across the tile; every output keeps its own
// accumulators and goes through exactly the operations of the 1 x 1 instance, so a tile of any shape gives the
// bits of the one-pair kernel. Nothing here calls inline functions shared with plain-x86 files, so no AVX2 copy
// of them can leak out.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::avx2 {
namespace {

using tensor::DType;
namespace q = tensor::quant;

#define REWIND_INLINE inline __attribute__((always_inline))

// ---- helpers ----

REWIND_INLINE float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

REWIND_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

REWIND_INLINE float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

REWIND_INLINE __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

REWIND_INLINE uint64_t load_u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return h;
}

// Lane j = value j of a 32-value block: byte i of qs holds value i (low nibble) and value i + 16 (high).
REWIND_INLINE __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Lane j = 0xFF where bit j of bits is set, else 0.
REWIND_INLINE __m256i spread_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i word = _mm256_set1_epi32(static_cast<int>(bits));
  const __m256i byte_of_lane =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit_of_lane = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(word, byte_of_lane);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit_of_lane), bit_of_lane);
}

// Eight int32 sums of four products each, for unsigned w (0..127) and signed a.
REWIND_INLINE __m256i dot_u8_i8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// The same for signed w: maddubs wants an unsigned left side, so move w's sign onto a. w_abs = |w|.
REWIND_INLINE __m256i dot_i8_i8(__m256i w_abs, __m256i w, __m256i a) {
  return dot_u8_i8(w_abs, _mm256_sign_epi8(a, w));
}

// Row `row` of a tile whose rows are `row_bytes` apart, as an array of blocks.
template <typename Block>
REWIND_INLINE const Block* row_blocks(const uint8_t* rows, size_t row_bytes, int row) {
  return reinterpret_cast<const Block*>(rows + static_cast<size_t>(row) * row_bytes);
}

// The fp16 field at `first` and at the same offset of the next blocks (stride bytes apart) as 8 floats; with
// kFull false only `count` blocks exist and the other lanes are 0. Assembled in general-purpose registers,
// which are otherwise idle in these kernels, instead of with vector inserts.
template <bool kFull>
REWIND_INLINE __m256 gather_halves(const void* first, size_t stride, int count) {
  const auto* p = static_cast<const uint8_t*>(first);
  uint64_t word[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    if (kFull || i < count) word[i / 4] |= load_u16(p + static_cast<size_t>(i) * stride) << (16 * (i % 4));
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<long long>(word[1]), static_cast<long long>(word[0])));
}

// ---- blocks of 32 against q8_0 / q8_1 ----
//
// Per output: block b adds cvt(int32 x8 of w . a) * (d_w d_a) into acc_even or acc_odd by the parity of b
// (two chains hide the FMA latency of the one-pair kernel). Blocks go in groups of 8 (the last one may be
// shorter) whose scales are gathered 8 at a time; q4_1 / q5_1 add the group's min terms m_w s_a, lane j for
// block 8g + j, into acc_odd before its blocks. Result: hsum(acc_even + acc_odd).

// Weight unpackers: return the 32 values of a block as int8 lanes and say whether they are signed.
struct UnpackQ4_0 {
  using Block = q::BlockQ4_0;
  static constexpr bool kSigned = true;
  static REWIND_INLINE __m256i values(const Block& w) {
    return _mm256_sub_epi8(unpack_nibbles(w.qs), _mm256_set1_epi8(8));
  }
};
struct UnpackQ5_0 {
  using Block = q::BlockQ5_0;
  static constexpr bool kSigned = true;
  // (nibble | bit << 4) - 16 is the nibble with 0xF0 set where the fifth bit is clear.
  static REWIND_INLINE __m256i values(const Block& w) {
    const __m256i high = _mm256_andnot_si256(spread_bits(w.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(unpack_nibbles(w.qs), high);
  }
};
struct UnpackQ8_0 {
  using Block = q::BlockQ8_0;
  static constexpr bool kSigned = true;
  static REWIND_INLINE __m256i values(const Block& w) { return load256(w.qs); }
};
struct UnpackQ4_1 {
  using Block = q::BlockQ4_1;
  static constexpr bool kSigned = false;
  static REWIND_INLINE __m256i values(const Block& w) { return unpack_nibbles(w.qs); }
};
struct UnpackQ5_1 {
  using Block = q::BlockQ5_1;
  static constexpr bool kSigned = false;
  static REWIND_INLINE __m256i values(const Block& w) {
    const __m256i high = _mm256_and_si256(spread_bits(w.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(w.qs), high);
  }
};

template <typename Unpack>
struct DotBlock32 {
  // Two accumulators per output: 1 x 4 keeps 8 of them and the unpacked block in the 16 registers.
  static constexpr int kTileW = 1;
  static constexpr int kTileA = 4;
  static constexpr bool kAffine = !Unpack::kSigned;  // q4_1 / q5_1 carry a min and pair with q8_1
  using Block = typename Unpack::Block;
  using ActBlock = std::conditional_t<kAffine, q::BlockQ8_1, q::BlockQ8_0>;
  static constexpr DType kActType = kAffine ? DType::q8_1 : DType::q8_0;

  // Block b (lane j of the current group's scales) of every pair into acc.
  template <int NW, int NA>
  static REWIND_INLINE void block(const Block* const (&w)[NW], const ActBlock* const (&a)[NA], int64_t b, int j,
                                  const float (&scale)[NW][NA][8], __m256 (&acc)[NW][NA]) {
    __m256i values[NW], values_abs[NW];
    for (int i = 0; i < NW; ++i) {
      values[i] = Unpack::values(w[i][b]);
      if constexpr (!kAffine) values_abs[i] = _mm256_sign_epi8(values[i], values[i]);
    }
    for (int r = 0; r < NA; ++r) {
      const __m256i act = load256(a[r][b].qs);
      for (int i = 0; i < NW; ++i) {
        const __m256i dot = kAffine ? dot_u8_i8(values[i], act) : dot_i8_i8(values_abs[i], values[i], act);
        acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcast_ss(&scale[i][r][j]), acc[i][r]);
      }
    }
  }

  // Eight activation scales from `fields` (the fp16 field of a block and the 7 after it) or, for tile rows,
  // from the row's float copies of them; the values are the same.
  template <bool kFull, bool kTileRows>
  static REWIND_INLINE __m256 act_scales(const float* floats, const uint16_t* fields, int count) {
    if constexpr (!kTileRows) {
      return gather_halves<kFull>(fields, sizeof(ActBlock), count);
    } else if constexpr (kFull) {
      return _mm256_loadu_ps(floats);
    } else {
      alignas(32) float lanes[8] = {};
      std::memcpy(lanes, floats, static_cast<size_t>(count) * sizeof(float));
      return _mm256_load_ps(lanes);
    }
  }

  // Blocks [b0, b0 + count) of every pair; count is 8 when kFull.
  template <bool kFull, bool kTileRows, int NW, int NA>
  static REWIND_INLINE void group(const Block* const (&w)[NW], const ActBlock* const (&a)[NA],
                                  const float* const (&d_a_floats)[NA], const float* const (&s_a_floats)[NA],
                                  int64_t b0, int count, __m256 (&even)[NW][NA], __m256 (&odd)[NW][NA]) {
    alignas(32) float scale[NW][NA][8];  // d_w d_a of the group's blocks, broadcast one by one
    __m256 d_a[NA], s_a[NA];
    for (int r = 0; r < NA; ++r) {
      d_a[r] = act_scales<kFull, kTileRows>(d_a_floats[r] + b0, &a[r][b0].d, count);
      if constexpr (kAffine) s_a[r] = act_scales<kFull, kTileRows>(s_a_floats[r] + b0, &a[r][b0].s, count);
    }
    for (int i = 0; i < NW; ++i) {
      const __m256 d_w = gather_halves<kFull>(&w[i][b0].d, sizeof(Block), count);
      for (int r = 0; r < NA; ++r) _mm256_store_ps(scale[i][r], _mm256_mul_ps(d_w, d_a[r]));
      if constexpr (kAffine) {
        const __m256 m_w = gather_halves<kFull>(&w[i][b0].m, sizeof(Block), count);
        for (int r = 0; r < NA; ++r) odd[i][r] = _mm256_fmadd_ps(m_w, s_a[r], odd[i][r]);
      }
    }
    if constexpr (kFull) {
      block(w, a, b0 + 0, 0, scale, even);
      block(w, a, b0 + 1, 1, scale, odd);
      block(w, a, b0 + 2, 2, scale, even);
      block(w, a, b0 + 3, 3, scale, odd);
      block(w, a, b0 + 4, 4, scale, even);
      block(w, a, b0 + 5, 5, scale, odd);
      block(w, a, b0 + 6, 6, scale, even);
      block(w, a, b0 + 7, 7, scale, odd);
    } else {
      int j = 0;
      for (; j + 2 <= count; j += 2) {
        block(w, a, b0 + j, j, scale, even);
        block(w, a, b0 + j + 1, j + 1, scale, odd);
      }
      if (j < count) block(w, a, b0 + j, j, scale, even);
    }
  }

  // kTileRows: the activation rows are tile rows carrying float scales (vec_dot_impl.h).
  template <int NW, int NA, bool kTileRows = true>
  static void run(int64_t n, const uint8_t* weights, size_t weight_row_bytes, const uint8_t* act,
                  size_t act_row_bytes, float* out, int64_t out_stride) {
    const int64_t n_blocks = n / q::kBlock32;
    const Block* w[NW];
    const ActBlock* a[NA];
    const float* d_a_floats[NA];
    const float* s_a_floats[NA];
    for (int i = 0; i < NW; ++i) w[i] = row_blocks<Block>(weights, weight_row_bytes, i);
    for (int r = 0; r < NA; ++r) {
      a[r] = row_blocks<ActBlock>(act, act_row_bytes, r);
      d_a_floats[r] = kTileRows ? tile_row_d(kActType, n, a[r]) : nullptr;
      s_a_floats[r] = kTileRows ? tile_row_s(kActType, n, a[r]) : nullptr;
    }
    __m256 even[NW][NA], odd[NW][NA];
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) even[i][r] = odd[i][r] = _mm256_setzero_ps();
    }
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) group<true, kTileRows>(w, a, d_a_floats, s_a_floats, b, 8, even, odd);
    if (b < n_blocks) {
      group<false, kTileRows>(w, a, d_a_floats, s_a_floats, b, static_cast<int>(n_blocks - b), even, odd);
    }
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) out[r * out_stride + i] = hsum(_mm256_add_ps(even[i][r], odd[i][r]));
    }
  }

  static float one_pair(int64_t n, const void* weight, const void* activation) {
    float out;
    run<1, 1, false>(n, static_cast<const uint8_t*>(weight), 0, static_cast<const uint8_t*>(activation), 0, &out, 1);
    return out;
  }
};

// ---- k-quants against q8_K ----
//
// Per super-block and output, the integer sum of scale * (q . qa) is exact in int32 lanes. q4_K / q5_K add it
// as cvt(sum) * (d_w d_a) into the output's one accumulator, then subtract the min term cvt(sum of m bsums) *
// (dmin_w d_a) from it; q6_K adds cvt(sum - 32 sum of scale bsums) * (d_w d_a). Result: hsum(acc).

// The eight 6-bit scales and mins of a q4_K / q5_K block (layout in blocks.h), unpacked four at a time.
REWIND_INLINE void unpack_k_scales(const uint8_t* packed, uint64_t& scales, uint64_t& mins) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof(word));
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
  const uint64_t scale_low = word[0] & low6, scale_high = (word[2] & low4) | (((word[0] >> 6) & low2) << 4);
  const uint64_t min_low = word[1] & low6, min_high = ((word[2] >> 4) & low4) | (((word[1] >> 6) & low2) << 4);
  scales = scale_low | scale_high << 32;
  mins = min_low | min_high << 32;
}

REWIND_INLINE __m256i load_high_bits(const q::BlockQ4K&) { return _mm256_setzero_si256(); }
REWIND_INLINE __m256i load_high_bits(const q::BlockQ5K& w) { return load256(w.qh); }

template <bool kFifthBit, typename Block>
struct DotKAffine {
  static constexpr int kTileW = 1;
  static constexpr int kTileA = 4;

  template <int NW, int NA>
  static void run(int64_t n, const uint8_t* weights, size_t weight_row_bytes, const uint8_t* act,
                  size_t act_row_bytes, float* out, int64_t out_stride) {
    const Block* w[NW];
    const q::BlockQ8K* a[NA];
    for (int i = 0; i < NW; ++i) w[i] = row_blocks<Block>(weights, weight_row_bytes, i);
    for (int r = 0; r < NA; ++r) a[r] = row_blocks<q::BlockQ8K>(act, act_row_bytes, r);
    __m256 acc[NW][NA];
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      __m256i scales16[NW], high_bits[NW];
      for (int i = 0; i < NW; ++i) {
        uint64_t scales, mins;
        unpack_k_scales(w[i][b].scales, scales, mins);
        // The 8 scales as int16 in both 128-bit lanes; shuffles broadcast one of them.
        scales16[i] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(scales))));
        high_bits[i] = load_high_bits(w[i][b]);
      }
      __m256i sum[NW][NA];
      for (int i = 0; i < NW; ++i) {
        for (int r = 0; r < NA; ++r) sum[i][r] = _mm256_setzero_si256();
      }
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m256i low[NW], high[NW], scale_low[NW], scale_high[NW];
        for (int i = 0; i < NW; ++i) {
          const __m256i packed = load256(w[i][b].qs + 32 * c);
          low[i] = _mm256_and_si256(packed, low_nibble);
          high[i] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
          if constexpr (kFifthBit) {
            const __m256i one = _mm256_set1_epi8(1);
            low[i] = _mm256_or_si256(low[i], _mm256_slli_epi16(_mm256_and_si256(high_bits[i], one), 4));
            high[i] = _mm256_or_si256(high[i],
                                      _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits[i], 1), one), 4));
            high_bits[i] = _mm256_srli_epi16(high_bits[i], 2);
          }
          scale_low[i] =
              _mm256_shuffle_epi8(scales16[i], _mm256_set1_epi16(static_cast<short>(((4 * c + 1) << 8) | (4 * c))));
          scale_high[i] = _mm256_shuffle_epi8(scales16[i],
                                              _mm256_set1_epi16(static_cast<short>(((4 * c + 3) << 8) | (4 * c + 2))));
        }
        for (int r = 0; r < NA; ++r) {
          const __m256i a_low = load256(a[r][b].qs + 64 * c);
          const __m256i a_high = load256(a[r][b].qs + 64 * c + 32);
          for (int i = 0; i < NW; ++i) {
            const __m256i p_low = _mm256_madd_epi16(_mm256_maddubs_epi16(low[i], a_low), scale_low[i]);
            const __m256i p_high = _mm256_madd_epi16(_mm256_maddubs_epi16(high[i], a_high), scale_high[i]);
            sum[i][r] = _mm256_add_epi32(sum[i][r], _mm256_add_epi32(p_low, p_high));
          }
        }
      }
      for (int i = 0; i < NW; ++i) {
        uint64_t scales, mins;
        unpack_k_scales(w[i][b].scales, scales, mins);
        // mins16 lane k = min of sub-block k / 2, matching bsums lane k (group of 16 values k).
        const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
        const float d_w = half_to_float(w[i][b].d);
        const float dmin_w = half_to_float(w[i][b].dmin);
        for (int r = 0; r < NA; ++r) {
          const __m256i min_sum = _mm256_madd_epi16(load256(a[r][b].bsums), mins16);
          acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i][r]), _mm256_set1_ps(d_w * a[r][b].d), acc[i][r]);
          acc[i][r] =
              _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_set1_ps(dmin_w * a[r][b].d), acc[i][r]);
        }
      }
    }
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) out[r * out_stride + i] = hsum(acc[i][r]);
    }
  }
};

// q6_K: values are (q6 - 32); the -32 is taken out with the bsums: sum sc_g (q - 32) qa = sum sc_g q qa
// - 32 sum sc_g bsum_g, all in int32, then one FMA per super-block and output.
struct DotQ6K {
  static constexpr int kTileW = 1;
  static constexpr int kTileA = 4;

  template <int NW, int NA>
  static void run(int64_t n, const uint8_t* weights, size_t weight_row_bytes, const uint8_t* act,
                  size_t act_row_bytes, float* out, int64_t out_stride) {
    const q::BlockQ6K* w[NW];
    const q::BlockQ8K* a[NA];
    for (int i = 0; i < NW; ++i) w[i] = row_blocks<q::BlockQ6K>(weights, weight_row_bytes, i);
    for (int r = 0; r < NA; ++r) a[r] = row_blocks<q::BlockQ8K>(act, act_row_bytes, r);
    __m256 acc[NW][NA];
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      __m256i sum[NW][NA];
      for (int i = 0; i < NW; ++i) {
        const auto* sc = reinterpret_cast<const uint8_t*>(w[i][b].scales);
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        for (int r = 0; r < NA; ++r) {
          const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(a[r][b].bsums), scales16), 5);
          sum[i][r] = _mm256_sub_epi32(_mm256_setzero_si256(), offset);
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          __m256i v[NW], scale[NW];
          for (int i = 0; i < NW; ++i) {
            const auto* sc = reinterpret_cast<const uint8_t*>(w[i][b].scales);
            // The 8 scales of this half as int16 in both 128-bit lanes; lanes 0..15 of v are group 8h + 2k,
            // lanes 16..31 group 8h + 2k + 1: int16 scale 2k in the low 128-bit lane, 2k + 1 in the high one.
            const __m256i half_scales = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
            const __m256i pick_pair =
                _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                                 _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | (4 * k))));
            scale[i] = _mm256_shuffle_epi8(half_scales, pick_pair);
            // values 32k + l of this half (layout in blocks.h), each 0..63
            const __m256i ql = load256(w[i][b].ql + 64 * h + 32 * (k % 2));
            const __m256i qh = load256(w[i][b].qh + 32 * h);
            const __m256i low4 = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low_nibble);
            __m256i high2;
            if (k == 0) high2 = _mm256_slli_epi16(qh, 4);
            else if (k == 1) high2 = _mm256_slli_epi16(qh, 2);
            else if (k == 2) high2 = qh;
            else high2 = _mm256_srli_epi16(qh, 2);
            v[i] = _mm256_or_si256(low4, _mm256_and_si256(high2, bits45));
          }
          for (int r = 0; r < NA; ++r) {
            const __m256i a_k = load256(a[r][b].qs + 128 * h + 32 * k);
            for (int i = 0; i < NW; ++i) {
              sum[i][r] = _mm256_add_epi32(sum[i][r], _mm256_madd_epi16(_mm256_maddubs_epi16(v[i], a_k), scale[i]));
            }
          }
        }
      }
      for (int i = 0; i < NW; ++i) {
        const float d_w = half_to_float(w[i][b].d);
        for (int r = 0; r < NA; ++r) {
          acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i][r]), _mm256_set1_ps(d_w * a[r][b].d), acc[i][r]);
        }
      }
    }
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) out[r * out_stride + i] = hsum(acc[i][r]);
    }
  }
};

// ---- float weights against f32 activations ----
//
// Four accumulators per output take 8 values each of every 32; leftover groups of 8 go to the first, the last
// n % 8 products to a scalar sum. Result: hsum((acc0 + acc1) + (acc2 + acc3)) + tail.

struct LoadF32 {
  using Elem = float;
  static REWIND_INLINE __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static REWIND_INLINE float load1(const float* p) { return *p; }
};
struct LoadF16 {
  using Elem = uint16_t;
  static REWIND_INLINE __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static REWIND_INLINE float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct LoadBf16 {
  using Elem = uint16_t;
  static REWIND_INLINE __m256 load8(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static REWIND_INLINE float load1(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
};

template <typename Load>
struct DotFloat {
  static constexpr int kTileW = 1;
  static constexpr int kTileA = 2;  // 4 accumulators per output; more would spill them

  template <int NW, int NA>
  static void run(int64_t n, const uint8_t* weights, size_t weight_row_bytes, const uint8_t* act,
                  size_t act_row_bytes, float* out, int64_t out_stride) {
    using Elem = typename Load::Elem;
    const Elem* w[NW];
    const float* x[NA];
    __m256 acc[NW][NA][4];
    float tail[NW][NA];
    for (int i = 0; i < NW; ++i) w[i] = reinterpret_cast<const Elem*>(weights + static_cast<size_t>(i) * weight_row_bytes);
    for (int r = 0; r < NA; ++r) x[r] = reinterpret_cast<const float*>(act + static_cast<size_t>(r) * act_row_bytes);
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) {
        for (int k = 0; k < 4; ++k) acc[i][r][k] = _mm256_setzero_ps();
        tail[i][r] = 0.0f;
      }
    }
    int64_t e = 0;
    for (; e + 32 <= n; e += 32) {
      for (int k = 0; k < 4; ++k) {
        __m256 wv[NW];
        for (int i = 0; i < NW; ++i) wv[i] = Load::load8(w[i] + e + 8 * k);
        for (int r = 0; r < NA; ++r) {
          const __m256 xv = _mm256_loadu_ps(x[r] + e + 8 * k);
          for (int i = 0; i < NW; ++i) acc[i][r][k] = _mm256_fmadd_ps(wv[i], xv, acc[i][r][k]);
        }
      }
    }
    for (; e + 8 <= n; e += 8) {
      for (int i = 0; i < NW; ++i) {
        const __m256 wv = Load::load8(w[i] + e);
        for (int r = 0; r < NA; ++r) acc[i][r][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[r] + e), acc[i][r][0]);
      }
    }
    for (; e < n; ++e) {
      for (int i = 0; i < NW; ++i) {
        const float wi = Load::load1(w[i] + e);
        for (int r = 0; r < NA; ++r) tail[i][r] += wi * x[r][e];
      }
    }
    for (int i = 0; i < NW; ++i) {
      for (int r = 0; r < NA; ++r) {
        const __m256 total = _mm256_add_ps(_mm256_add_ps(acc[i][r][0], acc[i][r][1]),
                                           _mm256_add_ps(acc[i][r][2], acc[i][r][3]));
        out[r * out_stride + i] = hsum(total) + tail[i][r];
      }
    }
  }
};

// ---- wrappers ----

template <typename Kernel>
float one_pair(int64_t n, const void* weight, const void* activation) {
  if constexpr (requires { Kernel::one_pair(n, weight, activation); }) {
    return Kernel::one_pair(n, weight, activation);
  } else {
    float out;
    Kernel::template run<1, 1>(n, static_cast<const uint8_t*>(weight), 0, static_cast<const uint8_t*>(activation), 0,
                               &out, 1);
    return out;
  }
}

// One tile of n_w <= NW weight rows by n_a <= NA activation rows, by the instance of exactly that shape.
template <typename Kernel, int NW, int NA>
void run_shape(int64_t n_w, int64_t n_a, int64_t n, const uint8_t* weights, size_t weight_row_bytes,
               const uint8_t* act, size_t act_row_bytes, float* out, int64_t out_stride) {
  if constexpr (NW > 1) {
    if (n_w < NW) {
      run_shape<Kernel, NW - 1, NA>(n_w, n_a, n, weights, weight_row_bytes, act, act_row_bytes, out, out_stride);
      return;
    }
  }
  if constexpr (NA > 1) {
    if (n_a < NA) {
      run_shape<Kernel, NW, NA - 1>(n_w, n_a, n, weights, weight_row_bytes, act, act_row_bytes, out, out_stride);
      return;
    }
  }
  Kernel::template run<NW, NA>(n, weights, weight_row_bytes, act, act_row_bytes, out, out_stride);
}

// Weight tiles outermost: a tile's weight rows stay in L1 while it meets every activation row.
template <typename Kernel>
void tile(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows, const void* activations,
          size_t act_row_bytes, int64_t n_act_rows, float* out, int64_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* act = static_cast<const uint8_t*>(activations);
  for (int64_t i = 0; i < n_weight_rows; i += Kernel::kTileW) {
    const int64_t n_w = std::min<int64_t>(Kernel::kTileW, n_weight_rows - i);
    for (int64_t r = 0; r < n_act_rows; r += Kernel::kTileA) {
      const int64_t n_a = std::min<int64_t>(Kernel::kTileA, n_act_rows - r);
      run_shape<Kernel, Kernel::kTileW, Kernel::kTileA>(n_w, n_a, n, w + static_cast<size_t>(i) * weight_row_bytes,
                                                        weight_row_bytes, act + static_cast<size_t>(r) * act_row_bytes,
                                                        act_row_bytes, out + r * out_stride + i, out_stride);
    }
  }
}

template <typename Kernel>
constexpr VecDotKernel make_kernel() {
  return {one_pair<Kernel>, tile<Kernel>};
}

// ---- activation quantizers (byte-identical to tensor/quant/reference.cpp) ----

inline float abs_max_32(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  for (int k = 1; k < 4; ++k) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)), m);
  return hmax(m);
}

// round-half-even(clamp(x * inv_d, -127, 127)) for 32 values, packed to int8 in order.
inline __m256i quantize_32(const float* x, float inv_d) {
  const __m256 scale = _mm256_set1_ps(inv_d);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) {
    // max(v, lo) returns lo for a NaN v, as the reference's round_clamp does.
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale), lo), hi);
    q[k] = _mm256_cvtps_epi32(v);
  }
  // packs interleave 128-bit halves; the permute restores value order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline int sum_i8_32(__m256i v) {
  const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), v), _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Returns the stored d (fp16 of amax / 127) and writes the values.
inline __m256i quantize_q8_block(const float* x, uint16_t& d_bits) {
  const float amax = abs_max_32(x);
  d_bits = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
  const float d = _cvtsh_ss(d_bits);
  return quantize_32(x, d != 0.0f ? 1.0f / d : 0.0f);
}

void quantize_q8_0(const float* x, void* activation_row, int64_t n) {
  auto* blocks = static_cast<q::BlockQ8_0*>(activation_row);
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const __m256i values = quantize_q8_block(x + b * q::kBlock32, blocks[b].d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocks[b].qs), values);
  }
}

void quantize_q8_1(const float* x, void* activation_row, int64_t n) {
  auto* blocks = static_cast<q::BlockQ8_1*>(activation_row);
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const __m256i values = quantize_q8_block(x + b * q::kBlock32, blocks[b].d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocks[b].qs), values);
    const float s = _cvtsh_ss(blocks[b].d) * static_cast<float>(sum_i8_32(values));
    blocks[b].s = _cvtss_sh(s, _MM_FROUND_TO_NEAREST_INT);
  }
}

void quantize_q8_k(const float* x, void* activation_row, int64_t n) {
  auto* blocks = static_cast<q::BlockQ8K*>(activation_row);
  for (int64_t b = 0; b < n / q::kBlockK; ++b) {
    const float* xb = x + b * q::kBlockK;
    q::BlockQ8K& block = blocks[b];
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < q::kBlockK / 8; ++k) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * k)), m);
    const float d = hmax(m) / 127.0f;
    block.d = d;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    for (int k = 0; k < q::kBlockK / 32; ++k) {
      const __m256i values = quantize_32(xb + 32 * k, inv_d);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + 32 * k), values);
      // Sums of four bytes; lanes 0..3 cover bytes 0..15 (group 2k), lanes 4..7 bytes 16..31 (group 2k + 1).
      const __m256i fours = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), values), _mm256_set1_epi16(1));
      const __m256i pairs = _mm256_hadd_epi32(fours, fours);
      const __m256i groups = _mm256_hadd_epi32(pairs, pairs);
      block.bsums[2 * k] = static_cast<int16_t>(_mm256_extract_epi32(groups, 0));
      block.bsums[2 * k + 1] = static_cast<int16_t>(_mm256_extract_epi32(groups, 4));
    }
  }
}

void copy_f32_row(const float* x, void* activation_row, int64_t n) {
  std::memcpy(activation_row, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

VecDotKernel vec_dot_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::f32: return make_kernel<DotFloat<LoadF32>>();
    case DType::f16: return make_kernel<DotFloat<LoadF16>>();
    case DType::bf16: return make_kernel<DotFloat<LoadBf16>>();
    case DType::q4_0: return make_kernel<DotBlock32<UnpackQ4_0>>();
    case DType::q4_1: return make_kernel<DotBlock32<UnpackQ4_1>>();
    case DType::q5_0: return make_kernel<DotBlock32<UnpackQ5_0>>();
    case DType::q5_1: return make_kernel<DotBlock32<UnpackQ5_1>>();
    case DType::q8_0: return make_kernel<DotBlock32<UnpackQ8_0>>();
    case DType::q4_k: return make_kernel<DotKAffine<false, q::BlockQ4K>>();
    case DType::q5_k: return make_kernel<DotKAffine<true, q::BlockQ5K>>();
    case DType::q6_k: return make_kernel<DotQ6K>();
    default: return {};
  }
}

QuantizeRowFn quantize_row_fn(DType activation_type) {
  switch (activation_type) {
    case DType::f32: return copy_f32_row;
    case DType::q8_0: return quantize_q8_0;
    case DType::q8_1: return quantize_q8_1;
    case DType::q8_k: return quantize_q8_k;
    default: return nullptr;
  }
}

}  // namespace rwd::kernels::cpu::avx2
