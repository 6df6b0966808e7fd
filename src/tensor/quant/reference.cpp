// Reference (de)quantizers for every type in the traits table. Dequantizers decode the layouts documented in
// blocks.h; quantizers pick scales by a small least-squares search (quant_fit.h) and store values rounded to
// nearest against the scales as they are stored (fp16-rounded), so the error is the format's, not ours.
// Speed is not a goal here; the q8 quantizers double as the scalar activation quantizers of kernels/cpu,
// whose AVX2 versions reproduce them byte for byte.
#include "tensor/quant/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "tensor/quant/blocks.h"
#include "tensor/quant/iq_grids.h"
#include "tensor/quant/quant_fit.h"

namespace rwd::tensor::quant {
namespace {

uint32_t load_u32(const uint8_t* bytes) {
  uint32_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

void store_u32(uint8_t* bytes, uint32_t word) { std::memcpy(bytes, &word, sizeof(word)); }

// Packs 32 levels (0..15 each) two per byte: value j in the low nibble of byte j, value j + 16 in the high.
void pack_nibbles_32(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((levels[j] & 15) | ((levels[j + 16] & 15) << 4));
}

// Bit j of the result is bit 4 of level j (the fifth bit of q5_0 / q5_1 values).
uint32_t fifth_bits_32(const uint8_t* levels) {
  uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
  return bits;
}

// Symmetric blocks (q4_0, q5_0): value = d * (level - offset), level in [0, 2 * offset - 1].
void quantize_symmetric_32(const float* x, int offset, uint16_t& d_bits, uint8_t* levels) {
  d_bits = fp32_to_fp16(fit_symmetric(x, kBlock32, offset, nullptr));
  const float d = fp16_to_fp32(d_bits);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock32; ++j) {
    levels[j] = static_cast<uint8_t>(round_clamp(x[j] * inv_d, -offset, offset - 1) + offset);
  }
}

// Affine blocks (q4_1, q5_1): value = d * level + m, level in [0, n_max].
void quantize_affine_32(const float* x, int n_max, uint16_t& d_bits, uint16_t& m_bits, uint8_t* levels) {
  const AffineFit fit = fit_affine(x, kBlock32, n_max, /*offset_at_most_zero=*/false);
  d_bits = fp32_to_fp16(fit.scale);
  m_bits = fp32_to_fp16(fit.offset);
  const float d = fp16_to_fp32(d_bits);
  const float m = fp16_to_fp32(m_bits);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock32; ++j) levels[j] = static_cast<uint8_t>(round_clamp((x[j] - m) * inv_d, 0, n_max));
}

// Shared by q8_0 and q8_1; returns the sum of the levels.
int quantize_q8_32(const float* x, uint16_t& d_bits, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock32; ++j) amax = std::max(amax, std::fabs(x[j]));
  d_bits = fp32_to_fp16(amax / 127.0f);
  const float d = fp16_to_fp32(d_bits);
  const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < kBlock32; ++j) {
    qs[j] = static_cast<int8_t>(round_clamp(x[j] * inv_d, -127, 127));
    sum += qs[j];
  }
  return sum;
}

// q4_K / q5_K: fits each sub-block of 32 to d_j * level - m_j, stores d_j and m_j as 6-bit multiples of two
// fp16 super-scales, then requantizes every value against the scales as stored. levels gets 256 entries.
void quantize_k_affine(const float* x, int n_max, uint16_t& d_bits, uint16_t& dmin_bits, uint8_t* scales,
                       uint8_t* levels) {
  float sub_scale[8];
  float sub_min[8];  // positive: subtracted
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const AffineFit fit = fit_affine(x + 32 * j, 32, n_max, /*offset_at_most_zero=*/true);
    sub_scale[j] = std::max(fit.scale, 0.0f);
    sub_min[j] = -fit.offset;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  d_bits = fp32_to_fp16(max_scale / 63.0f);
  dmin_bits = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(d_bits);
  const float dmin = fp16_to_fp32(dmin_bits);
  uint8_t sc[8];
  uint8_t mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0.0f ? round_clamp(sub_scale[j] / d, 0, 63) : 0);
    mn[j] = static_cast<uint8_t>(dmin > 0.0f ? round_clamp(sub_min[j] / dmin, 0, 63) : 0);
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    const float scale = d * static_cast<float>(sc[j]);
    const float min = dmin * static_cast<float>(mn[j]);
    const float inv_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int l = 0; l < 32; ++l) {
      levels[32 * j + l] = static_cast<uint8_t>(round_clamp((x[32 * j + l] + min) * inv_scale, 0, n_max));
    }
  }
}

