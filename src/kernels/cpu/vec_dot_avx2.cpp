// AVX2/FMA/F16C dot-product kernels and activation quantizers (this file alone is compiled with those
// instructions; dispatch.cpp calls it only after checking the CPU). Quantized blocks are unpacked to int8 in
// registers and multiplied with maddubs/madd; each kernel is a template over the number of activation rows
// (up to 4, 2 for float weights) sharing one unpacking of the weight, with per-row arithmetic identical to the
// one-row case. Nothing here calls inline functions shared with plain-x86 files, so no AVX2 copy of them can
// leak out.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::avx2 {
namespace {

using tensor::DType;
namespace q = tensor::quant;

// ---- helpers ----

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Lane j = value j of a 32-value block: byte i of qs holds value i (low nibble) and value i + 16 (high).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Lane j = 0xFF where bit j of bits is set, else 0.
inline __m256i spread_bits(const uint8_t* qh) {
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
inline __m256i dot_u8_i8(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
}

// The same for signed w: maddubs wants an unsigned left side, so move w's sign onto a. w_abs = |w|.
inline __m256i dot_i8_i8(__m256i w_abs, __m256i w, __m256i a) { return dot_u8_i8(w_abs, _mm256_sign_epi8(a, w)); }

template <typename Block>
inline const Block& act_block(const uint8_t* activations, size_t row_bytes, int r, int64_t b) {
  return reinterpret_cast<const Block*>(activations + static_cast<size_t>(r) * row_bytes)[b];
}

// ---- blocks of 32 against q8_0 / q8_1 ----
//
// Every block adds cvt(int32 x8) * (d_w d_a) into one of two accumulators per row, even blocks into the first,
// odd into the second (two chains hide the FMA latency); q4_1 / q5_1 add m_w s_a on the side (see run()).

// Weight unpackers: return the 32 values of block b as int8 lanes and say whether they are signed.
struct UnpackQ4_0 {
  using Block = q::BlockQ4_0;
  static constexpr bool kSigned = true;
  static __m256i values(const Block& w) { return _mm256_sub_epi8(unpack_nibbles(w.qs), _mm256_set1_epi8(8)); }
};
struct UnpackQ5_0 {
  using Block = q::BlockQ5_0;
  static constexpr bool kSigned = true;
  // (nibble | bit << 4) - 16 is the nibble with 0xF0 set where the fifth bit is clear.
  static __m256i values(const Block& w) {
    const __m256i high = _mm256_andnot_si256(spread_bits(w.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
    return _mm256_or_si256(unpack_nibbles(w.qs), high);
  }
};
struct UnpackQ8_0 {
  using Block = q::BlockQ8_0;
  static constexpr bool kSigned = true;
  static __m256i values(const Block& w) { return load256(w.qs); }
};
struct UnpackQ4_1 {
  using Block = q::BlockQ4_1;
  static constexpr bool kSigned = false;
  static __m256i values(const Block& w) { return unpack_nibbles(w.qs); }
};
struct UnpackQ5_1 {
  using Block = q::BlockQ5_1;
  static constexpr bool kSigned = false;
  static __m256i values(const Block& w) {
    const __m256i high = _mm256_and_si256(spread_bits(w.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(w.qs), high);
  }
};

// The fp16 field at `first` and at the same offset of the next 7 blocks (stride bytes apart), as 8 floats.
inline __m256 gather_halves(const void* first, size_t stride) {
  const auto* p = static_cast<const uint8_t*>(first);
  auto half_at = [p, stride](size_t i) {
    uint16_t h;
    std::memcpy(&h, p + i * stride, sizeof(h));
    return static_cast<int>(h);
  };
  __m128i v = _mm_cvtsi32_si128(half_at(0));
  v = _mm_insert_epi16(v, half_at(1), 1);
  v = _mm_insert_epi16(v, half_at(2), 2);
  v = _mm_insert_epi16(v, half_at(3), 3);
  v = _mm_insert_epi16(v, half_at(4), 4);
  v = _mm_insert_epi16(v, half_at(5), 5);
  v = _mm_insert_epi16(v, half_at(6), 6);
  v = _mm_insert_epi16(v, half_at(7), 7);
  return _mm256_cvtph_ps(v);
}

template <typename Unpack>
struct DotBlock32 {
  static constexpr int kMaxRows = 4;
  static constexpr bool kAffine = !Unpack::kSigned;  // q4_1 / q5_1 carry a min and pair with q8_1
  using Block = typename Unpack::Block;
  using ActBlock = std::conditional_t<kAffine, q::BlockQ8_1, q::BlockQ8_0>;

  // acc[r] += cvt(w . a_r) * scale[r] for block b.
  template <int NR>
  static inline void block(const Block& w, const uint8_t* act, size_t act_row_bytes, int64_t b,
                           const __m256 (&scale)[NR], __m256 (&acc)[NR]) {
    const __m256i values = Unpack::values(w);
    if constexpr (kAffine) {
      for (int r = 0; r < NR; ++r) {
        const __m256i dot = dot_u8_i8(values, load256(act_block<ActBlock>(act, act_row_bytes, r, b).qs));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale[r], acc[r]);
      }
    } else {
      const __m256i values_abs = _mm256_sign_epi8(values, values);
      for (int r = 0; r < NR; ++r) {
        const __m256i dot = dot_i8_i8(values_abs, values, load256(act_block<ActBlock>(act, act_row_bytes, r, b).qs));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale[r], acc[r]);
      }
    }
  }

  // Blocks go in groups of 8, whose scales d_w d_a (and q4_1 / q5_1 min terms m_w s_a) are computed 8 at a
  // time; block b adds into acc_even or acc_odd by its parity, min terms of grouped blocks into lane b % 8 of
  // min_lanes, those of the n_blocks % 8 trailing blocks into min_tail. Row result:
  // hsum(acc_even + acc_odd) + (hsum(min_lanes) + min_tail).
  template <int NR>
  static void run(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                  int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    const int64_t n_blocks = n / q::kBlock32;
    __m256 acc_even[NR], acc_odd[NR], min_lanes[NR];
    float min_tail[NR];
    for (int r = 0; r < NR; ++r) {
      acc_even[r] = acc_odd[r] = min_lanes[r] = _mm256_setzero_ps();
      min_tail[r] = 0.0f;
    }
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
      const __m256 d_w = gather_halves(&w[b].d, sizeof(Block));
      __m256 scales[NR];
      for (int r = 0; r < NR; ++r) {
        const ActBlock& a = act_block<ActBlock>(act, act_row_bytes, r, b);
        scales[r] = _mm256_mul_ps(d_w, gather_halves(&a.d, sizeof(ActBlock)));
        if constexpr (kAffine) {
          const __m256 mins =
              _mm256_mul_ps(gather_halves(&w[b].m, sizeof(Block)), gather_halves(&a.s, sizeof(ActBlock)));
          min_lanes[r] = _mm256_add_ps(min_lanes[r], mins);
        }
      }
      for (int j = 0; j < 8; ++j) {
        __m256 scale[NR];
        for (int r = 0; r < NR; ++r) scale[r] = _mm256_permutevar8x32_ps(scales[r], _mm256_set1_epi32(j));
        block<NR>(w[b + j], act, act_row_bytes, b + j, scale, (j % 2 == 0) ? acc_even : acc_odd);
      }
    }
    for (; b < n_blocks; ++b) {
      const float d_w = half_to_float(w[b].d);
      __m256 scale[NR];
      for (int r = 0; r < NR; ++r) {
        const ActBlock& a = act_block<ActBlock>(act, act_row_bytes, r, b);
        scale[r] = _mm256_set1_ps(d_w * half_to_float(a.d));
        if constexpr (kAffine) min_tail[r] += half_to_float(w[b].m) * half_to_float(a.s);
      }
      block<NR>(w[b], act, act_row_bytes, b, scale, (b % 2 == 0) ? acc_even : acc_odd);
    }
    for (int r = 0; r < NR; ++r) {
      out[r * out_stride] = hsum(_mm256_add_ps(acc_even[r], acc_odd[r])) + (hsum(min_lanes[r]) + min_tail[r]);
    }
  }
};

// ---- k-quants against q8_K ----
//
// Per super-block and row, the integer sum of scale * (q . qa) is exact in int32 lanes; it is added as
// cvt(sum) * (d_w d_a) into one accumulator, and the q4_K / q5_K min term, computed from the bsums, as
// cvt(sum) * (dmin_w d_a) into a second one. The row result is hsum(acc - acc_min).

// The eight 6-bit scales and mins of a q4_K / q5_K block (layout in blocks.h), unpacked four at a time.
inline void unpack_k_scales(const uint8_t* packed, uint8_t (&scales)[8], uint8_t (&mins)[8]) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof(word));
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
  const uint32_t scale_words[2] = {word[0] & low6, (word[2] & low4) | (((word[0] >> 6) & low2) << 4)};
  const uint32_t min_words[2] = {word[1] & low6, ((word[2] >> 4) & low4) | (((word[1] >> 6) & low2) << 4)};
  std::memcpy(scales, scale_words, sizeof(scales));
  std::memcpy(mins, min_words, sizeof(mins));
}

