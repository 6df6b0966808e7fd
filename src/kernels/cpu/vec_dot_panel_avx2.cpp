// Panel kernels (vec_dot_impl.h) for the quantized weight types: activations of 8 rows interleaved so that
// lane r of every vector is activation row r, and one weight row applied to all 8 with each weight value
// broadcast to every lane. Integer dot products stay in int16 lanes for as many steps as cannot overflow, then
// widen once; the per-block float work is one vector op per 8 outputs. Each lane follows the per-output
// arithmetic of vec_dot_avx2.h, so results are bit-identical to the one-row kernels of vec_dot_avx2.cpp.
// Weights are read in place (no repacking); only the activations, quantized once per matmul, are interleaved.
#include <cstring>
#include <type_traits>

#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"

namespace rwd::kernels::cpu::avx2 {
namespace {

using tensor::DType;
namespace q = tensor::quant;

constexpr int kRows = kPanelRows;

// ---- layouts: one struct per block of the partner type, for 8 rows ----

// q8_0 partner of q4_0 / q5_0: for m = 0..3 and the half h of rows 4h .. 4h + 3, qs[m][h] holds values
// 4m .. 4m + 3 of the four rows, then values 16 + 4m .. 16 + 4m + 3 of them: the layout that pshufd makes
// of an unpacked weight block ([values 0..15 | values 16..31]), so one shuffle serves 4 rows and 2 chunks.
// Then the rows' d as floats and the sums of their block values (the weights go in unsigned, q = w + offset,
// and offset * sum comes back out).
struct PanelQ8_0 {
  int8_t qs[4][2][2][kRows / 2][4];
  float d[kRows];
  int32_t sum[kRows];
};
static_assert(sizeof(PanelQ8_0) == 320);

// q8_1 partner of q4_1 / q5_1: as above with the rows' s (d * sum, used by the min term) as floats.
struct PanelQ8_1 {
  int8_t qs[4][2][2][kRows / 2][4];
  float d[kRows];
  float s[kRows];
};
static_assert(sizeof(PanelQ8_1) == 320);

// q8_0 partner of q8_0: values 4k .. 4k + 3 of row 4h + r widened to int16 in qs[k][h][r]. Signed weights
// times signed activations need a sign trick per row with maddubs; madd on int16 pairs needs none, and a
// weight word broadcast and widened, (w0, w1), (w2, w3) repeated, meets two rows' pairs in each half.
struct PanelQ8_0Wide {
  int16_t qs[8][2][kRows / 2][4];
  float d[kRows];
};
static_assert(sizeof(PanelQ8_0Wide) == 544);

// q8_K partner of q4_K / q5_K: chunk k (values 4k .. 4k + 3) of row r in qs[k][r], the rows' d, and the
// rows' sums of 16-value groups 2p and 2p + 1 as an int16 pair in bsums[p][r].
struct PanelQ8K {
  int8_t qs[64][kRows][4];
  float d[kRows];
  int16_t bsums[8][kRows][2];
};
static_assert(sizeof(PanelQ8K) == 2336);

// The narrow panel's q8_K partner of q4_K / q5_K, for up to 4 rows (a verify batch): chunk k (values 8k .. 8k +
// 7) of row r in qs[k][r], so one weight word of 8 values, broadcast, meets all 4 rows; the rest as PanelQ8K.
struct NarrowPanelQ8K {
  int8_t qs[32][kNarrowPanelRows][8];
  float d[kNarrowPanelRows];
  int16_t bsums[8][kNarrowPanelRows][2];
};
static_assert(sizeof(NarrowPanelQ8K) == 1168);

// The one-row partner of q4_0 / q5_0 (a decode step's single activation row), per group of 8 blocks: in pair
// p, qs[p][0] holds values 0..15 of blocks p and p + 4, qs[p][1] their values 16..31 (the two halves an
// unpacked pair of weight blocks gives), so two blocks share each vector and three hadds leave the 8 block
// dots in block order; then the blocks' d as floats and their sums (as PanelQ8_0). A short last group is
// padded with zeros.
struct SinglePanelQ8_0 {
  int8_t qs[4][2][2][16];
  float d[8];
  int32_t sum[8];
};
static_assert(sizeof(SinglePanelQ8_0) == 320);

size_t single_panel_bytes(int64_t n) {
  return static_cast<size_t>((n / q::kBlock32 + 7) / 8) * sizeof(SinglePanelQ8_0);
}

template <typename Panel, int kBlockValues>
size_t panel_bytes(int64_t n) {
  return static_cast<size_t>(n / kBlockValues) * sizeof(Panel);
}

template <typename Block>
const Block* row_at(const void* rows, size_t row_bytes, int64_t r) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(rows) + static_cast<size_t>(r) * row_bytes);
}

// ---- packing (rows past n_rows stay zero) ----

void pack_nibble_layout(const int8_t* values, int64_t r, int8_t (&qs)[4][2][2][kRows / 2][4]) {
  for (int m = 0; m < 4; ++m) {
    std::memcpy(qs[m][r / 4][0][r % 4], values + 4 * m, 4);
    std::memcpy(qs[m][r / 4][1][r % 4], values + 16 + 4 * m, 4);
  }
}

