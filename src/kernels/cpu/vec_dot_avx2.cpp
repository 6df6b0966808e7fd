// AVX2/FMA/F16C dot products of one weight row with one activation row (quantized types: with up to 4
// activation rows sharing the unpacking), the tiled form of the float kernels (blocks of weight rows by
// activation rows, one accumulator at a time), and the activation quantizers (this file alone
// with vec_dot_panel_avx2.cpp is compiled with those instructions; dispatch.cpp calls it only after checking
// the CPU). Quantized blocks are unpacked to int8 in registers and multiplied with maddubs/madd; the float
// arithmetic per output is the one vec_dot_avx2.h fixes, so these kernels and the panel kernels (8 activation
// rows at once) give the same bits. Nothing here calls inline functions shared with plain-x86 files, so no
// AVX2 copy of them can leak out.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "kernels/cpu/vec_dot_tiles.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::avx2 {
namespace {

using tensor::DType;
namespace q = tensor::quant;

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

// Lane i = the sum of the 8 lanes of d[i].
REWIND_INLINE __m256i transpose_sum(const __m256i (&d)[8]) {
  const __m256i low4 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
  const __m256i high4 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(low4, high4, 0x20), _mm256_permute2x128_si256(low4, high4, 0x31));
}

// Eight int32 sums of four products each, for unsigned w (0..127) and signed a.
REWIND_INLINE __m256i dot_u8_i8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// The same for signed w: maddubs wants an unsigned left side, so move w's sign onto a.
REWIND_INLINE __m256i dot_i8_i8(__m256i w, __m256i a) {
  return dot_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

// ---- blocks of 32 against q8_0 / q8_1 ----

// Weight unpackers: the 32 values of a block as int8 lanes, and whether they are signed.
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

struct UnpackIQ4NL {
  using Block = q::BlockIQ4NL;
  static constexpr bool kSigned = true;
  static REWIND_INLINE __m256i values(const Block& w) { return lookup_levels(q::kIq4NlLevels, w.qs); }
};
struct UnpackMXFP4 {
  using Block = q::BlockMXFP4;
  static constexpr bool kSigned = true;
  static REWIND_INLINE __m256i values(const Block& w) { return lookup_levels(q::kMxfp4Levels, w.qs); }
  // The e8m0 scales of blocks 0 .. count - 1 halved, 2^(e - 128), as floats (e < 2: subnormal); lanes from
  // count on are 0.
  static REWIND_INLINE __m256 scales(const Block* w, int count) {
    alignas(32) int32_t e[8] = {};
    for (int j = 0; j < count; ++j) e[j] = w[j].e;
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(e));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(x, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), x);
    const __m256i bits = _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), x));
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_castsi256_ps(_mm256_and_si256(bits, live));
  }
};

// The weight scales of blocks 0 .. count - 1 as floats, 0 from lane count on: the fp16 d of most types, or the
// unpacker's own (mxfp4).
template <typename Unpack>
REWIND_INLINE __m256 weight_scales(const typename Unpack::Block* w, int count) {
  if constexpr (requires { Unpack::scales(w, count); }) {
    return Unpack::scales(w, count);
  } else {
    return gather_halves(&w->d, sizeof(typename Unpack::Block), count);
  }
}

template <typename Unpack>
struct DotBlock32 {
  static constexpr bool kAffine = !Unpack::kSigned;  // q4_1 / q5_1 carry a min and pair with q8_1
  using Block = typename Unpack::Block;
  using ActBlock = std::conditional_t<kAffine, q::BlockQ8_1, q::BlockQ8_0>;

  // The int32 dots of blocks b0 .. b0 + count - 1, lane j for block b0 + j; 0 from lane count on.
  static REWIND_INLINE __m256i group_dots(const Block* w, const ActBlock* a, int64_t b0, int count) {
    __m256i d[8];
    for (int j = 0; j < 8; ++j) {
      if (j < count) {
        const __m256i values = Unpack::values(w[b0 + j]);
        const __m256i act = load256(a[b0 + j].qs);
        d[j] = kAffine ? dot_u8_i8(values, act) : dot_i8_i8(values, act);
      } else {
        d[j] = _mm256_setzero_si256();
      }
    }
    return transpose_sum(d);
  }