inline __m256i load_high_bits(const q::BlockQ4K&) { return _mm256_setzero_si256(); }
inline __m256i load_high_bits(const q::BlockQ5K& w) { return load256(w.qh); }

template <bool kFifthBit, typename Block>
struct DotKAffine {
  static constexpr int kMaxRows = 4;

  template <int NR>
  static void run(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                  int64_t out_stride) {
    const auto* w = static_cast<const Block*>(weight);
    __m256 acc[NR], acc_min[NR];
    for (int r = 0; r < NR; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      uint8_t scales[8], mins[8];
      unpack_k_scales(w[b].scales, scales, mins);
      uint64_t scales_word;
      std::memcpy(&scales_word, scales, sizeof(scales_word));
      // The 8 scales as int16 in both 128-bit lanes; shuffles broadcast one of them.
      const __m256i scales16 =
          _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(scales_word))));
      __m256i sum[NR];
      for (int r = 0; r < NR; ++r) sum[r] = _mm256_setzero_si256();
      __m256i high_bits = load_high_bits(w[b]);
      for (int c = 0; c < 4; ++c) {
        const __m256i packed = load256(w[b].qs + 32 * c);
        __m256i low = _mm256_and_si256(packed, low_nibble);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
        if constexpr (kFifthBit) {
          const __m256i one = _mm256_set1_epi8(1);
          low = _mm256_or_si256(low, _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
          high = _mm256_or_si256(high, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
          high_bits = _mm256_srli_epi16(high_bits, 2);
        }
        const __m256i scale_low =
            _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<short>(((4 * c + 1) << 8) | (4 * c))));
        const __m256i scale_high =
            _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<short>(((4 * c + 3) << 8) | (4 * c + 2))));
        for (int r = 0; r < NR; ++r) {
          const q::BlockQ8K& a = act_block<q::BlockQ8K>(act, act_row_bytes, r, b);
          const __m256i p_low = _mm256_maddubs_epi16(low, load256(a.qs + 64 * c));
          const __m256i p_high = _mm256_maddubs_epi16(high, load256(a.qs + 64 * c + 32));
          sum[r] = _mm256_add_epi32(
              sum[r], _mm256_add_epi32(_mm256_madd_epi16(p_low, scale_low), _mm256_madd_epi16(p_high, scale_high)));
        }
      }
      // mins16 lane k = min of sub-block k / 2, matching bsums lane k (group of 16 values k).
      uint64_t mins_word;
      std::memcpy(&mins_word, mins, sizeof(mins_word));
      const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins_word));
      const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
      const float d_w = half_to_float(w[b].d);
      const float dmin_w = half_to_float(w[b].dmin);
      for (int r = 0; r < NR; ++r) {
        const q::BlockQ8K& a = act_block<q::BlockQ8K>(act, act_row_bytes, r, b);
        const __m256i min_sum = _mm256_madd_epi16(load256(a.bsums), mins16);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), _mm256_set1_ps(d_w * a.d), acc[r]);
        acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_sum), _mm256_set1_ps(dmin_w * a.d), acc_min[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r * out_stride] = hsum(_mm256_sub_ps(acc[r], acc_min[r]));
  }
};