// Writes the nibbles of 256 k-quant levels in the q4_K / q5_K chunk order (see blocks.h).
void pack_k_nibbles(const uint8_t* levels, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>((levels[64 * c + l] & 15) | ((levels[64 * c + 32 + l] & 15) << 4));
    }
  }
}

}  // namespace

// ---- plain types ----

void to_float_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void to_float_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void to_float_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void from_float_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void from_float_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void from_float_bf16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

// ---- blocks of 32 ----

void to_float_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((blocks[b].qs[j] & 15) - 8);
      dst[j + 16] = d * static_cast<float>((blocks[b].qs[j] >> 4) - 8);
    }
  }
}

void to_float_q4_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float m = fp16_to_fp32(blocks[b].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(blocks[b].qs[j] & 15) + m;
      dst[j + 16] = d * static_cast<float>(blocks[b].qs[j] >> 4) + m;
    }
  }
}

void to_float_q5_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    const uint32_t qh = load_u32(blocks[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int low = (blocks[b].qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
      const int high = (blocks[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(low - 16);
      dst[j + 16] = d * static_cast<float>(high - 16);
    }
  }
}

void to_float_q5_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float m = fp16_to_fp32(blocks[b].m);
    const uint32_t qh = load_u32(blocks[b].qh);
    for (int j = 0; j < 16; ++j) {
      const int low = (blocks[b].qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
      const int high = (blocks[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * static_cast<float>(low) + m;
      dst[j + 16] = d * static_cast<float>(high) + m;
    }
  }
}

void to_float_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kBlock32; ++j) dst[j] = d * static_cast<float>(blocks[b].qs[j]);
  }
}

void to_float_q8_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_1*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kBlock32; ++j) dst[j] = d * static_cast<float>(blocks[b].qs[j]);
  }
}

void from_float_q4_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) {
    uint8_t levels[kBlock32];
    quantize_symmetric_32(src, 8, blocks[b].d, levels);
    pack_nibbles_32(levels, blocks[b].qs);
  }
}

void from_float_q4_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) {
    uint8_t levels[kBlock32];
    quantize_affine_32(src, 15, blocks[b].d, blocks[b].m, levels);
    pack_nibbles_32(levels, blocks[b].qs);
  }
}

void from_float_q5_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) {
    uint8_t levels[kBlock32];
    quantize_symmetric_32(src, 16, blocks[b].d, levels);
    pack_nibbles_32(levels, blocks[b].qs);
    store_u32(blocks[b].qh, fifth_bits_32(levels));
  }
}

void from_float_q5_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) {
    uint8_t levels[kBlock32];
    quantize_affine_32(src, 31, blocks[b].d, blocks[b].m, levels);
    pack_nibbles_32(levels, blocks[b].qs);
    store_u32(blocks[b].qh, fifth_bits_32(levels));
  }
}

void from_float_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) quantize_q8_32(src, blocks[b].d, blocks[b].qs);
}

void from_float_q8_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kBlock32; ++b, src += kBlock32) {
    const int sum = quantize_q8_32(src, blocks[b].d, blocks[b].qs);
    blocks[b].s = fp32_to_fp16(fp16_to_fp32(blocks[b].d) * static_cast<float>(sum));
  }
}

// ---- k-quants (super-blocks of 256) ----

void to_float_q4_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float dmin = fp16_to_fp32(blocks[b].dmin);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc_low, m_low, sc_high, m_high;
      unpack_k_scale_min(blocks[b].scales, 2 * c, sc_low, m_low);
      unpack_k_scale_min(blocks[b].scales, 2 * c + 1, sc_high, m_high);
      const float d_low = d * sc_low, min_low = dmin * m_low;
      const float d_high = d * sc_high, min_high = dmin * m_high;
      const uint8_t* qs = blocks[b].qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        dst[64 * c + l] = d_low * static_cast<float>(qs[l] & 15) - min_low;
        dst[64 * c + 32 + l] = d_high * static_cast<float>(qs[l] >> 4) - min_high;
      }
    }
  }
}

