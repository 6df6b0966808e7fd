// The lattice codebooks of the i-quant types (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m): a block
// stores, per group of 8 (iq2, iq1) or 4 (iq3) values, an index into one of these tables; the entry holds the
// group's magnitudes (iq2: 8, 25 or 43; iq3_xxs: 4 … 62; iq3_s: the odd numbers 1 … 15) or, for iq1, signed
// values -1, 0, 1. Byte j of an entry (little-endian) is value j of the group, as ggml's kernels load them.
// The tables are part of the format, so they come from an independent copy of it (tools/quant/make_iq_grids.py,
// from the PyPI gguf package) rather than being retyped here.
#pragma once

#include <cstdint>

namespace rwd::tensor::quant {

extern const uint64_t kIq2XxsGrid[256];
extern const uint64_t kIq2XsGrid[512];
extern const uint64_t kIq2SGrid[1024];
extern const uint32_t kIq3XxsGrid[256];
extern const uint32_t kIq3SGrid[512];
extern const uint64_t kIq1SGrid[2048];  // iq1_s and iq1_m; bytes are int8 (-1 is 0xff)

// The 8 sign bits of a group of iq2_xxs / iq2_xs / iq3_xxs values from its 7-bit code: the eighth bit makes the
// number of minus signs even (ggml's ksigns_iq2xs table, computed). Bit j set: value j is negative.
constexpr uint8_t even_parity_signs(uint32_t code7) {
  const uint32_t bits = code7 & 127;
  return static_cast<uint8_t>(bits | ((__builtin_popcount(bits) & 1) << 7));
}

}  // namespace rwd::tensor::quant