void pack_q8_0(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8_0*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8_0, q::kBlock32>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8_0>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlock32; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < q::kBlock32; ++j) sum += a[b].qs[j];
      pack_nibble_layout(a[b].qs, r, out[b].qs);
      out[b].d[r] = half_to_float(a[b].d);
      out[b].sum[r] = sum;
    }
  }
}

void pack_q8_0_single(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<SinglePanelQ8_0*>(panel);
  std::memset(panel, 0, single_panel_bytes(n));
  if (n_rows == 0) return;
  const auto* a = row_at<q::BlockQ8_0>(rows, row_bytes, 0);
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    SinglePanelQ8_0& group = out[b / 8];
    const int j = static_cast<int>(b % 8);
    int32_t sum = 0;
    for (int v = 0; v < q::kBlock32; ++v) sum += a[b].qs[v];
    std::memcpy(group.qs[j % 4][0][j / 4], a[b].qs, 16);
    std::memcpy(group.qs[j % 4][1][j / 4], a[b].qs + 16, 16);
    group.d[j] = half_to_float(a[b].d);
    group.sum[j] = sum;
  }
}

void pack_q8_1(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8_1*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8_1, q::kBlock32>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8_1>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlock32; ++b) {
      pack_nibble_layout(a[b].qs, r, out[b].qs);
      out[b].d[r] = half_to_float(a[b].d);
      out[b].s[r] = half_to_float(a[b].s);
    }
  }
}

void pack_q8_0_wide(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  auto* out = static_cast<PanelQ8_0Wide*>(panel);
  std::memset(panel, 0, panel_bytes<PanelQ8_0Wide, q::kBlock32>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8_0>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlock32; ++b) {
      for (int k = 0; k < 8; ++k) {
        for (int j = 0; j < 4; ++j) out[b].qs[k][r / 4][r % 4][j] = a[b].qs[4 * k + j];
      }
      out[b].d[r] = half_to_float(a[b].d);
    }
  }
}

// q8_K rows into a panel whose qs[k][r] holds chunk k (kChunk values) of row r: PanelQ8K or NarrowPanelQ8K.
template <typename Panel>
void pack_q8_k_into(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  constexpr int kChunks = std::extent_v<decltype(Panel::qs)>;
  constexpr int kChunk = q::kBlockK / kChunks;
  auto* out = static_cast<Panel*>(panel);
  std::memset(panel, 0, panel_bytes<Panel, q::kBlockK>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* a = row_at<q::BlockQ8K>(rows, row_bytes, r);
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      for (int k = 0; k < kChunks; ++k) std::memcpy(out[b].qs[k][r], a[b].qs + kChunk * k, kChunk);
      out[b].d[r] = a[b].d;
      for (int p = 0; p < 8; ++p) {
        out[b].bsums[p][r][0] = a[b].bsums[2 * p];
        out[b].bsums[p][r][1] = a[b].bsums[2 * p + 1];
      }
    }
  }
}

void pack_q8_k(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  pack_q8_k_into<PanelQ8K>(n, rows, row_bytes, n_rows, panel);
}

void pack_q8_k_narrow(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel) {
  pack_q8_k_into<NarrowPanelQ8K>(n, rows, row_bytes, n_rows, panel);
}

// ---- shared pieces ----

REWIND_INLINE __m256i ones16() { return _mm256_set1_epi16(1); }

// ---- blocks of 32: q4_0, q5_0 (against PanelQ8_0), q4_1, q5_1 (against PanelQ8_1) ----
//
// The weight block is unpacked once to its 32 values, unsigned (q4: 0..15, q5: 0..31), so maddubs needs no
// sign trick; pshufd m then gives chunk m in the low and chunk m + 4 in the high 128-bit lane, for four rows
// of the panel at a time. An int16 lane sums 4 chunks (q5: 4 * 2 * 31 * 127 fits); madd and one cross-lane add
// give each row's dot.

template <typename BlockT, bool kFifthBitT, bool kAffineT, int kOffsetShiftT>
struct NibbleType {
  using Block = BlockT;
  static constexpr bool kFifthBit = kFifthBitT;
  static constexpr bool kAffine = kAffineT;
  static constexpr int kOffsetShift = kOffsetShiftT;  // unsigned value = signed + (1 << shift); 0 for affine
  using Panel = std::conditional_t<kAffineT, PanelQ8_1, PanelQ8_0>;
};
using TypeQ4_0 = NibbleType<q::BlockQ4_0, false, false, 3>;
using TypeQ5_0 = NibbleType<q::BlockQ5_0, true, false, 4>;
using TypeQ4_1 = NibbleType<q::BlockQ4_1, false, true, 0>;
using TypeQ5_1 = NibbleType<q::BlockQ5_1, true, true, 0>;

// Lane j = value j of the block, unsigned: byte i of qs holds value i (low nibble) and value i + 16 (high).
template <typename Type>
REWIND_INLINE __m256i unsigned_values(const typename Type::Block& w) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  __m256i values = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
  if constexpr (Type::kFifthBit) {
    values = _mm256_or_si256(values, _mm256_and_si256(spread_bits(w.qh), _mm256_set1_epi8(0x10)));
  }
  return values;
}