void to_float_q5_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    const float dmin = fp16_to_fp32(blocks[b].dmin);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc_low, m_low, sc_high, m_high;
      unpack_k_scale_min(blocks[b].scales, 2 * c, sc_low, m_low);
      unpack_k_scale_min(blocks[b].scales, 2 * c + 1, sc_high, m_high);
      const float d_low = d * sc_low, min_low = dmin * m_low;
      const float d_high = d * sc_high, min_high = dmin * m_high;
      const uint8_t* qs = blocks[b].qs + 32 * c;
      const uint8_t* qh = blocks[b].qh;
      for (int l = 0; l < 32; ++l) {
        const int low = (qs[l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4);
        const int high = (qs[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        dst[64 * c + l] = d_low * static_cast<float>(low) - min_low;
        dst[64 * c + 32 + l] = d_high * static_cast<float>(high) - min_high;
      }
    }
  }
}

void to_float_q6_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blocks[b].ql + 64 * h;
      const uint8_t* qh = blocks[b].qh + 32 * h;
      float* out = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) {
          const int v = 32 * k + l;
          out[v] = d * static_cast<float>(blocks[b].scales[(128 * h + v) / 16]) * static_cast<float>(q[k] - 32);
        }
      }
    }
  }
}

void to_float_q8_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    for (int j = 0; j < kBlockK; ++j) dst[j] = blocks[b].d * static_cast<float>(blocks[b].qs[j]);
  }
}

void from_float_q4_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4K*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b, src += kBlockK) {
    uint8_t levels[kBlockK];
    quantize_k_affine(src, 15, blocks[b].d, blocks[b].dmin, blocks[b].scales, levels);
    pack_k_nibbles(levels, blocks[b].qs);
  }
}

void from_float_q5_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5K*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b, src += kBlockK) {
    uint8_t levels[kBlockK];
    quantize_k_affine(src, 31, blocks[b].d, blocks[b].dmin, blocks[b].scales, levels);
    pack_k_nibbles(levels, blocks[b].qs);
    std::memset(blocks[b].qh, 0, sizeof(blocks[b].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        blocks[b].qh[l] |= static_cast<uint8_t>(((levels[64 * c + l] >> 4) & 1) << (2 * c));
        blocks[b].qh[l] |= static_cast<uint8_t>(((levels[64 * c + 32 + l] >> 4) & 1) << (2 * c + 1));
      }
    }
  }
}

void from_float_q6_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ6K*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b, src += kBlockK) {
    BlockQ6K& block = blocks[b];
    float group_scale[16];
    float extreme = 0.0f;  // the group scale of largest magnitude, with its sign
    for (int g = 0; g < 16; ++g) {
      group_scale[g] = fit_symmetric(src + 16 * g, 16, 32, nullptr);
      if (std::fabs(group_scale[g]) > std::fabs(extreme)) extreme = group_scale[g];
    }
    // The extreme group gets the 8-bit scale -128, so the full signed range is used.
    block.d = fp32_to_fp16(extreme != 0.0f ? extreme / -128.0f : 0.0f);
    const float d = fp16_to_fp32(block.d);
    uint8_t levels[kBlockK];
    for (int g = 0; g < 16; ++g) {
      block.scales[g] = static_cast<int8_t>(d != 0.0f ? round_clamp(group_scale[g] / d, -128, 127) : 0);
      const float scale = d * static_cast<float>(block.scales[g]);
      const float inv_scale = scale != 0.0f ? 1.0f / scale : 0.0f;
      for (int l = 0; l < 16; ++l) {
        levels[16 * g + l] = static_cast<uint8_t>(round_clamp(src[16 * g + l] * inv_scale, -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* lv = levels + 128 * h;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * h + l] = static_cast<uint8_t>((lv[l] & 15) | ((lv[l + 64] & 15) << 4));
        block.ql[64 * h + l + 32] = static_cast<uint8_t>((lv[l + 32] & 15) | ((lv[l + 96] & 15) << 4));
        block.qh[32 * h + l] = static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) | ((lv[l + 64] >> 4) << 4) |
                                                    ((lv[l + 96] >> 4) << 6));
      }
    }
  }
}

