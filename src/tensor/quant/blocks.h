// Block structs of the quantized types rewind reads and writes, byte for byte as llama.cpp (ggml) lays them
// out in GGUF files, with static_asserts on their sizes. fp16 fields are raw IEEE half bits (base/half.h).
// The meaning of each bit is documented here once; reference.cpp and the kernels decode it.
// Not here: the (de)quantizers (reference.h) and the dot-product kernels (kernels/cpu).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace rwd::tensor::quant {

inline constexpr int kBlock32 = 32;  // values per block of the legacy types (q4_0 … q8_1)
inline constexpr int kBlockK = 256;  // values per super-block of the k-quants

// value[j] = d * (nibble[j] - 8); byte i holds value i in its low nibble and value i + 16 in its high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// value[j] = d * nibble[j] + m; nibbles as in q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// value[j] = d * ((nibble[j] | bit_j(qh) << 4) - 16); qh is a little-endian 32-bit word, bit j for value j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// value[j] = d * (nibble[j] | bit_j(qh) << 4) + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// value[j] = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kBlock32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// value[j] = d * qs[j]; s = d * sum(qs) (both fp16), used by the dot products with q4_1 / q5_1.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kBlock32];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Eight sub-blocks of 32 values; sub-block j has a 6-bit scale sc_j and a 6-bit min m_j packed in scales[12]:
//   j < 4:  sc_j = scales[j] & 63,  m_j = scales[j + 4] & 63
//   j >= 4: sc_j = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4,
//           m_j  = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4
// value = d * sc_j * q - dmin * m_j. qs holds 4 chunks of 64 values: byte l of chunk c (qs[32c + l]) has
// value 64c + l in its low nibble (sub-block 2c) and value 64c + 32 + l in its high nibble (sub-block 2c + 1).
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kBlockK / 2];
};
static_assert(sizeof(BlockQ4K) == 144);

// As q4_K with a fifth bit per value: bit 2c of qh[l] for value 64c + l, bit 2c + 1 for value 64c + 32 + l.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kBlockK / 8];
  uint8_t qs[kBlockK / 2];
};
static_assert(sizeof(BlockQ5K) == 176);

// Sixteen groups of 16 values with signed 8-bit scales: value v = d * scales[v / 16] * (q6(v) - 32).
// Two halves h of 128 values, each using ql[64h .. 64h + 63] and qh[32h .. 32h + 31]; for l in 0..31:
//   value 128h + l      : low nibble of ql[64h + l],       bits 0-1 of qh[32h + l]
//   value 128h + l + 32 : low nibble of ql[64h + l + 32],  bits 2-3
//   value 128h + l + 64 : high nibble of ql[64h + l],      bits 4-5
//   value 128h + l + 96 : high nibble of ql[64h + l + 32], bits 6-7
struct BlockQ6K {
  uint8_t ql[kBlockK / 2];
  uint8_t qh[kBlockK / 4];
  int8_t scales[kBlockK / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 210);

// Sixteen groups of 16 values, each with a 4-bit scale (low nibble of scales[g]) and a 4-bit min (high nibble):
// value v = d * (scales[v / 16] & 15) * q2(v) - dmin * (scales[v / 16] >> 4). Two halves h of 128 values use
// qs[32h .. 32h + 31]: value 128h + 32k + l is bits 2k, 2k + 1 of qs[32h + l] (k = 0..3, l = 0..31).
struct BlockQ2K {
  uint8_t scales[kBlockK / 16];
  uint8_t qs[kBlockK / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2K) == 84);

// Sixteen groups of 16 values with signed 6-bit scales: value v = d * (sc_{v/16} - 32) * (q2(v) - 4 * (1 - hbit(v))).
// q2(v) as in q2_K (two halves of 128 values over qs[32h ..]); hbit(v) is bit v / 32 of hmask[v % 32], and a
// clear bit subtracts 4. Scale j (0..15) takes its low 4 bits from scales[j % 8] (low nibble for j < 8, high
// nibble for j >= 8) and its high 2 bits from bits 2 (j / 4), 2 (j / 4) + 1 of scales[8 + j % 4].
struct BlockQ3K {
  uint8_t hmask[kBlockK / 8];
  uint8_t qs[kBlockK / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3K) == 110);

// The 16 levels of iq4_nl / iq4_xs: a non-uniform 4-bit code, denser near zero, applied as value = d * level.
inline constexpr int8_t kIq4NlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// value[j] = d * kIq4NlLevels[nibble j]; nibbles as in q4_0 (byte i: value i low, value i + 16 high).
struct BlockIQ4NL {
  uint16_t d;
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockIQ4NL) == 18);