// The int32 dots of block w with the 8 rows of panel block a.
template <typename Type>
REWIND_INLINE __m256i nibble_block_dot(const typename Type::Block& w, const typename Type::Panel& a) {
  const __m256i values = unsigned_values<Type>(w);
  // pshufd wants an immediate, which a loop index is not in unoptimized builds.
  const __m256i chunks[4] = {_mm256_shuffle_epi32(values, 0x00), _mm256_shuffle_epi32(values, 0x55),
                             _mm256_shuffle_epi32(values, 0xAA), _mm256_shuffle_epi32(values, 0xFF)};
  __m256i sum16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};  // rows 0..3, rows 4..7
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    sum16[0] = _mm256_add_epi16(sum16[0], _mm256_maddubs_epi16(chunks[m], load256(a.qs[m][0])));
    sum16[1] = _mm256_add_epi16(sum16[1], _mm256_maddubs_epi16(chunks[m], load256(a.qs[m][1])));
  }
  // Each row's sums over chunks 0..3 sit in the low 128-bit lane, over chunks 4..7 in the high one.
  const __m256i low = _mm256_madd_epi16(sum16[0], ones16());
  const __m256i high = _mm256_madd_epi16(sum16[1], ones16());
  __m256i dot = _mm256_add_epi32(_mm256_permute2x128_si256(low, high, 0x20), _mm256_permute2x128_si256(low, high, 0x31));
  if constexpr (!Type::kAffine) {
    dot = _mm256_sub_epi32(dot, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum)),
                                                  Type::kOffsetShift));
  }
  return dot;
}

// Runs step(w block, panel block, chain) over the blocks, block b into chain b % 8 (vec_dot_avx2.h), and
// stores the summed chains of every weight row.
template <typename Block, typename Panel, typename Step>
REWIND_INLINE void panel_dot_blocks32(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                                      const void* panel, int64_t n_rows, float* out, int64_t out_stride, Step step) {
  const auto* a = static_cast<const Panel*>(panel);
  const int64_t n_blocks = n / q::kBlock32;
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 chains[8];
    for (__m256& chain : chains) chain = _mm256_setzero_ps();
    int64_t b0 = 0;
    for (; b0 + 8 <= n_blocks; b0 += 8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) step(w[b0 + j], a[b0 + j], chains[j]);
    }
#pragma GCC unroll 7
    for (int j = 0; j < 7; ++j) {
      if (b0 + j < n_blocks) step(w[b0 + j], a[b0 + j], chains[j]);
    }
    store_rows(sum_chains(chains), n_rows, out + i, out_stride);
  }
}

template <typename Type>
void panel_dot_nibbles(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                       const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  using Block = typename Type::Block;
  using Panel = typename Type::Panel;
  panel_dot_blocks32<Block, Panel>(
      n, weights, weight_row_bytes, n_weight_rows, panel, n_rows, out, out_stride,
      [](const Block& w, const Panel& a, __m256& chain) REWIND_INLINE_LAMBDA {
        chain = _mm256_fmadd_ps(_mm256_cvtepi32_ps(nibble_block_dot<Type>(w, a)), row_scales(w.d, a.d), chain);
        if constexpr (Type::kAffine) {
          chain = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(w.m)), _mm256_loadu_ps(a.s), chain);
        }
      });
}

// ---- q4_0, q5_0 against SinglePanelQ8_0: one activation row ----
//
// The one-row kernel (vec_dot_avx2.cpp) unpacks each block to one vector and needs a sign trick, a madd and
// an eighth of a transposition per block: on Zen 3 that made q5_0 compute-bound at ~10 G values/s per core,
// below what two cores can stream. Here the weights go in unsigned (the offset comes back out through the
// packed sums), two blocks share each unpacking step and each madd, and the activation row is laid out once
// per matmul to match.

// The int32 partial dots of blocks `first` (lanes 0..3) and `second` (lanes 4..7; null past the row's end)
// with pair p of group a, unsigned weights.
template <typename Type>
REWIND_INLINE __m256i single_pair_dot(const typename Type::Block* first, const typename Type::Block* second,
                                      const SinglePanelQ8_0& a, int p) {
  const __m128i first_qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first->qs));
  const __m256i packed =
      second == nullptr ? _mm256_zextsi128_si256(first_qs)
                        : _mm256_inserti128_si256(_mm256_castsi128_si256(first_qs),
                                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(second->qs)), 1);
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  __m256i low = _mm256_and_si256(packed, low_nibble);                         // values 0..15 of both blocks
  __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);  // values 16..31
  if constexpr (Type::kFifthBit) {
    const __m128i first_bits = broadcast_u32_128(first->qh);
    const __m256i bits = second == nullptr ? _mm256_zextsi128_si256(first_bits)
                                           : _mm256_set_m128i(broadcast_u32_128(second->qh), first_bits);
    const __m256i bit_of_lane = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    auto fifth_bits = [&](__m256i byte_of_lane) REWIND_INLINE_LAMBDA {
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(bits, byte_of_lane), bit_of_lane),
                                            bit_of_lane);
      return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
    };
    low = _mm256_or_si256(low, fifth_bits(_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0,
                                                           0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)));
    high = _mm256_or_si256(high, fifth_bits(_mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2,
                                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3)));
  }
  // q5: 2 * 2 * 31 * 127 fits an int16 lane.
  const __m256i sum16 = _mm256_add_epi16(_mm256_maddubs_epi16(low, load256(a.qs[p][0])),
                                         _mm256_maddubs_epi16(high, load256(a.qs[p][1])));
  return _mm256_madd_epi16(sum16, ones16());
}