void from_float_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8K*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b, src += kBlockK) {
    float amax = 0.0f;
    for (int j = 0; j < kBlockK; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = d;
    for (int j = 0; j < kBlockK; ++j) blocks[b].qs[j] = static_cast<int8_t>(round_clamp(src[j] * inv_d, -127, 127));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blocks[b].qs[16 * g + l];
      blocks[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

// ---- read-only types: dequantizers only ----
// Each value is computed with the float operations, in the order, that ggml's reference dequantizers use (scale
// products first, then times the level, minus the min), so the results match theirs bit for bit.

void to_float_q2_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockQ2K& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    for (int v = 0; v < kBlockK; ++v) {
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      const int q = (block.qs[32 * h + l] >> (2 * k)) & 3;
      const uint8_t scale_min = block.scales[v / 16];
      const float scale = d * static_cast<float>(scale_min & 15);
      const float min = dmin * static_cast<float>(scale_min >> 4);
      dst[v] = scale * static_cast<float>(q) - min;
    }
  }
}

void to_float_q3_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3K*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockQ3K& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    for (int v = 0; v < kBlockK; ++v) {
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      const int low = (block.qs[32 * h + l] >> (2 * k)) & 3;
      const int high_bit = (block.hmask[l] >> (v / 32)) & 1;
      const float scale = d * static_cast<float>(q3_k_scale(block.scales, v / 16));
      dst[v] = scale * static_cast<float>(low - (high_bit != 0 ? 0 : 4));
    }
  }
}

void to_float_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4NL*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIq4NlLevels[blocks[b].qs[j] & 15]);
      dst[j + 16] = d * static_cast<float>(kIq4NlLevels[blocks[b].qs[j] >> 4]);
    }
  }
}

void to_float_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4XS*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockIQ4XS& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    for (int j = 0; j < 8; ++j) {
      const float scale = d * static_cast<float>(iq4_xs_scale(block, j));
      const uint8_t* qs = block.qs + 16 * j;
      for (int i = 0; i < 16; ++i) {
        dst[32 * j + i] = scale * static_cast<float>(kIq4NlLevels[qs[i] & 15]);
        dst[32 * j + 16 + i] = scale * static_cast<float>(kIq4NlLevels[qs[i] >> 4]);
      }
    }
  }
}

void to_float_tq1_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockTQ1_0*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockTQ1_0& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    auto put = [&](int v, uint8_t byte, int k) { dst[v] = static_cast<float>(tq1_0_digit(byte, k) - 1) * d; };
    for (int k = 0; k < 5; ++k) {
      for (int l = 0; l < 32; ++l) put(32 * k + l, block.qs[l], k);
      for (int l = 0; l < 16; ++l) put(160 + 16 * k + l, block.qs[32 + l], k);
    }
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 4; ++l) put(240 + 4 * k + l, block.qh[l], k);
    }
  }
}

void to_float_tq2_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockTQ2_0*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int v = 0; v < kBlockK; ++v) {
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      const int q = (blocks[b].qs[32 * h + l] >> (2 * k)) & 3;
      dst[v] = static_cast<float>(q - 1) * d;
    }
  }
}

void to_float_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kBlock32; ++b, dst += kBlock32) {
    const float d = e8m0_half_to_fp32(blocks[b].e);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kMxfp4Levels[blocks[b].qs[j] & 15]);
      dst[j + 16] = d * static_cast<float>(kMxfp4Levels[blocks[b].qs[j] >> 4]);
    }
  }
}

// ---- i-quants: groups of values from lattice codebooks ----
// As above, each value is computed with ggml's float operations in ggml's order: the sub-block scale
// d * (ls + 0.5) * 0.25 (iq2), * 0.5 (iq3_xxs), d * (2 ls + 1) (iq3_s, iq1), then times the grid value, then
// the sign.

