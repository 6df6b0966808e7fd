// The VNNI kernel table (vec_dot_vnni_impl.h) with the EVEX vpdpbusd / vpdpwssd of AVX-512 VNNI on 256-bit
// registers, and 512-bit panels of the k-quants for verify batches and prefill. This file alone is compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni (on top of the AVX2 flags); dispatch.cpp calls it only after
// checking the CPU for all four.
// GCC 12's 512-bit intrinsics pass an _mm512_undefined_* value as the unused merge source, which its own
// -Wuninitialized then reports at every call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu::vnni {
namespace {

inline __attribute__((always_inline)) __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}
inline __attribute__((always_inline)) __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  return _mm256_dpwssd_epi32(acc, a, b);
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

#include "kernels/cpu/vec_dot_vnni_impl.h"

namespace rwd::kernels::cpu::vnni {
namespace {

// ---- 512-bit panels of the k-quants: verify batches of 3 to 8 rows, and prefill ----
//
// The 256-bit panel spends one vpshufd and one vpdpbusd per 4 values of a weight row and row half, plus a vpmulld
// and add per run of 32. Here one zmm holds two runs of 32 (a run pair), so each instruction does twice the
// work: lane (128-bit lane 2j + v, element r) of a dot is row 4h + r's sum over half v of run 2c + j, for each
// quad h of rows (one quad in the narrow panel of up to 4 rows, two in the full one), the quads sharing the
// weights' unpacking and shuffles. The rows' sums of 16-value groups sit in the same lanes for the mins
// (q4_K / q5_K) and the -32 offset (q6_K). Only the int32 sums are formed differently; the float steps per
// super-block are the 256-bit panel's, so every output is bit-identical to the AVX2 table's.

constexpr int kQuadRows = 4;

template <int kQuads>
struct alignas(64) PanelQ8KWide {
  int8_t qs[4][4][kQuads][2][2][kQuadRows][4];  // [run pair c][chunk m][quad h][run 2c + j][value half v][row][byte]
  int16_t bsums[kQuads][2][4][kQuadRows][2];     // [quad][pass p][128-bit lane k][row][t]: group 8p + 2k + t
  float d[kQuads * kQuadRows];
};
static_assert(sizeof(PanelQ8KWide<1>) == 1216 && sizeof(PanelQ8KWide<2>) == 2368);

REWIND_INLINE __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Rows past n_rows stay zero.
template <int kQuads>
void pack_q8_k_wide(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8KWide<kQuads>*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8KWide<kQuads>, q::kBlockK>(n));
  for (int64_t row = 0; row < n_rows; ++row) {
    const auto* a = row_at<q::BlockQ8K>(rows, row_bytes, row);
    const int64_t h = row / kQuadRows, r = row % kQuadRows;
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      for (int c = 0; c < 4; ++c) {
        for (int m = 0; m < 4; ++m) {
          for (int j = 0; j < 2; ++j) {
            for (int v = 0; v < 2; ++v) {
              std::memcpy(out[b].qs[c][m][h][j][v][r], a[b].qs + 32 * (2 * c + j) + 16 * v + 4 * m, 4);
            }
          }
        }
      }
      for (int p = 0; p < 2; ++p) {
        for (int k = 0; k < 4; ++k) {
          for (int t = 0; t < 2; ++t) out[b].bsums[h][p][k][r][t] = a[b].bsums[8 * p + 2 * k + t];
        }
      }
      out[b].d[row] = a[b].d;
    }
  }
}

// The dots of a run pair's 64 unsigned values (run 2c + j in the 256-bit half j, in order) with each quad.
template <int kQuads>
REWIND_INLINE void dot_run_pair(__m512i values, const int8_t (&qs)[4][kQuads][2][2][kQuadRows][4],
                                __m512i (&dots)[kQuads]) {
  const __m512i chunks[4] = {_mm512_shuffle_epi32(values, _MM_PERM_AAAA), _mm512_shuffle_epi32(values, _MM_PERM_BBBB),
                             _mm512_shuffle_epi32(values, _MM_PERM_CCCC), _mm512_shuffle_epi32(values, _MM_PERM_DDDD)};
  for (int h = 0; h < kQuads; ++h) dots[h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunks[0], load512(qs[0][h]));
#pragma GCC unroll 3
  for (int m = 1; m < 4; ++m) {
    for (int h = 0; h < kQuads; ++h) dots[h] = _mm512_dpbusd_epi32(dots[h], chunks[m], load512(qs[m][h]));
  }
}