// Blocks b0 .. b0 + count - 1 (count <= 8) of one weight row into the chains: lane j of the three hadds'
// result is block b0 + j's dot, as in the one-row kernel.
template <typename Type>
REWIND_INLINE __m256 single_group(const typename Type::Block* w, const SinglePanelQ8_0& a, int count,
                                  __m256 chains) {
  __m256i pairs[4];
  for (int p = 0; p < 4; ++p) {
    pairs[p] = p < count ? single_pair_dot<Type>(w + p, p + 4 < count ? w + p + 4 : nullptr, a, p)
                         : _mm256_setzero_si256();
  }
  __m256i dots = _mm256_hadd_epi32(_mm256_hadd_epi32(pairs[0], pairs[1]), _mm256_hadd_epi32(pairs[2], pairs[3]));
  dots = _mm256_sub_epi32(dots, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum)),
                                                  Type::kOffsetShift));
  const __m256 scales =
      _mm256_mul_ps(gather_halves(&w->d, sizeof(typename Type::Block), count), _mm256_loadu_ps(a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), scales, chains);
}

template <typename Type>
void single_panel_dot(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                      const void* panel, int64_t, float* out, int64_t) {
  using Block = typename Type::Block;
  const auto* a = static_cast<const SinglePanelQ8_0*>(panel);
  const int64_t n_blocks = n / q::kBlock32;
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 chains = _mm256_setzero_ps();
    int64_t b0 = 0;
    for (; b0 + 8 <= n_blocks; b0 += 8) chains = single_group<Type>(w + b0, a[b0 / 8], 8, chains);
    // The padded lanes add 0 * 0: a chain, never -0, keeps its bits, as under the one-row kernel's blend.
    if (b0 < n_blocks) chains = single_group<Type>(w + b0, a[b0 / 8], static_cast<int>(n_blocks - b0), chains);
    out[i] = sum_chains(chains);
  }
}

// ---- q8_0, iq4_nl, mxfp4 against PanelQ8_0Wide ----
//
// Per chunk of 4 values: the weight word, broadcast and widened, is (w0, w1), (w2, w3) four times; madd with
// each half of the chunk gives every row two int32 partial sums, which one hadd per block joins. Two weight
// rows share each load of the (int16, so twice as large) panel. q8_0 is read in place; iq4_nl and mxfp4 look
// their 32 levels up once per block into a buffer the chunks are then read from.

struct WideQ8_0 {
  using Block = q::BlockQ8_0;
  static REWIND_INLINE const int8_t* values(const Block& w, int8_t*) { return w.qs; }
  static REWIND_INLINE float scale(const Block& w) { return half_to_float(w.d); }
};
struct WideIQ4NL {
  using Block = q::BlockIQ4NL;
  static REWIND_INLINE const int8_t* values(const Block& w, int8_t* buffer) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(buffer), lookup_levels(q::kIq4NlLevels, w.qs));
    return buffer;
  }
  static REWIND_INLINE float scale(const Block& w) { return half_to_float(w.d); }
};
struct WideMXFP4 {
  using Block = q::BlockMXFP4;
  static REWIND_INLINE const int8_t* values(const Block& w, int8_t* buffer) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(buffer), lookup_levels(q::kMxfp4Levels, w.qs));
    return buffer;
  }
  static REWIND_INLINE float scale(const Block& w) { return e8m0_half_to_float(w.e); }
};

template <int NW>
REWIND_INLINE void wide_block_dots(const int8_t* const (&values)[NW], const PanelQ8_0Wide& a, __m256i (&dots)[NW]) {
  __m256i low[NW], high[NW];  // rows 0..3, rows 4..7
  for (int i = 0; i < NW; ++i) low[i] = high[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    __m256i act_low = load256(a.qs[k][0]);
    __m256i act_high = load256(a.qs[k][1]);
    if constexpr (NW > 1) {  // one load for all the weight rows, not one folded into each madd
      keep_in_register(act_low);
      keep_in_register(act_high);
    }
    for (int i = 0; i < NW; ++i) {
      const __m256i pairs = _mm256_cvtepi8_epi16(broadcast_u32_128(values[i] + 4 * k));
      low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(pairs, act_low));
      high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(pairs, act_high));
      keep_in_register(low[i]);
      keep_in_register(high[i]);
    }
  }
  // hadd gives rows 0, 1, 4, 5 | 2, 3, 6, 7.
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int i = 0; i < NW; ++i) dots[i] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(low[i], high[i]), order);
}