// Eight sub-blocks of 32 values with signed 6-bit scales: value = d * (ls_j - 32) * kIq4NlLevels[nibble].
// ls_j = (nibble j % 2 of scales_l[j / 2], low first) | (bits 2j, 2j + 1 of scales_h) << 4. Sub-block j uses
// qs[16j .. 16j + 15]: value 32j + i is the low nibble of qs[16j + i], value 32j + 16 + i its high nibble.
struct BlockIQ4XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kBlockK / 64];
  uint8_t qs[kBlockK / 2];
};
static_assert(sizeof(BlockIQ4XS) == 136);

// The i-quants below store groups of 8 (iq2, iq1) or 4 (iq3) values as indices into fixed lattice codebooks
// (tensor/quant/iq_grids.h). Sign codes of 7 bits (iq2_xxs, iq2_xs, iq3_xxs) give the 8 signs of a group of 8
// through even_parity_signs; a set bit j makes value j negative. Sub-block scales ls are 3 or 4 bits.

// Eight sub-blocks j of 32 values, each in qs[4j .. 4j + 3] read as two little-endian 32-bit words w0, w1:
// byte l of w0 indexes kIq2XxsGrid for values 32j + 8l .. 32j + 8l + 7, bits 7l .. 7l + 6 of w1 are their sign
// code, bits 28..31 of w1 are ls: value = d * (2 ls + 1) / 8 * grid * sign.
struct BlockIQ2XXS {
  uint16_t d;
  uint16_t qs[kBlockK / 8];
};
static_assert(sizeof(BlockIQ2XXS) == 66);

// qs[g] for the group of values 8g .. 8g + 7: bits 0..8 index kIq2XsGrid, bits 9..15 are the sign code. The
// low nibble of scales[j] is ls for values 32j .. 32j + 15, the high nibble for 32j + 16 .. 32j + 31;
// value = d * (2 ls + 1) / 8 * grid * sign.
struct BlockIQ2XS {
  uint16_t d;
  uint16_t qs[kBlockK / 8];
  uint8_t scales[kBlockK / 32];
};
static_assert(sizeof(BlockIQ2XS) == 74);

// Group g of 8 values indexes kIq2SGrid with qs[g] | (bits 2 (g % 4), 2 (g % 4) + 1 of qh[g / 4]) << 8; its
// signs are the bits of qs[32 + g] (plain, no parity); scales as iq2_xs.
struct BlockIQ2S {
  uint16_t d;
  uint8_t qs[kBlockK / 4];
  uint8_t qh[kBlockK / 32];
  uint8_t scales[kBlockK / 32];
};
static_assert(sizeof(BlockIQ2S) == 82);

// qs[g] (g < 64) indexes kIq3XxsGrid for the 4 values 4g .. 4g + 3; qs[64 ..] holds eight little-endian 32-bit
// words, word j for sub-block j as w1 of iq2_xxs (four sign codes, ls in bits 28..31):
// value = d * (2 ls + 1) / 4 * grid * sign.
struct BlockIQ3XXS {
  uint16_t d;
  uint8_t qs[3 * kBlockK / 8];
};
static_assert(sizeof(BlockIQ3XXS) == 98);

// Group g of 4 values indexes kIq3SGrid with qs[g] | (bit g % 8 of qh[g / 8]) << 8; value v is negative where
// bit v % 8 of signs[v / 8] is set; ls of sub-block j is nibble j % 2 (low first) of scales[j / 2]:
// value = d * (2 ls + 1) * grid * sign.
struct BlockIQ3S {
  uint16_t d;
  uint8_t qs[kBlockK / 4];
  uint8_t qh[kBlockK / 32];
  uint8_t signs[kBlockK / 8];
  uint8_t scales[kBlockK / 64];
};
static_assert(sizeof(BlockIQ3S) == 110);

// The iq1 types: grid values are -1, 0 or 1, shifted by delta = +-1/8 per group.
// iq1_s: group g of 8 values indexes kIq1SGrid with qs[g] | (bits 3 (g % 4) .. 3 (g % 4) + 2 of qh[g / 4]) << 8;
// bits 12..14 of qh[j] are ls of sub-block j, bit 15 the sign of its delta (set: -1/8):
// value = d * (2 ls + 1) * (grid + delta).
struct BlockIQ1S {
  uint16_t d;
  uint8_t qs[kBlockK / 8];
  uint16_t qh[kBlockK / 32];
};
static_assert(sizeof(BlockIQ1S) == 50);

// iq1_m: group g indexes kIq1SGrid with qs[g] | (bits 0..2 of nibble g % 2 of qh[g / 2]) << 8, bit 3 of that
// nibble is the sign of the group's delta; scales holds four little-endian 16-bit words: bits 3k .. 3k + 2 of
// word i are ls for the 16 values 16 (4i + k) ..; the fp16 d is the top nibbles of the words (word 0 gives bits
// 0..3, word 3 bits 12..15): value = d * (2 ls + 1) * (grid + delta).
struct BlockIQ1M {
  uint8_t qs[kBlockK / 8];
  uint8_t qh[kBlockK / 16];
  uint8_t scales[kBlockK / 32];
};
static_assert(sizeof(BlockIQ1M) == 56);