// Element (4k + e) = 4i + k: for each 128-bit lane k, element 4i + k of a vector broadcast across the lane.
REWIND_INLINE __m512i lane_index(int i) {
  return _mm512_add_epi32(_mm512_set1_epi32(4 * i), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

// Lane 4h + r = row 4h + r's total over the four 128-bit lanes of quads[h] (lanes past the quads zero).
template <int kQuads>
REWIND_INLINE __m256i fold_rows(const __m512i (&quads)[kQuads]) {
  __m128i totals[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
  for (int h = 0; h < kQuads; ++h) {
    const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(quads[h]), _mm512_extracti64x4_epi64(quads[h], 1));
    totals[h] = _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  }
  return _mm256_set_m128i(totals[1], totals[0]);
}

// The -min (q4_K / q5_K) or offset (q6_K) term: per quad, sum over groups of pair_scales' element for the group
// pair times the rows' bsums.
template <int kQuads>
REWIND_INLINE __m256i bsum_dots(const int16_t (&bsums)[kQuads][2][4][kQuadRows][2], __m512i pair_scales) {
  const __m512i first = _mm512_permutexvar_epi32(lane_index(0), pair_scales);
  const __m512i second = _mm512_permutexvar_epi32(lane_index(1), pair_scales);
  __m512i sums[kQuads];
  for (int h = 0; h < kQuads; ++h) {
    sums[h] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), load512(bsums[h][0]), first),
                                  load512(bsums[h][1]), second);
  }
  return fold_rows<kQuads>(sums);
}

// q4_K / q5_K: S = sum_j sc_j dot_j and N = sum_j m_j (bsum_2j + bsum_2j+1), as the 256-bit panel. A q4_K run
// pair's dot lanes are at most 4 * 4 * 15 * 127 = 30480 in magnitude, so each is an int16 pair (value, sign) and
// one vpdpwssd against (scale, 0) both scales and accumulates it; q5_K's reach 62992 and take vpmulld.
template <int kQuads, bool kFifthBit, typename Block>
void wide_panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                             const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8KWide<kQuads>*>(panel);
  const __m512i low_nibble = _mm512_set1_epi8(0x0F);
  // Low nibbles to the lower 256 bits (run 2c), high nibbles to the upper (run 2c + 1).
  const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      uint64_t scales, mins;
      unpack_k_scales(w[b].scales, scales, mins);
      // Element j = sc_j, i.e. the int16 pair (sc_j, 0); and the pair (m_j, m_j).
      const __m512i run_scales =
          _mm512_castsi256_si512(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(scales))));
      const __m128i mins8 = _mm_cvtsi64_si128(static_cast<long long>(mins));
      const __m512i min_pairs = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8)));
      __m512i high_bits = _mm512_setzero_si512();
      if constexpr (kFifthBit) high_bits = _mm512_broadcast_i64x4(load256(w[b].qh));
      __m512i sums[kQuads];
      for (__m512i& sum : sums) sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i packed = _mm512_broadcast_i64x4(load256(w[b].qs + 32 * c));
        __m512i values = _mm512_and_si512(_mm512_srlv_epi16(packed, nibble_shift), low_nibble);
        // Runs 2c and 2c + 1 in the two 256-bit halves.
        const __m512i scale = _mm512_permutexvar_epi32(
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * c)), _mm256_set1_epi32(2 * c + 1), 1),
            run_scales);
        if constexpr (kFifthBit) {
          const __m512i bit_shift =
              _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * c))),
                                 _mm256_set1_epi16(static_cast<short>(2 * c + 1)), 1);
          const __m512i fifth = _mm512_and_si512(_mm512_srlv_epi16(high_bits, bit_shift), _mm512_set1_epi8(1));
          values = _mm512_or_si512(values, _mm512_slli_epi16(fifth, 4));
        }
        __m512i dots[kQuads];
        dot_run_pair<kQuads>(values, a[b].qs[c], dots);
        for (int h = 0; h < kQuads; ++h) {
          if constexpr (kFifthBit) {
            sums[h] = _mm512_add_epi32(sums[h], _mm512_mullo_epi32(dots[h], scale));
          } else {
            sums[h] = _mm512_dpwssd_epi32(sums[h], dots[h], scale);
          }
        }
      }
      const __m256 act_scales = _mm256_loadu_ps(a[b].d);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(fold_rows<kQuads>(sums)),
                            _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[b].d)), act_scales), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(bsum_dots<kQuads>(a[b].bsums, min_pairs)),
                             _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[b].dmin)), act_scales), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// q6_K: values 0..63 (the -32 taken out with the bsums, as the 256-bit panel); run pair c is runs 2c, 2c + 1