template <typename Type, int NW>
REWIND_INLINE void panel_dot_wide_rows(int64_t n, const uint8_t* weights, size_t weight_row_bytes,
                                       const PanelQ8_0Wide* a, int64_t n_rows, float* out, int64_t out_stride) {
  using Block = typename Type::Block;
  const Block* w[NW];
  for (int i = 0; i < NW; ++i) w[i] = row_at<Block>(weights, weight_row_bytes, i);
  const int64_t n_blocks = n / q::kBlock32;
  __m256 chains[NW][8];
  for (int i = 0; i < NW; ++i) {
    for (__m256& chain : chains[i]) chain = _mm256_setzero_ps();
  }
  alignas(32) int8_t buffers[NW][q::kBlock32];
  auto step = [&](int64_t b, int j) REWIND_INLINE_LAMBDA {
    const int8_t* values[NW];
    for (int i = 0; i < NW; ++i) values[i] = Type::values(w[i][b], buffers[i]);
    __m256i dots[NW];
    wide_block_dots(values, a[b], dots);
    for (int i = 0; i < NW; ++i) {
      const __m256 scales = _mm256_mul_ps(_mm256_set1_ps(Type::scale(w[i][b])), _mm256_loadu_ps(a[b].d));
      chains[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[i]), scales, chains[i][j]);
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
  for (int i = 0; i < NW; ++i) store_rows(sum_chains(chains[i]), n_rows, out + i, out_stride);
}

template <typename Type>
void panel_dot_wide(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                    const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* a = static_cast<const PanelQ8_0Wide*>(panel);
  int64_t i = 0;
  for (; i + 2 <= n_weight_rows; i += 2) {
    panel_dot_wide_rows<Type, 2>(n, w + static_cast<size_t>(i) * weight_row_bytes, weight_row_bytes, a, n_rows,
                                 out + i, out_stride);
  }
  if (i < n_weight_rows) {
    panel_dot_wide_rows<Type, 1>(n, w + static_cast<size_t>(i) * weight_row_bytes, weight_row_bytes, a, n_rows,
                                 out + i, out_stride);
  }
}

// ---- q4_K / q5_K against PanelQ8K ----
//
// Bytes 4m .. 4m + 3 of 64-value chunk c hold values 64c + 4m .. (low nibbles, sub-block 2c) and
// 64c + 32 + 4m .. (high nibbles, sub-block 2c + 1). A sub-block's 8 chunks sum in int16 (q4: 8 * 3810;
// q5 in two groups of 4, 4 * 7874), then madd with its scale widens them.

template <bool kFifthBit, typename Block>
REWIND_INLINE __m256i k_sub_block_pair(const Block& w, const PanelQ8K& a, int c, uint64_t scales) {
  __m256i sum_low[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  __m256i sum_high[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  #pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    __m256i low, high;
    if constexpr (kFifthBit) {
      const uint32_t packed = load_u32(w.qs + 32 * c + 4 * m);
      const uint32_t bits = load_u32(w.qh + 4 * m);
      low = _mm256_set1_epi32(
          static_cast<int>((packed & 0x0F0F0F0Fu) | (((bits >> (2 * c)) & 0x01010101u) << 4)));
      high = _mm256_set1_epi32(
          static_cast<int>(((packed >> 4) & 0x0F0F0F0Fu) | (((bits >> (2 * c + 1)) & 0x01010101u) << 4)));
    } else {
      const __m256i packed = broadcast_u32(w.qs + 32 * c + 4 * m);
      low = _mm256_and_si256(packed, low_nibble);
      high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
    }
    const int g = kFifthBit ? m / 4 : 0;
    sum_low[g] = _mm256_add_epi16(sum_low[g], _mm256_maddubs_epi16(low, load256(a.qs[16 * c + m])));
    sum_high[g] = _mm256_add_epi16(sum_high[g], _mm256_maddubs_epi16(high, load256(a.qs[16 * c + 8 + m])));
    keep_in_register(sum_low[g]);
    keep_in_register(sum_high[g]);
  }
  const __m256i scale_low = _mm256_set1_epi16(static_cast<short>((scales >> (16 * c)) & 0xFF));
  const __m256i scale_high = _mm256_set1_epi16(static_cast<short>((scales >> (16 * c + 8)) & 0xFF));
  __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(sum_low[0], scale_low), _mm256_madd_epi16(sum_high[0], scale_high));
  if constexpr (kFifthBit) {
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(sum_low[1], scale_low),
                                                 _mm256_madd_epi16(sum_high[1], scale_high)));
  }
  return sum;
}