// q6_K: values are (q6 - 32); the -32 is taken out with the bsums: sum sc_g (q - 32) qa = sum sc_g q qa
// - 32 sum sc_g bsum_g, all in int32, then one FMA per super-block and row.
struct DotQ6K {
  static constexpr int kMaxRows = 4;

  template <int NR>
  static void run(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                  int64_t out_stride) {
    const auto* w = static_cast<const q::BlockQ6K*>(weight);
    __m256 acc[NR];
    for (int r = 0; r < NR; ++r) acc[r] = _mm256_setzero_ps();
    const __m256i low_nibble = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const auto* sc = reinterpret_cast<const uint8_t*>(w[b].scales);
      __m256i sum[NR];
      for (int r = 0; r < NR; ++r) sum[r] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        // The 8 scales of this half as int16, in both 128-bit lanes, for pick_pair below.
        const __m256i half_scales = _mm256_broadcastsi128_si256(
            _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 8 * h))));
        const __m256i ql0 = load256(w[b].ql + 64 * h);
        const __m256i ql1 = load256(w[b].ql + 64 * h + 32);
        const __m256i qh = load256(w[b].qh + 32 * h);
        // values 32k + l of this half, k = 0..3 (layout in blocks.h), each 0..63
        const __m256i v[4] = {
            _mm256_or_si256(_mm256_and_si256(ql0, low_nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
            _mm256_or_si256(_mm256_and_si256(ql1, low_nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibble), _mm256_and_si256(qh, bits45)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibble),
                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
        };
        for (int k = 0; k < 4; ++k) {
          // Lanes 0..15 are group 8h + 2k, lanes 16..31 group 8h + 2k + 1: int16 scale 2k in the low
          // 128-bit lane, 2k + 1 in the high one.
          const __m256i pick_pair =
              _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2))),
                               _mm_set1_epi16(static_cast<short>(((4 * k + 1) << 8) | (4 * k))));
          const __m256i scale = _mm256_shuffle_epi8(half_scales, pick_pair);
          for (int r = 0; r < NR; ++r) {
            const q::BlockQ8K& a = act_block<q::BlockQ8K>(act, act_row_bytes, r, b);
            const __m256i p = _mm256_maddubs_epi16(v[k], load256(a.qs + 128 * h + 32 * k));
            sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, scale));
          }
        }
      }
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
      const float d_w = half_to_float(w[b].d);
      for (int r = 0; r < NR; ++r) {
        const q::BlockQ8K& a = act_block<q::BlockQ8K>(act, act_row_bytes, r, b);
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(a.bsums), scales16), 5);
        acc[r] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum[r], offset)), _mm256_set1_ps(d_w * a.d), acc[r]);
      }
    }
    for (int r = 0; r < NR; ++r) out[r * out_stride] = hsum(acc[r]);
  }
};

