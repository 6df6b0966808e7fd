// The VNNI kernel table (vec_dot_vnni_impl.h) with the EVEX vpdpbusd / vpdpwssd of AVX-512 VNNI on 256-bit
// registers, and 512-bit panels of the k-quants for verify batches and prefill. This file alone is compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni (on top of the AVX2 flags); dispatch.cpp calls it only after
// checking the CPU for all four.
// GCC 12's 512-bit intrinsics pass an _mm512_undefined_* value as the unused merge source, which its own
// -Wuninitialized then reports at every call.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>

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

// ---- 512-bit panels of the k-quants: verify batches of 2 to 8 rows, and prefill ----
//
// The 256-bit panel spends one vpshufd and one vpdpbusd per 4 values of a weight row and row half, plus a vpmulld
// and add per run of 32. Here one zmm holds two runs of 32 (a run pair): run 2c + j in its 256-bit half j,
// value half v in 128-bit lane 2j + v, so each instruction does twice the work. A layout puts rows in the four
// int32 elements of each 128-bit lane: a quad of rows (one quad in the narrow panel of 3 or 4 rows, two in the
// full one, sharing the weights' unpacking and shuffles), or two rows by two chunks of 4 values, so that 2 rows
// take half the instructions of 4. The rows' sums of 16-value groups sit in lanes of the same kind for the mins
// (q4_K / q5_K) and the -32 offset (q6_K). Only the int32 sums are formed differently; the float steps per
// super-block are the 256-bit panel's, so every output is bit-identical to the AVX2 table's.

REWIND_INLINE __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Element (4k + e) = 4i + k: for each 128-bit lane k, element 4i + k of a vector broadcast across the lane.
REWIND_INLINE __m512i lane_index(int i) {
  return _mm512_add_epi32(_mm512_set1_epi32(4 * i), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

// Element e of the total over the four 128-bit lanes.
REWIND_INLINE __m128i fold_lanes(__m512i v) {
  const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

// kQuads quads of rows: element r of a lane is row 4h + r of quad h, and each of the 4 chunks of 4 values of a
// value half has a dot product of its own.
template <int kQuads>
struct QuadRows {
  static constexpr int kRows = 4 * kQuads;
  static constexpr int kDots = kQuads;  // dot vectors per run pair
  struct alignas(64) Panel {
    int8_t qs[4][4][kQuads][2][2][4][4];  // [run pair c][chunk m][quad h][run 2c + j][value half v][row][byte]
    int16_t bsums[kQuads][2][4][4][2];    // [quad][pass p][128-bit lane k][row][t]: group 8p + 2k + t
    float d[kRows];
  };

  static void pack_row(const q::BlockQ8K& a, int64_t row, Panel& out) {
    const int64_t h = row / 4, r = row % 4;
    for (int c = 0; c < 4; ++c) {
      for (int m = 0; m < 4; ++m) {
        for (int j = 0; j < 2; ++j) {
          for (int v = 0; v < 2; ++v) std::memcpy(out.qs[c][m][h][j][v][r], a.qs + 32 * (2 * c + j) + 16 * v + 4 * m, 4);
        }
      }
    }
    for (int p = 0; p < 2; ++p) {
      for (int k = 0; k < 4; ++k) {
        for (int t = 0; t < 2; ++t) out.bsums[h][p][k][r][t] = a.bsums[8 * p + 2 * k + t];
      }
    }
  }

  static REWIND_INLINE void dots(__m512i values, const Panel& a, int c, __m512i (&out)[kDots]) {
    const __m512i chunks[4] = {_mm512_shuffle_epi32(values, _MM_PERM_AAAA), _mm512_shuffle_epi32(values, _MM_PERM_BBBB),
                               _mm512_shuffle_epi32(values, _MM_PERM_CCCC), _mm512_shuffle_epi32(values, _MM_PERM_DDDD)};
    for (int h = 0; h < kQuads; ++h) {
      out[h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunks[0], load512(a.qs[c][0][h]));
    }
#pragma GCC unroll 3
    for (int m = 1; m < 4; ++m) {
      for (int h = 0; h < kQuads; ++h) out[h] = _mm512_dpbusd_epi32(out[h], chunks[m], load512(a.qs[c][m][h]));
    }
  }

  // Lane 4h + r = row 4h + r's total (lanes past the quads zero).
  static REWIND_INLINE __m256i fold(const __m512i (&sums)[kDots]) {
    __m128i totals[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int h = 0; h < kQuads; ++h) totals[h] = fold_lanes(sums[h]);
    return _mm256_set_m128i(totals[1], totals[0]);
  }

  // Per row, the sum over group pairs (2e, 2e + 1) of pair_scales' element e times the rows' two bsums.
  static REWIND_INLINE __m256i bsum_dots(const Panel& a, __m512i pair_scales) {
    const __m512i first = _mm512_permutexvar_epi32(lane_index(0), pair_scales);
    const __m512i second = _mm512_permutexvar_epi32(lane_index(1), pair_scales);
    __m512i sums[kDots];
    for (int h = 0; h < kQuads; ++h) {
      sums[h] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), load512(a.bsums[h][0]), first),
                                    load512(a.bsums[h][1]), second);
    }
    return fold(sums);
  }
};