  // Blocks b0 .. b0 + count - 1 into chains 0 .. count - 1 (vec_dot_avx2.h); count is 8 except at the end.
  static REWIND_INLINE __m256 group(const Block* w, const ActBlock* a, int64_t b0, int count, __m256 chains) {
    const __m256 scales = _mm256_mul_ps(weight_scales<Unpack>(w + b0, count),
                                        gather_halves(&a[b0].d, sizeof(ActBlock), count));
    __m256 next = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_dots(w, a, b0, count)), scales, chains);
    if constexpr (kAffine) {
      next = _mm256_fmadd_ps(gather_halves(&w[b0].m, sizeof(Block), count),
                             gather_halves(&a[b0].s, sizeof(ActBlock), count), next);
    }
    return next;
  }

  static float one(int64_t n, const void* weight, const void* activation) {
    const auto* w = static_cast<const Block*>(weight);
    const auto* a = static_cast<const ActBlock*>(activation);
    const int64_t n_blocks = n / q::kBlock32;
    __m256 chains = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) chains = group(w, a, b, 8, chains);
    if (b < n_blocks) {
      const int count = static_cast<int>(n_blocks - b);
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      chains = _mm256_blendv_ps(chains, group(w, a, b, count, chains), _mm256_castsi256_ps(live));
    }
    return sum_chains(chains);
  }

  // ---- the same against up to kMaxRows activation rows: each weight block unpacked once for all of them ----

  static constexpr int kMaxRows = 4;

  // group_dots for NA rows, summed as transpose_sum does, a pair of blocks at a time, so that few of the NA * 8
  // products are live at once.
  template <int NA>
  static REWIND_INLINE void group_dots_rows(const Block* w, const ActBlock* const (&a)[NA], int64_t b0, int count,
                                            __m256i (&dots)[NA]) {
    auto block_dots = [&](int j, __m256i (&d)[NA]) REWIND_INLINE_LAMBDA {
      if (j >= count) {
        for (__m256i& v : d) v = _mm256_setzero_si256();
        return;
      }
      const __m256i values = Unpack::values(w[b0 + j]);
      if constexpr (kAffine) {
        for (int r = 0; r < NA; ++r) d[r] = dot_u8_i8(values, load256(a[r][b0 + j].qs));
      } else {
        const __m256i magnitudes = _mm256_sign_epi8(values, values);
        for (int r = 0; r < NA; ++r) d[r] = dot_u8_i8(magnitudes, _mm256_sign_epi8(load256(a[r][b0 + j].qs), values));
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

  // group() for NA rows.
  template <int NA>
  static REWIND_INLINE void group_rows(const Block* w, const ActBlock* const (&a)[NA], int64_t b0, int count,
                                       __m256 (&chains)[NA]) {
    __m256i dots[NA];
    group_dots_rows(w, a, b0, count, dots);
    const __m256 block_scales = weight_scales<Unpack>(w + b0, count);
    for (int r = 0; r < NA; ++r) {
      const __m256 scales = _mm256_mul_ps(block_scales, gather_halves(&a[r][b0].d, sizeof(ActBlock), count));
      chains[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[r]), scales, chains[r]);
    }
    if constexpr (kAffine) {
      const __m256 weight_mins = gather_halves(&w[b0].m, sizeof(Block), count);
      for (int r = 0; r < NA; ++r) {
        chains[r] = _mm256_fmadd_ps(weight_mins, gather_halves(&a[r][b0].s, sizeof(ActBlock), count), chains[r]);
      }
    }
  }

  // out[r * out_stride] for NA activation rows against one weight row, each as one() computes it.
  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    const ActBlock* a[NA];
    for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const ActBlock*>(act + static_cast<size_t>(r) * act_row_bytes);
    const int64_t n_blocks = n / q::kBlock32;
    __m256 chains[NA];
    for (__m256& c : chains) c = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) group_rows(w, a, b, 8, chains);
    if (b < n_blocks) {
      const int count = static_cast<int>(n_blocks - b);
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 next[NA];
      for (int r = 0; r < NA; ++r) next[r] = chains[r];
      group_rows(w, a, b, count, next);
      for (int r = 0; r < NA; ++r) chains[r] = _mm256_blendv_ps(chains[r], next[r], _mm256_castsi256_ps(live));
    }
    for (int r = 0; r < NA; ++r) out[r * out_stride] = sum_chains(chains[r]);
  }
};

// ---- k-quants against q8_K ----

REWIND_INLINE __m256i load_high_bits(const q::BlockQ4K&) { return _mm256_setzero_si256(); }
REWIND_INLINE __m256i load_high_bits(const q::BlockQ5K& w) { return load256(w.qh); }

// Lanes 0..3 = the sums of the 8 lanes of a, b, c, d (exact, any order).
REWIND_INLINE __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i quads = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
}

// K-quant rows share each super-block's unpacking across up to kMaxRows activation rows (a verify batch too
// small for panels); every row keeps its own sums and accumulator.
constexpr int kMaxKRows = 4;

template <bool kFifthBit, typename Block>
struct DotKAffine {
  static constexpr int kMaxRows = kMaxKRows;