// ---- float weights against f32 activations ----
//
// Four accumulators per row take 8 values each of every 32; leftover groups of 8 go to the first, the last
// n % 8 products to a scalar sum. Row result: hsum((acc0 + acc1) + (acc2 + acc3)) + tail.

struct LoadF32 {
  using Elem = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct LoadF16 {
  using Elem = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct LoadBf16 {
  using Elem = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
};

template <typename Load>
struct DotFloat {
  static constexpr int kMaxRows = 2;  // 4 accumulators per row; more rows would spill them

  template <int NR>
  static void run(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, float* out,
                  int64_t out_stride) {
    const auto* w = static_cast<const typename Load::Elem*>(weight);
    const float* x[NR];
    __m256 acc[NR][4];
    float tail[NR];
    for (int r = 0; r < NR; ++r) {
      x[r] = reinterpret_cast<const float*>(act + static_cast<size_t>(r) * act_row_bytes);
      for (int k = 0; k < 4; ++k) acc[r][k] = _mm256_setzero_ps();
      tail[r] = 0.0f;
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int k = 0; k < 4; ++k) {
        const __m256 wv = Load::load8(w + i + 8 * k);
        for (int r = 0; r < NR; ++r) acc[r][k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[r] + i + 8 * k), acc[r][k]);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = Load::load8(w + i);
      for (int r = 0; r < NR; ++r) acc[r][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[r] + i), acc[r][0]);
    }
    for (; i < n; ++i) {
      const float wi = Load::load1(w + i);
      for (int r = 0; r < NR; ++r) tail[r] += wi * x[r][i];
    }
    for (int r = 0; r < NR; ++r) {
      const __m256 total = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3]));
      out[r * out_stride] = hsum(total) + tail[r];
    }
  }
};

// ---- wrappers ----

template <typename Kernel>
float one_row(int64_t n, const void* weight, const void* activation) {
  float out;
  Kernel::template run<1>(n, weight, static_cast<const uint8_t*>(activation), 0, &out, 1);
  return out;
}

// The last n_act_rows < kMaxRows rows, as one call of the matching width.
template <typename Kernel, int NR>
void run_remaining_rows(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, int64_t n_left,
                        float* out, int64_t out_stride) {
  if constexpr (NR >= 1) {
    if (n_left == NR) {
      Kernel::template run<NR>(n, weight, act, act_row_bytes, out, out_stride);
    } else {
      run_remaining_rows<Kernel, NR - 1>(n, weight, act, act_row_bytes, n_left, out, out_stride);
    }
  }
}

template <typename Kernel>
void many_rows(int64_t n, const void* weight, const void* activations, size_t act_row_bytes, int64_t n_act_rows,
               float* out, int64_t out_stride) {
  const auto* act = static_cast<const uint8_t*>(activations);
  int64_t r = 0;
  for (; r + Kernel::kMaxRows <= n_act_rows; r += Kernel::kMaxRows) {
    Kernel::template run<Kernel::kMaxRows>(n, weight, act + static_cast<size_t>(r) * act_row_bytes, act_row_bytes,
                                           out + r * out_stride, out_stride);
  }
  run_remaining_rows<Kernel, Kernel::kMaxRows - 1>(n, weight, act + static_cast<size_t>(r) * act_row_bytes,
                                                   act_row_bytes, n_act_rows - r, out + r * out_stride, out_stride);
}

template <typename Kernel>
constexpr VecDotKernel make_kernel() {
  return {one_row<Kernel>, many_rows<Kernel>};
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