template <bool kFifthBit, typename Block>
void panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                        const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8K*>(panel);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      uint64_t scales, mins;
      unpack_k_scales(w[b].scales, scales, mins);
      __m256i sum = _mm256_setzero_si256();
      #pragma GCC unroll 8
      for (int c = 0; c < 4; ++c) sum = _mm256_add_epi32(sum, k_sub_block_pair<kFifthBit>(w[b], a[b], c, scales));
      // Sub-block j's min times the row's sum over its 32 values, from the pair of 16-value sums.
      __m256i min_sum = _mm256_setzero_si256();
      #pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const auto min = static_cast<uint32_t>((mins >> (8 * j)) & 0xFF);
        min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(load256(a[b].bsums[j]),
                                                              _mm256_set1_epi32(static_cast<int>(min | min << 16))));
      }
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), row_scales(w[b].d, a[b].d), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_sum), row_scales(w[b].dmin, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// ---- q4_K / q5_K against NarrowPanelQ8K ----
//
// Bytes 8m .. 8m + 7 of chunk pair c hold values 64c + 8m .. (low nibbles, sub-block 2c) and 64c + 32 + 8m ..
// (high nibbles, sub-block 2c + 1): one 64-bit word, broadcast, serves the 4 rows of both chunks. A sub-block's
// 4 chunks sum in int16 (q5: 4 * 2 * 31 * 128 fits), madd with its scale widens them, and row r's two int32
// lanes join at the end of the super-block. S and N then take the one-row kernel's float steps per lane.
template <bool kFifthBit, typename Block>
REWIND_INLINE __m256i k_sub_block_pair_narrow(const Block& w, const NarrowPanelQ8K& a, int c, __m256i scales16) {
  constexpr uint64_t kLowNibbles = 0x0F0F0F0F0F0F0F0Full;
  constexpr uint64_t kLowBits = 0x0101010101010101ull;
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  __m256i sum_low = _mm256_setzero_si256();
  __m256i sum_high = _mm256_setzero_si256();
  #pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    __m256i low, high;
    if constexpr (kFifthBit) {
      const uint64_t packed = load_u64(w.qs + 32 * c + 8 * m);
      const uint64_t bits = load_u64(w.qh + 8 * m);
      low = _mm256_set1_epi64x(static_cast<long long>((packed & kLowNibbles) | (((bits >> (2 * c)) & kLowBits) << 4)));
      high = _mm256_set1_epi64x(
          static_cast<long long>(((packed >> 4) & kLowNibbles) | (((bits >> (2 * c + 1)) & kLowBits) << 4)));
    } else {
      const __m256i packed = broadcast_u64(w.qs + 32 * c + 8 * m);
      low = _mm256_and_si256(packed, low_nibble);
      high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
    }
    sum_low = _mm256_add_epi16(sum_low, _mm256_maddubs_epi16(low, load256(a.qs[8 * c + m])));
    sum_high = _mm256_add_epi16(sum_high, _mm256_maddubs_epi16(high, load256(a.qs[8 * c + 4 + m])));
  }
  return _mm256_add_epi32(_mm256_madd_epi16(sum_low, broadcast_word(scales16, 2 * c)),
                          _mm256_madd_epi16(sum_high, broadcast_word(scales16, 2 * c + 1)));
}

template <bool kFifthBit, typename Block>
void narrow_panel_dot_k_affine(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                               const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const NarrowPanelQ8K*>(panel);
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      uint64_t scales, mins;
      unpack_k_scales(w[b].scales, scales, mins);
      // Scales and mins as int16 words, each broadcast where needed by one shuffle: extracting them one by
      // one in general registers and moving each across cost more than the multiplies on Zen 3.
      const __m256i scales16 = widen_bytes(scales);
      const __m256i mins16 = widen_bytes(mins);
      __m256i sum = _mm256_setzero_si256();
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        sum = _mm256_add_epi32(sum, k_sub_block_pair_narrow<kFifthBit>(w[b], a[b], c, scales16));
      }
      // bsums[p] and bsums[p + 1] fill one load: the 4 rows' pairs of sub-block p, then of p + 1.
      __m256i min_sum = _mm256_setzero_si256();
      #pragma GCC unroll 4
      for (int p = 0; p < 8; p += 2) {
        min_sum = _mm256_add_epi32(min_sum, _mm256_madd_epi16(load256(a[b].bsums[p]), broadcast_words(mins16, p, p + 1)));
      }
      // Row r's S is lanes 2r and 2r + 1 of sum; hadd gives rows 0, 1 in the low and 2, 3 in the high half.
      const __m256i row_pairs = _mm256_hadd_epi32(sum, sum);
      const __m128i s4 = _mm_unpacklo_epi64(_mm256_castsi256_si128(row_pairs), _mm256_extracti128_si256(row_pairs, 1));
      const __m128i n4 = _mm_add_epi32(_mm256_castsi256_si128(min_sum), _mm256_extracti128_si256(min_sum, 1));
      const __m128 row_d = _mm_loadu_ps(a[b].d);
      acc = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_mul_ps(_mm_set1_ps(half_to_float(w[b].d)), row_d), acc);
      acc = _mm_fnmadd_ps(_mm_cvtepi32_ps(n4), _mm_mul_ps(_mm_set1_ps(half_to_float(w[b].dmin)), row_d), acc);
    }
    alignas(16) float lanes[kNarrowPanelRows];
    _mm_store_ps(lanes, acc);
    for (int64_t r = 0; r < n_rows; ++r) out[r * out_stride + i] = lanes[r];
  }
}

// ---- tq1_0 against PanelQ8K ----
//
// The base-3 digits of a tq1_0 super-block cost more to decode than a tile shares over its 4 rows; a panel
// decodes them once per weight row for 8 rows, into a buffer in value order, from which each chunk of 4 is
// broadcast against the panel's chunk of 8 rows. Digits are 0..2, so the maddubs pairs (at most 2 * 2 * 127)
// of all 64 chunks sum in int16; S = that sum - the rows' sum of activations (the digits mean t - 1), as the
// one-row kernel's S exactly.
void panel_dot_tq1_0(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                     const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  const auto* a = static_cast<const PanelQ8K*>(panel);
  alignas(32) uint8_t digits[q::kBlockK];
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<q::BlockTQ1_0>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(digits + 32 * v), tq1_0_digits(w[b].qs, w[b].qh, v));
      }
      __m256i sum16 = _mm256_setzero_si256();