// Two rows: element 2r + t of a lane is row r's dot over chunks t and t + 2 of the value half (a vpshufd
// broadcasts chunks 0, 1 and then 2, 3 to both rows' elements).
struct PairRows {
  static constexpr int kRows = 2;
  static constexpr int kDots = 1;
  struct alignas(64) Panel {
    int8_t qs[4][2][2][2][2][2][4];  // [run pair c][chunk pair u][run 2c + j][value half v][row][t][byte]: chunk 2u + t
    int16_t bsums[4][2][2][2];       // [128-bit lane k][row][t][pair]: groups 4k + 2t, 4k + 2t + 1
    float d[kRows];
  };

  static void pack_row(const q::BlockQ8K& a, int64_t r, Panel& out) {
    for (int c = 0; c < 4; ++c) {
      for (int u = 0; u < 2; ++u) {
        for (int j = 0; j < 2; ++j) {
          for (int v = 0; v < 2; ++v) {
            for (int t = 0; t < 2; ++t) {
              std::memcpy(out.qs[c][u][j][v][r][t], a.qs + 32 * (2 * c + j) + 16 * v + 4 * (2 * u + t), 4);
            }
          }
        }
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int t = 0; t < 2; ++t) {
        out.bsums[k][r][t][0] = a.bsums[4 * k + 2 * t];
        out.bsums[k][r][t][1] = a.bsums[4 * k + 2 * t + 1];
      }
    }
  }

  static REWIND_INLINE void dots(__m512i values, const Panel& a, int c, __m512i (&out)[kDots]) {
    out[0] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi32(values, _MM_PERM_BABA),
                                 load512(a.qs[c][0]));
    out[0] = _mm512_dpbusd_epi32(out[0], _mm512_shuffle_epi32(values, _MM_PERM_DCDC), load512(a.qs[c][1]));
  }

  // Lanes 0 and 1 = the rows' totals.
  static REWIND_INLINE __m256i fold(const __m512i (&sums)[kDots]) {
    return _mm256_zextsi128_si256(_mm_hadd_epi32(fold_lanes(sums[0]), _mm_setzero_si128()));
  }

  // Group pair (4k + 2t, 4k + 2t + 1) is pair 2k + t: element 2k + t of pair_scales for lane k, element (r, t).
  static REWIND_INLINE __m256i bsum_dots(const Panel& a, __m512i pair_scales) {
    const __m512i index = _mm512_setr_epi32(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7);
    const __m512i sums[kDots] = {
        _mm512_dpwssd_epi32(_mm512_setzero_si512(), load512(a.bsums), _mm512_permutexvar_epi32(index, pair_scales))};
    return fold(sums);
  }
};