// Ternary weights, value = d * (t - 1) with t in 0..2, five base-3 digits per byte: digit k of a byte x is
// ((uint8_t)(x * 3^k) * 3) >> 8 (the byte holds the digits as a fixed-point fraction, x = ceil(256 * code / 243),
// code = sum t_k 3^(4 - k)). qs[0..31] give values 32k + l (digit k of qs[l]), qs[32..47] values 160 + 16k + l
// (digit k of qs[32 + l]), qh[0..3] values 240 + 4k + l for digits k = 0..3 of qh[l].
struct BlockTQ1_0 {
  uint8_t qs[(kBlockK - 4 * kBlockK / 64) / 5];
  uint8_t qh[kBlockK / 64];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54);

// Ternary weights at 2 bits: value = d * (q2(v) - 1), q2(v) as in q2_K (a stored 3 gives 2).
struct BlockTQ2_0 {
  uint8_t qs[kBlockK / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66);

// OCP microscaling fp4: 32 e2m1 values sharing a power-of-two scale byte e (e8m0). Stored here as ggml does:
// the e2m1 values doubled to integers (kMxfp4Levels) and the scale halved, value = 2^(e - 128) * level; nibbles
// as in q4_0.
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kBlock32 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// Activations for dot products with k-quants: value[j] = d * qs[j]; bsums[g] = sum of qs[16g .. 16g + 15].
struct BlockQ8K {
  float d;
  int8_t qs[kBlockK];
  int16_t bsums[kBlockK / 16];
};
static_assert(sizeof(BlockQ8K) == 292);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a q4_K / q5_K block.
inline void unpack_k_scale_min(const uint8_t* scales, int j, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The signed scale (-32..31) of group j (0..15) of a q3_K block.
inline int q3_k_scale(const uint8_t* scales, int j) {
  const int low = (scales[j % 8] >> (4 * (j / 8))) & 15;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The signed scale (-32..31) of sub-block j (0..7) of an iq4_xs block.
inline int iq4_xs_scale(const BlockIQ4XS& block, int j) {
  const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int high = (block.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// The grid index of group g of an iq2_s (8 values), iq3_s (4 values) or iq1_s (8 values) block, and the 4-bit
// nibble of group g of an iq1_m block (bits 0..2: the index's bits 8..10; bit 3: the delta's sign).
inline int iq2_s_grid_index(const BlockIQ2S& block, int g) {
  return block.qs[g] | (((block.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
}
inline int iq3_s_grid_index(const BlockIQ3S& block, int g) {
  return block.qs[g] | (((block.qh[g / 8] >> (g % 8)) & 1) << 8);
}
inline int iq1_s_grid_index(const BlockIQ1S& block, int g) {
  return block.qs[g] | (((block.qh[g / 4] >> (3 * (g % 4))) & 7) << 8);
}
inline int iq1_m_nibble(const BlockIQ1M& block, int g) { return (block.qh[g / 2] >> (4 * (g % 2))) & 15; }

// ls (0..15) of group g (8 values) of an iq2_xs / iq2_s block, and of sub-block j of an iq3_s block.
template <typename Block>
int iq2_scale_ls(const Block& block, int g) {
  return (block.scales[g / 4] >> (4 * ((g / 2) % 2))) & 15;
}
inline int iq3_s_scale_ls(const BlockIQ3S& block, int j) { return (block.scales[j / 2] >> (4 * (j % 2))) & 15; }

// The fp16 bits of an iq1_m block's d, gathered from the top nibbles of its scale words.
inline uint16_t iq1_m_d_bits(const BlockIQ1M& block) {
  uint16_t word[4];
  std::memcpy(word, block.scales, sizeof(word));
  return static_cast<uint16_t>((word[0] >> 12) | ((word[1] >> 8) & 0x00F0) | ((word[2] >> 4) & 0x0F00) |
                               (word[3] & 0xF000));
}

// ls (0..7) of the 16 values 16s .. 16s + 15 (s = 0..15) of an iq1_m block.
inline int iq1_m_scale(const BlockIQ1M& block, int s) {
  uint16_t word;
  std::memcpy(&word, block.scales + 2 * (s / 4), sizeof(word));
  return (word >> (3 * (s % 4))) & 7;
}

// Digit k (0..4) of a tq1_0 byte, 0..2.
inline int tq1_0_digit(uint8_t byte, int k) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(byte * kPow3[k]);
  return (shifted * 3) >> 8;
}

// Half the e8m0 scale of an mxfp4 block, 2^(e - 128), as a float (e = 0 and 1 give subnormals).
inline float e8m0_half_to_fp32(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

}  // namespace rwd::tensor::quant