  // The int32 lanes of a super-block whose totals are S (sum) and N (min_sum) of vec_dot_avx2.h, per row.
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA],
                                 __m256i (&min_sum)[NA]) {
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    uint64_t scales, mins;
    unpack_k_scales(w.scales, scales, mins);
    // The 8 scales as int16 in both 128-bit lanes; shuffles broadcast one of them.
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
        const __m256i p_low = _mm256_madd_epi16(_mm256_maddubs_epi16(low, load256(a[r]->qs + 64 * c)), scale_low);
        const __m256i p_high =
            _mm256_madd_epi16(_mm256_maddubs_epi16(high, load256(a[r]->qs + 64 * c + 32)), scale_high);
        sum[r] = _mm256_add_epi32(sum[r], _mm256_add_epi32(p_low, p_high));
      }
    }
    // mins16 lane k = min of sub-block k / 2, matching bsums lane k (group of 16 values k).
    const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    for (int r = 0; r < NA; ++r) min_sum[r] = _mm256_madd_epi16(load256(a[r]->bsums), mins16);
  }

  // out[r * out_stride] for NA activation rows against one weight row.
  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    const __m256i zero = _mm256_setzero_si256();
    __m128 acc[NA];
    for (int r = 0; r < NA; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const q::BlockQ8K* a[NA];
      for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const q::BlockQ8K*>(act + r * act_row_bytes) + b;
      __m256i sum[NA], min_sum[NA];
      sums<NA>(w[b], a, sum, min_sum);
      for (int r = 0; r < NA; ++r) {
        // One reduction for both: lane 0 = S, lane 1 = N.
        const __m128 totals = _mm_cvtepi32_ps(sum4(sum[r], min_sum[r], zero, zero));
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

// q6_K: values are (q6 - 32); the -32 is taken out with the bsums: sum sc_g (q - 32) qa = sum sc_g q qa
// - 32 sum sc_g bsum_g, all in int32.
struct DotQ6K {
  static constexpr int kMaxRows = kMaxKRows;

  // The int32 lanes of a super-block whose total is S of vec_dot_avx2.h, per row.
  template <int NA>
  static REWIND_INLINE void sums(const q::BlockQ6K& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
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
        // values 32k + l of this half (layout in blocks.h), each 0..63
        const __m256i low4 = _mm256_and_si256(k < 2 ? (k == 0 ? ql0 : ql1) : _mm256_srli_epi16(k == 2 ? ql0 : ql1, 4),
                                              low_nibble);
        const __m256i high2 = k == 0 ? _mm256_slli_epi16(qh, 4)
                              : k == 1 ? _mm256_slli_epi16(qh, 2)
                              : k == 2 ? qh
                                       : _mm256_srli_epi16(qh, 2);
        const __m256i values = _mm256_or_si256(low4, _mm256_and_si256(high2, bits45));
        // Lanes 0..15 are group 8h + 2k, lanes 16..31 group 8h + 2k + 1: int16 scale 2k in the low
        // 128-bit lane, 2k + 1 in the high one.
        const __m256i pick_pair =
            _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                             _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | (4 * k))));
        const __m256i scale = _mm256_shuffle_epi8(half_scales, pick_pair);
        for (int r = 0; r < NA; ++r) {
          const __m256i p = _mm256_maddubs_epi16(values, load256(a[r]->qs + 128 * h + 32 * k));
          sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, scale));
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
      for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const q::BlockQ8K*>(act + r * act_row_bytes) + b;
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

// ---- read-only super-block types against q8_K ----
//
// Each type's Sums::sums<NA> unpacks a super-block once for NA activation rows and leaves per row int32 lanes
// whose total is S (and for q2_K, N, the min term); the float part is q6_K's (q4_K's with a min), so a row's
// result depends on its own blocks only.

// Int16 lane pairs for _mm256_shuffle_epi8 that broadcast scale 2k of a 128-bit lane of 8 int16 scales over the
// low 128-bit lane and scale 2k + 1 over the high one: the scales of groups 2k and 2k + 1 (16 values each) of
// 32 consecutive values.
REWIND_INLINE __m256i pick_scale_pair(int k) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                          _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | (4 * k))));
}