static_assert(sizeof(QuadRows<1>::Panel) == 1216 && sizeof(QuadRows<2>::Panel) == 2368 &&
              sizeof(PairRows::Panel) == 640);

// Rows past n_rows stay zero (the float steps read all 8 lanes of d: the panels have room for them).
template <typename Layout>
void pack_q8_k_wide(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  using Panel = typename Layout::Panel;
  static_assert(offsetof(Panel, d) + 8 * sizeof(float) <= sizeof(Panel));
  auto* out = static_cast<Panel*>(panel);
  std::memset(panel, 0, panel_bytes<Panel, q::kBlockK>(n));
  for (int64_t row = 0; row < n_rows; ++row) {
    const auto* a = row_at<q::BlockQ8K>(rows, row_bytes, row);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      Layout::pack_row(a[b], row, out[b]);
      out[b].d[row] = a[b].d;
    }
  }
}

// q4_K / q5_K: S = sum_j sc_j dot_j and N = sum_j m_j (bsum_2j + bsum_2j+1), as the 256-bit panel. A q4_K run
// pair's dot lanes are at most 4 * 4 * 15 * 127 = 30480 in magnitude, so each is an int16 pair (value, sign) and
// one vpdpwssd against (scale, 0) both scales and accumulates it; q5_K's reach 62992 and take vpmulld.
template <typename Layout, bool kFifthBit, typename Block>
void wide_panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                             const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const typename Layout::Panel*>(panel);
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
      __m512i sums[Layout::kDots];
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
        __m512i dots[Layout::kDots];
        Layout::dots(values, a[b], c, dots);
        for (int h = 0; h < Layout::kDots; ++h) {
          if constexpr (kFifthBit) {
            sums[h] = _mm512_add_epi32(sums[h], _mm512_mullo_epi32(dots[h], scale));
          } else {
            sums[h] = _mm512_dpwssd_epi32(sums[h], dots[h], scale);
          }
        }
      }
      const __m256 act_scales = _mm256_loadu_ps(a[b].d);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Layout::fold(sums)),
                            _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[b].d)), act_scales), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(Layout::bsum_dots(a[b], min_pairs)),
                             _mm256_mul_ps(_mm256_set1_ps(half_to_float(w[b].dmin)), act_scales), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// q6_K: values 0..63 (the -32 taken out with the bsums, as the 256-bit panel); run pair c is runs 2c, 2c + 1
// (half c / 2 of the super-block, k = 2 (c % 2) + j), and lane 2j + v of it is group 4c + 2j + v, scaled by
// vpmulld.
template <typename Layout>
void wide_panel_dot_q6_k(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                         const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const typename Layout::Panel*>(panel);
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
      __m512i sums[Layout::kDots];
      for (__m512i& sum : sums) sum = _mm512_setzero_si512();
      auto add_run_pair = [&](__m512i values, int c) REWIND_INLINE_LAMBDA {
        __m512i dots[Layout::kDots];
        Layout::dots(values, a[b], c, dots);
        const __m512i scale = _mm512_permutexvar_epi32(lane_index(c), group_scales);
        for (int h = 0; h < Layout::kDots; ++h) {
          sums[h] = _mm512_add_epi32(sums[h], _mm512_mullo_epi32(dots[h], scale));
        }
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
          _mm256_sub_epi32(Layout::fold(sums), _mm256_slli_epi32(Layout::bsum_dots(a[b], scale_pairs), 5));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), row_scales(w[b].d, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// The narrow panel: 2 rows in the pair layout, 3 or 4 in a quad (the layout chosen by the row count, in pack and
// dot alike); its room is the quad's.
size_t narrow_panel_bytes(int64_t n) { return panel_bytes<QuadRows<1>::Panel, q::kBlockK>(n); }
static_assert(sizeof(PairRows::Panel) <= sizeof(QuadRows<1>::Panel));

void pack_q8_k_narrow(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  if (n_rows <= PairRows::kRows) {
    pack_q8_k_wide<PairRows>(n, rows, row_bytes, n_rows, panel);
  } else {
    pack_q8_k_wide<QuadRows<1>>(n, rows, row_bytes, n_rows, panel);
  }
}

template <bool kFifthBit, typename Block>
void narrow_panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                               const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  if (n_rows <= PairRows::kRows) {
    wide_panel_dot_k_affine<PairRows, kFifthBit, Block>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows,
                                                        out, out_stride);
  } else {
    wide_panel_dot_k_affine<QuadRows<1>, kFifthBit, Block>(n, weights, weight_row_bytes, n_weight_rows, panel,
                                                           n_rows, out, out_stride);
  }
}