#pragma GCC unroll 16
      for (int k = 0; k < q::kBlockK / 4; ++k) {
        sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(broadcast_u32(digits + 4 * k), load256(a[b].qs[k])));
      }
      __m256i sum = _mm256_madd_epi16(sum16, ones16());
#pragma GCC unroll 8
      for (int p = 0; p < 8; ++p) sum = _mm256_sub_epi32(sum, _mm256_madd_epi16(load256(a[b].bsums[p]), ones16()));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), row_scales(w[b].d, a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

// ---- the grid i-quants against PanelQ8K ----
//
// Their codebook lookups cost far more than the multiplies (a tile shares them over 4 rows at most), so a panel
// decodes each super-block once per weight row for 8 rows: the signed levels and their magnitudes into buffers
// in value order, the scale of every 16 values into a third. Each chunk of 4 levels is then broadcast against
// the panel's chunk of 8 rows, its signs moved onto the activations; two chunks' maddubs pairs (at most 2 * 2 *
// 62 * 127) add in int16 before the madd with their scale. S and the float part are the tile's (SumsGrid,
// DotKSymmetric), so every row gets the one-row kernel's bits.
template <typename Block>
REWIND_INLINE uint16_t block_scale_bits(const Block& w) {
  return w.d;
}
REWIND_INLINE uint16_t block_scale_bits(const q::BlockIQ1M& w) { return iq1_m_half_d(w); }

template <typename Decoder>
void panel_dot_grid(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                    const void* panel, int64_t n_rows, float* out, int64_t out_stride) {
  using Block = typename Decoder::Block;
  const auto* a = static_cast<const PanelQ8K*>(panel);
  alignas(32) int8_t levels[q::kBlockK];
  alignas(32) uint8_t magnitudes[q::kBlockK];
  alignas(32) int16_t scales[2 * 8 * 16];  // sub-block j's scale16 lanes at 16 j
  for (int64_t i = 0; i < n_weight_rows; ++i) {
    const auto* w = row_at<Block>(weights, weight_row_bytes, i);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / q::kBlockK; ++b) {
      const typename Decoder::Prepared prepared = Decoder::prepare(w[b]);
#pragma GCC unroll 2
      for (int j = 0; j < 8; ++j) {
        const IqSubBlock sub_block = Decoder::sub_block(w[b], prepared, j);
        _mm256_store_si256(reinterpret_cast<__m256i*>(magnitudes + 32 * j), sub_block.magnitudes);
        _mm256_store_si256(reinterpret_cast<__m256i*>(levels + 32 * j),
                           _mm256_sign_epi8(sub_block.magnitudes, sub_block.signs));
        _mm256_store_si256(reinterpret_cast<__m256i*>(scales + 16 * j), sub_block.scale16);
      }
      __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int g = 0; g < 16; ++g) {
        // Group g (values 16 g ..) has its scale in lane 0 (even g) or lane 8 (odd g) of sub-block g / 2's.
        const __m256i scale = _mm256_set1_epi16(scales[16 * (g / 2) + 8 * (g % 2)]);
        auto chunk = [&](int k) REWIND_INLINE_LAMBDA {
          const __m256i act = _mm256_sign_epi8(load256(a[b].qs[k]), broadcast_u32(levels + 4 * k));
          return _mm256_maddubs_epi16(broadcast_u32(magnitudes + 4 * k), act);
        };
        const __m256i first = _mm256_add_epi16(chunk(4 * g), chunk(4 * g + 1));
        const __m256i second = _mm256_add_epi16(chunk(4 * g + 2), chunk(4 * g + 3));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(first, scale), _mm256_madd_epi16(second, scale)));
      }
      __m256 total = _mm256_cvtepi32_ps(sum);
      if constexpr (Decoder::kSumScale != 1.0f) total = _mm256_mul_ps(total, _mm256_set1_ps(Decoder::kSumScale));
      acc = _mm256_fmadd_ps(total, row_scales(block_scale_bits(w[b]), a[b].d), acc);
    }
    store_rows(acc, n_rows, out + i, out_stride);
  }
}

template <int kMinRows>
constexpr PanelKernel make(PanelPackFn pack, PanelDotFn dot, PanelBytesFn bytes) {
  return {pack, dot, bytes, kMinRows, kPanelRows};
}
constexpr PanelKernel make_single(PanelPackFn pack, PanelDotFn dot) {
  return {pack, dot, single_panel_bytes, 1, 1};
}
template <int kMinRows>
constexpr PanelKernel make_narrow(PanelPackFn pack, PanelDotFn dot, PanelBytesFn bytes) {
  return {pack, dot, bytes, kMinRows, kNarrowPanelRows};
}

}  // namespace

// min_rows: where a panel (the cost of 8 rows, whatever the count) overtakes the 4-row tiles, measured on Zen 4
// at n = 768 and 1024; q8_0 in the decode setting (weights streamed from memory, 2 threads), where its tiles
// keep up with its panel up to 7 rows.
// iq4_nl / mxfp4, measured on Zen 3 at n = 2048, 1 thread (2 cores shared with other work, so roughly): the
// 4-row tile costs 0.36 ms per row, a panel 2.5 ms whatever its rows, so only a full panel pays (by ~10%).
constexpr int kLookupMinRows = 8;
// tq1_0, the same way: 0.21 ms per row for the 4-row tile, 0.95-1.04 ms for a panel.
constexpr int kTq1_0MinRows = 5;