// q2_K: S = sum of sc_g * (levels . qa) over the 16 groups, N = sum of m_g * bsum_g.
struct SumsQ2K {
  using Block = q::BlockQ2K;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA],
                                 __m256i (&min_sum)[NA]) {
    const __m128i packed_scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales));
    const __m128i scales8 = _mm_and_si128(packed_scales, _mm_set1_epi8(0x0F));
    const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(packed_scales, 4), _mm_set1_epi8(0x0F));
    const __m256i mins16 = _mm256_cvtepu8_epi16(mins8);
    for (int r = 0; r < NA; ++r) {
      sum[r] = _mm256_setzero_si256();
      min_sum[r] = _mm256_madd_epi16(load256(a[r]->bsums), mins16);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i half_scales =
          _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h == 0 ? scales8 : _mm_srli_si128(scales8, 8)));
      const __m256i packed = load256(w.qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i levels = two_bit_levels(packed, k);
        const __m256i scale = _mm256_shuffle_epi8(half_scales, pick_scale_pair(k));
        for (int r = 0; r < NA; ++r) {
          const __m256i p = _mm256_maddubs_epi16(levels, load256(a[r]->qs + 128 * h + 32 * k));
          sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, scale));
        }
      }
    }
  }
};

// q3_K: levels are (q2 | hbit << 2) - 4; the -4 is taken out with the bsums: S = sum sc_g (u . qa)
// - 4 sum sc_g bsum_g, u = q2 | hbit << 2 in 0..7.
struct SumsQ3K {
  using Block = q::BlockQ3K;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    // The 16 scales as bytes (layout in blocks.h): low nibbles from bytes 0..7, high 2 bits from bytes 8..11.
    uint32_t word[3];
    std::memcpy(word, w.scales, sizeof(word));
    const uint32_t low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    const __m128i unsigned_scales = _mm_setr_epi32(
        static_cast<int>((word[0] & low4) | ((word[2] & low2) << 4)),
        static_cast<int>((word[1] & low4) | (((word[2] >> 2) & low2) << 4)),
        static_cast<int>(((word[0] >> 4) & low4) | (((word[2] >> 4) & low2) << 4)),
        static_cast<int>(((word[1] >> 4) & low4) | (((word[2] >> 6) & low2) << 4)));
    const __m128i scales8 = _mm_sub_epi8(unsigned_scales, _mm_set1_epi8(32));
    const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
    for (int r = 0; r < NA; ++r) {
      sum[r] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                _mm256_slli_epi32(_mm256_madd_epi16(load256(a[r]->bsums), scales16), 2));
    }
    const __m256i hmask = load256(w.hmask);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i half_scales =
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? scales8 : _mm_srli_si128(scales8, 8)));
      const __m256i packed = load256(w.qs + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // bit 4h + k of hmask[l] is the high bit of value 128h + 32k + l
        const __m256i high = _mm256_slli_epi16(
            _mm256_and_si256(_mm256_srli_epi16(hmask, 4 * h + k), _mm256_set1_epi8(1)), 2);
        const __m256i levels = _mm256_or_si256(two_bit_levels(packed, k), high);
        const __m256i scale = _mm256_shuffle_epi8(half_scales, pick_scale_pair(k));
        for (int r = 0; r < NA; ++r) {
          const __m256i p = _mm256_maddubs_epi16(levels, load256(a[r]->qs + 128 * h + 32 * k));
          sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, scale));
        }
      }
    }
  }
};

// iq4_xs: S = sum over sub-blocks j of (ls_j - 32) * (levels . qa); levels are signed, so their sign moves onto
// the activations as in the symmetric blocks of 32. Sub-blocks go in pairs: the 32 bytes of qs for sub-blocks
// 2c and 2c + 1 hold, in their low nibbles, values 0..15 of each, in their high nibbles values 16..31; a
// cross-lane permute of the two looked-up vectors puts each sub-block's 32 values in order in one vector.
struct SumsIQ4XS {
  using Block = q::BlockIQ4XS;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q::kIq4NlLevels)));
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    uint32_t scales_low;
    std::memcpy(&scales_low, w.scales_l, sizeof(scales_low));
    const uint32_t scales_high = w.scales_h;
    auto scale_of = [&](int j) REWIND_INLINE_LAMBDA {
      const int scale = static_cast<int>(((scales_low >> (4 * j)) & 15) | (((scales_high >> (2 * j)) & 3) << 4)) - 32;
      return _mm256_set1_epi16(static_cast<short>(scale));
    };
    for (int r = 0; r < NA; ++r) sum[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = load256(w.qs + 32 * c);
      const __m256i lows = _mm256_shuffle_epi8(table, _mm256_and_si256(packed, low_nibble));
      const __m256i highs = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble));
      const __m256i levels[2] = {_mm256_permute2x128_si256(lows, highs, 0x20),
                                 _mm256_permute2x128_si256(lows, highs, 0x31)};
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {
        const __m256i scale16 = scale_of(2 * c + s);
        const __m256i magnitudes = _mm256_sign_epi8(levels[s], levels[s]);
        for (int r = 0; r < NA; ++r) {
          const __m256i act = _mm256_sign_epi8(load256(a[r]->qs + 64 * c + 32 * s), levels[s]);
          sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, act), scale16));
        }
      }
    }
  }
};