void narrow_panel_dot_q6_k(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                           const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  if (n_rows <= PairRows::kRows) {
    wide_panel_dot_q6_k<PairRows>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  } else {
    wide_panel_dot_q6_k<QuadRows<1>>(n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride);
  }
}

// Measured on Zen 4 (Qwen2.5-Coder-1.5B, q4_K / q6_K, 2 threads; a verify round of 1 + k tokens in plain steps):
// 4 tokens cost 2.1 through the 256-bit panel, 1.6 through a quad; 3 tokens 1.8 through tiles, 1.6-1.7 through
// a quad; 2 tokens 1.38-1.42 through tiles, 1.23-1.28 through the pair layout.
constexpr int64_t kNarrowMinRows = 2;

PanelKernel narrow_panel_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::q4_k:
      return {pack_q8_k_narrow, narrow_panel_dot_k_affine<false, q::BlockQ4K>, narrow_panel_bytes, kNarrowMinRows,
              kNarrowPanelRows};
    case DType::q5_k:
      return {pack_q8_k_narrow, narrow_panel_dot_k_affine<true, q::BlockQ5K>, narrow_panel_bytes, kNarrowMinRows,
              kNarrowPanelRows};
    case DType::q6_k:
      return {pack_q8_k_narrow, narrow_panel_dot_q6_k, narrow_panel_bytes, kNarrowMinRows, kNarrowPanelRows};
    default: return {};
  }
}

// From 5 rows, and prefill's panels of 8: two quads.
PanelKernel full_panel_kernel(DType weight_type) {
  using Layout = QuadRows<2>;
  const PanelBytesFn bytes = panel_bytes<Layout::Panel, q::kBlockK>;
  const PanelPackFn pack = pack_q8_k_wide<Layout>;
  constexpr int64_t kMinRows = kNarrowPanelRows + 1;
  switch (weight_type) {
    case DType::q4_k: return {pack, wide_panel_dot_k_affine<Layout, false, q::BlockQ4K>, bytes, kMinRows, Layout::kRows};
    case DType::q5_k: return {pack, wide_panel_dot_k_affine<Layout, true, q::BlockQ5K>, bytes, kMinRows, Layout::kRows};
    case DType::q6_k: return {pack, wide_panel_dot_q6_k<Layout>, bytes, kMinRows, Layout::kRows};
    default: return {};
  }
}

}  // namespace
}  // namespace rwd::kernels::cpu::vnni

namespace rwd::kernels::cpu::avx512vnni {

// The shared VNNI table, with this flavour's 512-bit panels for the k-quants: narrow for 2 to 4 rows, full
// from 5.
VecDotKernel vec_dot_kernel(tensor::DType weight_type) {
  VecDotKernel kernel = vnni::kernel_table(weight_type);
  if (const PanelKernel narrow = vnni::narrow_panel_kernel(weight_type); narrow.dot != nullptr) {
    kernel.narrow_panel = narrow;
    kernel.panel = vnni::full_panel_kernel(weight_type);
  }
  return kernel;
}

}  // namespace rwd::kernels::cpu::avx512vnni