// The grid i-quants, measured on Zen 3 at n = 2048, 1 thread (a shared machine, so roughly): 64 rows take
// 12.3-18.4 ms in panels against 17.1-31.4 ms in 4-row tiles (iq3_s and iq2_xs gain most, iq1_m least); at 4
// rows a panel is no faster than one tile, so panels start where two tiles would.
constexpr int kGridMinRows = 6;

// q4_K's narrow panel costs the same for 2, 3 or 4 rows; measured on Zen 3 (2048 x 2048 streamed from DRAM,
// 2 threads, medians of 5): 2 rows 239 us against 173 us in tiles, 3 rows 261 against 214, 4 rows 225 against
// 291 (one row alone: 140). So it takes exactly the 4-row batch, a verify of 3 drafted tokens.
constexpr int kNarrowMinRows = 4;

template <typename Decoder>
PanelKernel grid_panel() {
  return make<kGridMinRows>(pack_q8_k, panel_dot_grid<Decoder>, panel_bytes<PanelQ8K, q::kBlockK>);
}

PanelKernel narrow_panel_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::q4_0: return make_single(pack_q8_0_single, single_panel_dot<TypeQ4_0>);
    case DType::q5_0: return make_single(pack_q8_0_single, single_panel_dot<TypeQ5_0>);
    case DType::q4_k:
      return make_narrow<kNarrowMinRows>(pack_q8_k_narrow, narrow_panel_dot_k_affine<false, q::BlockQ4K>,
                                         panel_bytes<NarrowPanelQ8K, q::kBlockK>);
    case DType::q5_k:
      return make_narrow<kNarrowMinRows>(pack_q8_k_narrow, narrow_panel_dot_k_affine<true, q::BlockQ5K>,
                                         panel_bytes<NarrowPanelQ8K, q::kBlockK>);
    default: return {};  // q6_K: a narrow panel (vpermq broadcasting each 8 unpacked values) lost to its tile at
                         // 2, 3 and 4 rows on Zen 3 (4 rows: 285 us against 239, 2048 x 2048 from DRAM)
  }
}

PanelKernel panel_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::q4_0:
      return make<3>(pack_q8_0, panel_dot_nibbles<TypeQ4_0>, panel_bytes<PanelQ8_0, q::kBlock32>);
    case DType::q5_0:
      return make<3>(pack_q8_0, panel_dot_nibbles<TypeQ5_0>, panel_bytes<PanelQ8_0, q::kBlock32>);
    case DType::q4_1:
      return make<3>(pack_q8_1, panel_dot_nibbles<TypeQ4_1>, panel_bytes<PanelQ8_1, q::kBlock32>);
    case DType::q5_1:
      return make<3>(pack_q8_1, panel_dot_nibbles<TypeQ5_1>, panel_bytes<PanelQ8_1, q::kBlock32>);
    case DType::q8_0:
      return make<8>(pack_q8_0_wide, panel_dot_wide<WideQ8_0>, panel_bytes<PanelQ8_0Wide, q::kBlock32>);
    case DType::iq4_nl:
      return make<kLookupMinRows>(pack_q8_0_wide, panel_dot_wide<WideIQ4NL>, panel_bytes<PanelQ8_0Wide, q::kBlock32>);
    case DType::mxfp4:
      return make<kLookupMinRows>(pack_q8_0_wide, panel_dot_wide<WideMXFP4>, panel_bytes<PanelQ8_0Wide, q::kBlock32>);
    case DType::q4_k:
      return make<5>(pack_q8_k, panel_dot_k_affine<false, q::BlockQ4K>, panel_bytes<PanelQ8K, q::kBlockK>);
    case DType::q5_k:
      return make<9>(pack_q8_k, panel_dot_k_affine<true, q::BlockQ5K>, panel_bytes<PanelQ8K, q::kBlockK>);
    case DType::tq1_0:
      return make<kTq1_0MinRows>(pack_q8_k, panel_dot_tq1_0, panel_bytes<PanelQ8K, q::kBlockK>);
    case DType::iq2_xxs: return grid_panel<DecodeIQ2XXS>();
    case DType::iq2_xs: return grid_panel<DecodeIQ2XS>();
    case DType::iq2_s: return grid_panel<DecodeIQ2S>();
    case DType::iq3_xxs: return grid_panel<DecodeIQ3XXS>();
    case DType::iq3_s: return grid_panel<DecodeIQ3S>();
    case DType::iq1_s: return grid_panel<DecodeIQ1S>();
    case DType::iq1_m: return grid_panel<DecodeIQ1M>();
    default: return {};  // q6_K: the 4-row tile of vec_dot_avx2.cpp beats a panel at every row count; so do
                         // they for q2_K, q3_K and tq2_0 (a panel unpacking their levels once per 8 rows was
                         // no faster on Zen 3); iq4_xs: none yet
  }
}

}  // namespace rwd::kernels::cpu::avx2