// The ternary types: S = sum t . qa - sum qa (t in 0..2 stored, t - 1 meant), the second from the bsums. The
// maddubs pairs (at most 2 * 2 * 127 for tq1_0, 2 * 3 * 127 for tq2_0) add up in int16 over a few vectors
// before one madd.
template <int NA>
REWIND_INLINE void start_with_minus_sum(const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
  for (int r = 0; r < NA; ++r) {
    sum[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(load256(a[r]->bsums), _mm256_set1_epi16(1)));
  }
}

struct SumsTQ2_0 {
  using Block = q::BlockTQ2_0;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    start_with_minus_sum(a, sum);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i packed = load256(w.qs + 32 * h);
      __m256i pairs[NA];
      for (int r = 0; r < NA; ++r) pairs[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i levels = two_bit_levels(packed, k);
        for (int r = 0; r < NA; ++r) {
          pairs[r] = _mm256_add_epi16(pairs[r], _mm256_maddubs_epi16(levels, load256(a[r]->qs + 128 * h + 32 * k)));
        }
      }
      for (int r = 0; r < NA; ++r) sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(pairs[r], _mm256_set1_epi16(1)));
    }
  }
};

// tq1_0: eight vectors of 32 digits, vector i against qa[32i ..] (tq1_0_digits).
struct SumsTQ1_0 {
  using Block = q::BlockTQ1_0;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    start_with_minus_sum(a, sum);
    __m256i pairs[NA];
    for (int r = 0; r < NA; ++r) pairs[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i digits = tq1_0_digits(w.qs, w.qh, i);
      for (int r = 0; r < NA; ++r) {
        pairs[r] = _mm256_add_epi16(pairs[r], _mm256_maddubs_epi16(digits, load256(a[r]->qs + 32 * i)));
      }
    }
    for (int r = 0; r < NA; ++r) sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(pairs[r], _mm256_set1_epi16(1)));
  }
};

// ---- i-quants: 32 values at a time from 4 (iq2, iq1) or 8 (iq3) codebook entries ----
//
// The decoders (vec_dot_avx2.h) give each sub-block's grid magnitudes as unsigned bytes (at most 62) and its
// signs, so the signs move onto the activations (sign_epi8) and maddubs multiplies; the odd scales 2 ls + 1
// multiply the int16 pairs in the madd. The power of two the scales stand for (kSumScale) is applied to
// float(S), exactly.
template <typename Decoder>
struct SumsGrid {
  using Block = typename Decoder::Block;
  static constexpr float kSumScale = Decoder::kSumScale;
  template <int NA>
  static REWIND_INLINE void sums(const Block& w, const q::BlockQ8K* const (&a)[NA], __m256i (&sum)[NA]) {
    for (int r = 0; r < NA; ++r) sum[r] = _mm256_setzero_si256();
    const typename Decoder::Prepared prepared = Decoder::prepare(w);
    for (int j = 0; j < 8; ++j) {
      const IqSubBlock sub_block = Decoder::sub_block(w, prepared, j);
      for (int r = 0; r < NA; ++r) {
        const __m256i act = _mm256_sign_epi8(load256(a[r]->qs + 32 * j), sub_block.signs);
        const __m256i pairs = _mm256_maddubs_epi16(sub_block.magnitudes, act);
        sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(pairs, sub_block.scale16));
      }
    }
  }
};

template <typename Block>
REWIND_INLINE float block_scale(const Block& w) {
  return half_to_float(w.d);
}
REWIND_INLINE float block_scale(const q::BlockIQ1M& w) { return half_to_float(iq1_m_half_d(w)); }

template <typename Sums>
constexpr float sum_scale() {
  if constexpr (requires { Sums::kSumScale; }) {
    return Sums::kSumScale;
  } else {
    return 1.0f;
  }
}

