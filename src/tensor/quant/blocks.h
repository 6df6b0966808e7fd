// Block structs of the quantized types rewind reads and writes, byte for byte as llama.cpp (ggml) lays them
// out in GGUF files, with static_asserts on their sizes. fp16 fields are raw IEEE half bits (base/half.h).
// The meaning of each bit is documented here once; reference.cpp and the kernels decode it.
// Not here: the (de)quantizers (reference.h) and the dot-product kernels (kernels/cpu).
#pragma once

#include <cstdint>

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

}  // namespace rwd::tensor::quant