namespace {

// Writes the 8 values of grid entry `entry` (bytes) scaled by scale with the signs in the bits of `signs`.
void put_signed_group(uint64_t entry, uint8_t signs, float scale, int count, float* dst) {
  for (int j = 0; j < count; ++j) {
    const auto magnitude = static_cast<float>((entry >> (8 * j)) & 0xFF);
    dst[j] = scale * magnitude * ((signs >> j) & 1 ? -1.0f : 1.0f);
  }
}

// iq1: the 8 values d_sub * (grid + delta) of grid entry `entry` (int8 bytes -1, 0, 1).
void put_iq1_group(uint64_t entry, float d_sub, float delta, float* dst) {
  for (int j = 0; j < 8; ++j) {
    const auto level = static_cast<int8_t>((entry >> (8 * j)) & 0xFF);
    dst[j] = d_sub * (static_cast<float>(level) + delta);
  }
}

constexpr float kIq1Delta = 0.125f;

}  // namespace

void to_float_iq2_xxs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2XXS*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 8; ++j) {
      const auto* words = reinterpret_cast<const uint8_t*>(blocks[b].qs + 4 * j);
      const uint32_t indices = load_u32(words), codes = load_u32(words + 4);
      const float scale = d * (0.5f + static_cast<float>(codes >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        put_signed_group(kIq2XxsGrid[(indices >> (8 * l)) & 0xFF], even_parity_signs(codes >> (7 * l)), scale, 8,
                         dst + 32 * j + 8 * l);
      }
    }
  }
}

void to_float_iq2_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2XS*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int g = 0; g < 32; ++g) {
      const float scale = d * (0.5f + static_cast<float>(iq2_scale_ls(blocks[b], g))) * 0.25f;
      const uint16_t code = blocks[b].qs[g];
      put_signed_group(kIq2XsGrid[code & 511], even_parity_signs(code >> 9), scale, 8, dst + 8 * g);
    }
  }
}

void to_float_iq2_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2S*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int g = 0; g < 32; ++g) {
      const float scale = d * (0.5f + static_cast<float>(iq2_scale_ls(blocks[b], g))) * 0.25f;
      put_signed_group(kIq2SGrid[iq2_s_grid_index(blocks[b], g)], blocks[b].qs[32 + g], scale, 8, dst + 8 * g);
    }
  }
}

void to_float_iq3_xxs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ3XXS*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 8; ++j) {
      const uint32_t codes = load_u32(blocks[b].qs + 64 + 4 * j);
      const float scale = d * (0.5f + static_cast<float>(codes >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = even_parity_signs(codes >> (7 * l));
        const uint8_t* indices = blocks[b].qs + 8 * j + 2 * l;
        float* out = dst + 32 * j + 8 * l;
        put_signed_group(kIq3XxsGrid[indices[0]], signs, scale, 4, out);
        put_signed_group(kIq3XxsGrid[indices[1]], static_cast<uint8_t>(signs >> 4), scale, 4, out + 4);
      }
    }
  }
}

void to_float_iq3_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ3S*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockIQ3S& block = blocks[b];
    const float d = fp16_to_fp32(block.d);
    for (int g = 0; g < 64; ++g) {
      const float scale = d * static_cast<float>(1 + 2 * iq3_s_scale_ls(block, g / 8));
      const auto signs = static_cast<uint8_t>(block.signs[g / 2] >> (4 * (g % 2)));
      put_signed_group(kIq3SGrid[iq3_s_grid_index(block, g)], signs, scale, 4, dst + 4 * g);
    }
  }
}

void to_float_iq1_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ1S*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 8; ++j) {
      const uint16_t qh = blocks[b].qh[j];
      const float d_sub = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) != 0 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l) {
        put_iq1_group(kIq1SGrid[iq1_s_grid_index(blocks[b], 4 * j + l)], d_sub, delta, dst + 32 * j + 8 * l);
      }
    }
  }
}

void to_float_iq1_m(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ1M*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b, dst += kBlockK) {
    const BlockIQ1M& block = blocks[b];
    const float d = fp16_to_fp32(iq1_m_d_bits(block));
    for (int g = 0; g < 32; ++g) {
      const float d_sub = d * static_cast<float>(2 * iq1_m_scale(block, g / 2) + 1);
      const int nibble = iq1_m_nibble(block, g);
      const float delta = (nibble & 8) != 0 ? -kIq1Delta : kIq1Delta;
      put_iq1_group(kIq1SGrid[block.qs[g] | ((nibble & 7) << 8)], d_sub, delta, dst + 8 * g);
    }
  }
}

}  // namespace rwd::tensor::quant