// (half c / 2 of the super-block, k = 2 (c % 2) + j), and lane 2j + v of it is group 4c + 2j + v, scaled by
// vpmulld.
template <int kQuads>
void wide_panel_dot_q6_k(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                         const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8KWide<kQuads>*>(panel);
  const __m512i low_nibble = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  // qh's bits 0-1 (k = 0) and 2-3 (k = 1) to bits 4-5; then 4-5 (k = 2) and 6-7 (k = 3).
  const __m512i first_shift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(4)), _mm256_set1_epi16(2), 1);
  const __m512i second_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<q::BlockQ6K>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
      const __m512i group_scales = _mm512_cvtepi8_epi32(scales8);                        // element g = sc_g
      const __m512i scale_pairs = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(scales8));  // element e = (sc_2e, sc_2e+1)
      __m512i sums[kQuads];
      for (__m512i& sum : sums) sum = _mm512_setzero_si512();
      auto add_run_pair = [&](__m512i values, int c) REWIND_INLINE_LAMBDA {
        __m512i dots[kQuads];
        dot_run_pair<kQuads>(values, a[b].qs[c], dots);
        const __m512i scale = _mm512_permutexvar_epi32(lane_index(c), group_scales);
        for (int h = 0; h < kQuads; ++h) sums[h] = _mm512_add_epi32(sums[h], _mm512_mullo_epi32(dots[h], scale));
      };
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = load512(w[b].ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(load256(w[b].qh + 32 * h));
        add_run_pair(_mm512_or_si512(_mm512_and_si512(ql, low_nibble),
                                     _mm512_and_si512(_mm512_sllv_epi16(qh, first_shift), bits45)),
                     2 * h);
        add_run_pair(_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low_nibble),
                                     _mm512_and_si512(_mm512_srlv_epi16(qh, second_shift), bits45)),
                     2 * h + 1);
      }
      const __m256i total =
          _mm256_sub_epi32(fold_rows<kQuads>(sums), _mm256_slli_epi32(bsum_dots<kQuads>(a[b].bsums, scale_pairs), 5));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), row_scales(w[b].d, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// The narrow panel from 3 rows: 2 rows go through the tiles, whose cost grows with the rows (Qwen2.5-Coder-1.5B,
// q4_K / q6_K, 2 threads: a 2-token verify round cost 1.35 plain steps through the tiles, 1.6 through this
// panel; 4 tokens 2.1 through the 256-bit panel, 1.6 through this one).
constexpr int64_t kNarrowMinRows = 3;

template <int kQuads>
PanelKernel wide_panel_kernel(DType weight_type) {
  constexpr int64_t kPanelRowsOf = kQuads * kQuadRows;
  constexpr int64_t kMinRows = kQuads == 1 ? kNarrowMinRows : kNarrowPanelRows + 1;
  const PanelBytesFn bytes = panel_bytes<PanelQ8KWide<kQuads>, q::kBlockK>;
  const PanelPackFn pack = pack_q8_k_wide<kQuads>;
  switch (weight_type) {
    case DType::q4_k: return {pack, wide_panel_dot_k_affine<kQuads, false, q::BlockQ4K>, bytes, kMinRows, kPanelRowsOf};
    case DType::q5_k: return {pack, wide_panel_dot_k_affine<kQuads, true, q::BlockQ5K>, bytes, kMinRows, kPanelRowsOf};
    case DType::q6_k: return {pack, wide_panel_dot_q6_k<kQuads>, bytes, kMinRows, kPanelRowsOf};
    default: return {};
  }
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

namespace rwd::kernels::cpu::avx512vnni {

// The shared VNNI table, with this flavour's 512-bit panels for the k-quants: narrow for 3 to 4 rows, full
// from 5.
VecDotKernel vec_dot_kernel(tensor::DType weight_type) {
  VecDotKernel kernel = vnni::kernel_table(weight_type);
  if (const PanelKernel narrow = vnni::wide_panel_kernel<1>(weight_type); narrow.dot != nullptr) {
    kernel.narrow_panel = narrow;
    kernel.panel = vnni::wide_panel_kernel<2>(weight_type);
  }
  return kernel;
}

}  // namespace rwd::kernels::cpu::avx512vnni