// acc = fma(float(S) k, f(d_w) * d_a, acc) per super-block (q6_K's float part; k = Sums::kSumScale, 1 by default).
template <typename Sums>
struct DotKSymmetric {
  using Block = typename Sums::Block;
  static constexpr int kMaxRows = kMaxKRows;

  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    __m128 acc[NA];
    for (int r = 0; r < NA; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const q::BlockQ8K* a[NA];
      for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const q::BlockQ8K*>(act + r * act_row_bytes) + b;
      __m256i sum[NA];
      Sums::template sums<NA>(w[b], a, sum);
      for (int r = 0; r < NA; ++r) {
        __m128 total = _mm_cvtepi32_ps(hsum_i32(sum[r]));
        if constexpr (sum_scale<Sums>() != 1.0f) total = _mm_mul_ss(total, _mm_set_ss(sum_scale<Sums>()));
        acc[r] = _mm_fmadd_ss(total, _mm_set_ss(block_scale(w[b]) * a[r]->d), acc[r]);
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

// acc = fma(float(S), f(d_w) * d_a, acc), then acc = fnma(float(N), f(dmin_w) * d_a, acc) (q4_K's float part).
template <typename Sums>
struct DotKWithMins {
  using Block = typename Sums::Block;
  static constexpr int kMaxRows = kMaxKRows;

  template <int NA>
  static void rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    const __m256i zero = _mm256_setzero_si256();
    __m128 acc[NA];
    for (int r = 0; r < NA; ++r) acc[r] = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const q::BlockQ8K* a[NA];
      for (int r = 0; r < NA; ++r) a[r] = reinterpret_cast<const q::BlockQ8K*>(act + r * act_row_bytes) + b;
      __m256i sum[NA], min_sum[NA];
      Sums::template sums<NA>(w[b], a, sum, min_sum);
      for (int r = 0; r < NA; ++r) {
        const __m128 totals = _mm_cvtepi32_ps(sum4(sum[r], min_sum[r], zero, zero));  // lane 0 = S, lane 1 = N
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

// ---- float weights against f32 activations ----
//
// Four accumulators per output take 8 values each of every 32; leftover groups of 8 go to the first, the last
// n % 8 products to a scalar sum. Result: hsum((acc0 + acc1) + (acc2 + acc3)) + tail. One output alone keeps
// its four accumulators in one pass (decode: memory-bound). A tile of NW weight rows by NA activation rows
// runs the four accumulators as four passes instead, so that the NW * NA accumulators of a pass fit the
// registers and every weight vector loaded and converted feeds NA FMAs, every activation vector NW. (All four
// accumulators at once leave room for 1 x 2 outputs only: three loads per two FMAs, bound by the load ports.)

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
  using Elem = typename Load::Elem;

  static REWIND_INLINE float tail(int64_t n, const Elem* w, const float* x) {
    float sum = 0.0f;
    for (int64_t i = n & ~int64_t{7}; i < n; ++i) sum += Load::load1(w + i) * x[i];
    return sum;
  }

  static float one(int64_t n, const void* weight, const void* activation) {
    const auto* w = static_cast<const Elem*>(weight);
    const auto* x = static_cast<const float*>(activation);
    __m256 acc[4];
    for (__m256& a : acc) a = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int k = 0; k < 4; ++k) {
        acc[k] = _mm256_fmadd_ps(Load::load8(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
      }
    }
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load::load8(w + i), _mm256_loadu_ps(x + i), acc[0]);
    return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail(n, w, x);
  }

  template <int NW, int NA>
  static REWIND_INLINE void zero(__m256 (&acc)[NW][NA]) {
    for (int q = 0; q < NW; ++q) {
      for (int a = 0; a < NA; ++a) acc[q][a] = _mm256_setzero_ps();
    }
  }

  // acc[q][a] += w[q][i..i+7] * x[a][i..i+7] for i = begin, begin + stride, ... below end; each step also asks
  // for the line at `ahead` and moves it on by ahead_step bytes (see kPrefetchBlocks).
  template <int NW, int NA>
  static REWIND_INLINE void accumulate(int64_t begin, int64_t end, int64_t stride, const Elem* const (&w)[NW],
                                       const float* const (&x)[NA], __m256 (&acc)[NW][NA], const char*& ahead,
                                       size_t ahead_step) {
    for (int64_t i = begin; i < end; i += stride) {
      _mm_prefetch(ahead, _MM_HINT_T1);
      ahead += ahead_step;
      __m256 wv[NW];
      for (int q = 0; q < NW; ++q) wv[q] = Load::load8(w[q] + i);
      for (int a = 0; a < NA; ++a) {
        __m256 xv = _mm256_loadu_ps(x[a] + i);
        if constexpr (NW > 1) keep_in_register(xv);
        for (int q = 0; q < NW; ++q) acc[q][a] = _mm256_fmadd_ps(wv[q], xv, acc[q][a]);
      }
    }
  }

  // out[a * out_stride + q] = one(w[q], x[a]) for NW weight rows and NA activation rows, pass k computing
  // every output's accumulator k.
  template <int NW, int NA>
  static void block(int64_t n, const Elem* const (&w)[NW], const uint8_t* act, size_t act_row_bytes, float* out,
                    int64_t out_stride, const char*& ahead, size_t ahead_step) {
    const float* x[NA];
    for (int a = 0; a < NA; ++a) x[a] = reinterpret_cast<const float*>(act + static_cast<size_t>(a) * act_row_bytes);
    const int64_t n32 = n & ~int64_t{31}, n8 = n & ~int64_t{7};
    __m256 acc01[NW][NA], acc2[NW][NA], acc[NW][NA];
    zero(acc01);
    accumulate(0, n32, 32, w, x, acc01, ahead, ahead_step);
    accumulate(n32, n8, 8, w, x, acc01, ahead, ahead_step);  // acc0's leftover groups of 8
    zero(acc);
    accumulate(8, n32, 32, w, x, acc, ahead, ahead_step);
    for (int q = 0; q < NW; ++q) {
      for (int a = 0; a < NA; ++a) acc01[q][a] = _mm256_add_ps(acc01[q][a], acc[q][a]);
    }
    zero(acc2);
    accumulate(16, n32, 32, w, x, acc2, ahead, ahead_step);
    zero(acc);
    accumulate(24, n32, 32, w, x, acc, ahead, ahead_step);
    for (int q = 0; q < NW; ++q) {
      for (int a = 0; a < NA; ++a) {
        const __m256 total = _mm256_add_ps(acc01[q][a], _mm256_add_ps(acc2[q][a], acc[q][a]));
        out[a * out_stride + q] = hsum(total) + tail(n, w[q], x[a]);
      }
    }
  }

  // Up to kMaxBlockRows activation rows share a block: NW * NA accumulators stay within 12 for NW = 2, enough to
  // keep both FMA pipes busy through the FMA latency while NW weight vectors and an activation vector still fit
  // the 16 registers.
  static constexpr int kMaxBlockRows = 6;

  // A block of 2 <= n_block <= kMaxBlockRows activation rows.
  template <int NW>
  static void block_of(int64_t n_block, int64_t n, const Elem* const (&w)[NW], const uint8_t* act,
                       size_t act_row_bytes, float* out, int64_t out_stride, const char*& ahead,
                       size_t ahead_step) {
    switch (n_block) {
      case 2: block<NW, 2>(n, w, act, act_row_bytes, out, out_stride, ahead, ahead_step); break;
      case 3: block<NW, 3>(n, w, act, act_row_bytes, out, out_stride, ahead, ahead_step); break;
      case 4: block<NW, 4>(n, w, act, act_row_bytes, out, out_stride, ahead, ahead_step); break;
      case 5: block<NW, 5>(n, w, act, act_row_bytes, out, out_stride, ahead, ahead_step); break;
      default: block<NW, kMaxBlockRows>(n, w, act, act_row_bytes, out, out_stride, ahead, ahead_step); break;
    }
  }

  // Pass 0 of a weight block's first activation block needs every line of its weight rows at once, and the
  // other passes none: left to the hardware prefetchers, memory idles most of the time while pass 0 waits on it.
  // So every step of every pass also asks for a line of the weight block kPrefetchBlocks on, moving on evenly
  // so that the requests of one weight block's steps cover it, a stream of about the rate memory can serve (a
  // faster one, in bursts, stalls on the full miss queue). Into L2: a prefetch into L1 holds one of its few
  // miss buffers and slows the loads down.
  static constexpr int64_t kPrefetchBlocks = 2;

  // Every weight row against n_act_rows >= 2 activation rows: NW weight rows at a time (fewer for the last
  // ones) against all activation rows in blocks of equal size, so that each weight block is read from memory
  // once and its lines are in L1 for every activation block. (Activation blocks outside would leave memory
  // idle while the second and later ones reread the weights from L2.)
  template <int NW>
  static void weight_blocks(int64_t n, const uint8_t* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                            const uint8_t* act, size_t act_row_bytes, int64_t n_act_rows, float* out,
                            int64_t out_stride) {
    // Every block gets 2 rows or more (n_act_rows >= 2).
    const int64_t n_act_blocks = (n_act_rows + kMaxBlockRows - 1) / kMaxBlockRows;
    // A weight block's bytes over its steps: 4 passes of n / 32 steps per activation block.
    const size_t ahead_step = NW * 32 * sizeof(Elem) / static_cast<size_t>(4 * n_act_blocks);
    int64_t i = 0;
    for (; i + NW <= n_weight_rows; i += NW) {
      const Elem* w[NW];
      for (int q = 0; q < NW; ++q) {
        w[q] = reinterpret_cast<const Elem*>(weights + static_cast<size_t>(i + q) * weight_row_bytes);
      }
      const int64_t ahead_row = std::min(i + kPrefetchBlocks * NW, n_weight_rows - NW);
      const char* ahead = reinterpret_cast<const char*>(weights + static_cast<size_t>(ahead_row) * weight_row_bytes);
      for (int64_t b = 0, r = 0; b < n_act_blocks; ++b) {
        const int64_t n_block = (n_act_rows - r) / (n_act_blocks - b);  // the larger blocks last
        block_of<NW>(n_block, n, w, act + static_cast<size_t>(r) * act_row_bytes, act_row_bytes,
                     out + r * out_stride + i, out_stride, ahead, ahead_step);
        r += n_block;
      }
    }
    if constexpr (NW > 1) {
      if (i < n_weight_rows) {
        weight_blocks<NW - 1>(n, weights + static_cast<size_t>(i) * weight_row_bytes, weight_row_bytes,
                              n_weight_rows - i, act, act_row_bytes, n_act_rows, out + i, out_stride);
      }
    }
  }

  static void tile(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                   const void* activations, size_t act_row_bytes, int64_t n_act_rows, float* out,
                   int64_t out_stride) {
    const auto* w = static_cast<const uint8_t*>(weights);
    const auto* act = static_cast<const uint8_t*>(activations);
    // Weight rows per block: 8 to 12 accumulators for a single activation block.
    switch (n_act_rows) {
      case 1:
        for (int64_t i = 0; i < n_weight_rows; ++i) out[i] = one(n, w + static_cast<size_t>(i) * weight_row_bytes, act);
        break;
      case 2: weight_blocks<4>(n, w, weight_row_bytes, n_weight_rows, act, act_row_bytes, 2, out, out_stride); break;
      case 3: weight_blocks<3>(n, w, weight_row_bytes, n_weight_rows, act, act_row_bytes, 3, out, out_stride); break;
      default:
        weight_blocks<2>(n, w, weight_row_bytes, n_weight_rows, act, act_row_bytes, n_act_rows, out, out_stride);
        break;
    }
  }
};

// ---- wrappers ----

template <typename Kernel>
VecDotKernel make_quant_kernel(DType weight_type) {
  return {Kernel::one, tiles::tile_by_row_groups<Kernel>, panel_kernel(weight_type), narrow_panel_kernel(weight_type)};
}

template <typename Kernel>
VecDotKernel make_float_kernel() {
  return {Kernel::one, Kernel::tile, {}, {}};
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
    case DType::f32: return make_float_kernel<DotFloat<LoadF32>>();
    case DType::f16: return make_float_kernel<DotFloat<LoadF16>>();
    case DType::bf16: return make_float_kernel<DotFloat<LoadBf16>>();
    case DType::q4_0: return make_quant_kernel<DotBlock32<UnpackQ4_0>>(weight_type);
    case DType::q4_1: return make_quant_kernel<DotBlock32<UnpackQ4_1>>(weight_type);
    case DType::q5_0: return make_quant_kernel<DotBlock32<UnpackQ5_0>>(weight_type);
    case DType::q5_1: return make_quant_kernel<DotBlock32<UnpackQ5_1>>(weight_type);
    case DType::q8_0: return make_quant_kernel<DotBlock32<UnpackQ8_0>>(weight_type);
    case DType::q4_k: return make_quant_kernel<DotKAffine<false, q::BlockQ4K>>(weight_type);
    case DType::q5_k: return make_quant_kernel<DotKAffine<true, q::BlockQ5K>>(weight_type);
    case DType::q6_k: return make_quant_kernel<DotQ6K>(weight_type);
    case DType::q2_k: return make_quant_kernel<DotKWithMins<SumsQ2K>>(weight_type);
    case DType::q3_k: return make_quant_kernel<DotKSymmetric<SumsQ3K>>(weight_type);
    case DType::iq4_nl: return make_quant_kernel<DotBlock32<UnpackIQ4NL>>(weight_type);
    case DType::iq4_xs: return make_quant_kernel<DotKSymmetric<SumsIQ4XS>>(weight_type);
    case DType::tq1_0: return make_quant_kernel<DotKSymmetric<SumsTQ1_0>>(weight_type);
    case DType::tq2_0: return make_quant_kernel<DotKSymmetric<SumsTQ2_0>>(weight_type);
    case DType::mxfp4: return make_quant_kernel<DotBlock32<UnpackMXFP4>>(weight_type);
    case DType::iq2_xxs: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ2XXS>>>(weight_type);
    case DType::iq2_xs: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ2XS>>>(weight_type);
    case DType::iq2_s: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ2S>>>(weight_type);
    case DType::iq3_xxs: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ3XXS>>>(weight_type);
    case DType::iq3_s: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ3S>>>(weight_type);
    case DType::iq1_s: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ1S>>>(weight_type);
    case DType::iq1_m: return make_quant_kernel<DotKSymmetric<SumsGrid<DecodeIQ1M>>>(weight_type);
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
