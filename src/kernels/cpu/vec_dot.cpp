// Scalar dot-product kernels (plain x86-64, any CPU): one weight row against one activation row in the weight
// type's partner format. Integer sums per block, float accumulation over blocks in block order; float rows
// use eight interleaved partial sums. The AVX2 versions live in vec_dot_avx2.cpp; dispatch.cpp chooses.
#include <cstring>

#include "base/half.h"
#include "kernels/cpu/vec_dot_impl.h"
#include "tensor/quant/blocks.h"
#include "tensor/quant/iq_grids.h"
#include "tensor/quant/reference.h"

namespace rwd::kernels::cpu::scalar {
namespace {

using tensor::DType;
namespace q = tensor::quant;

// Sums w[i] * x[i] into eight partial sums by i % 8 (the tail joins them the same way), then adds the partial
// sums pairwise; the order depends only on n.
template <typename LoadWeight>
float dot_float_row(int64_t n, const float* x, LoadWeight load_weight) {
  float partial[8] = {};
  for (int64_t i = 0; i < n; ++i) partial[i % 8] += load_weight(i) * x[i];
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

float dot_f32(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const float*>(weight);
  return dot_float_row(n, static_cast<const float*>(activation), [w](int64_t i) { return w[i]; });
}

float dot_f16(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const uint16_t*>(weight);
  return dot_float_row(n, static_cast<const float*>(activation), [w](int64_t i) { return fp16_to_fp32(w[i]); });
}

float dot_bf16(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const uint16_t*>(weight);
  return dot_float_row(n, static_cast<const float*>(activation), [w](int64_t i) { return bf16_to_fp32(w[i]); });
}

uint32_t load_u32(const uint8_t* bytes) {
  uint32_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

// Values j and j + 16 of a 32-value block with nibbles, with the fifth bits (zero for 4-bit types) of qh.
inline int low_value(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
}
inline int high_value(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
}

// Integer dot product of a 32-value nibble block (minus offset) with q8 values.
inline int nibble_block_dot(const uint8_t* qs, uint32_t qh, int offset, const int8_t* a) {
  int sum = 0;
  for (int j = 0; j < 16; ++j) {
    sum += (low_value(qs, qh, j) - offset) * a[j];
    sum += (high_value(qs, qh, j) - offset) * a[j + 16];
  }
  return sum;
}

float dot_q4_0(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ4_0*>(weight);
  const auto* a = static_cast<const q::BlockQ8_0*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const int dot = nibble_block_dot(w[b].qs, 0, 8, a[b].qs);
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
  }
  return sum;
}

float dot_q5_0(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ5_0*>(weight);
  const auto* a = static_cast<const q::BlockQ8_0*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const int dot = nibble_block_dot(w[b].qs, load_u32(w[b].qh), 16, a[b].qs);
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
  }
  return sum;
}

// q4_1 / q5_1: sum (d q + m) x = d_w d_a sum(q qa) + m_w s_a, with s_a = d_a sum(qa) stored by the quantizer.
float dot_q4_1(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ4_1*>(weight);
  const auto* a = static_cast<const q::BlockQ8_1*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const int dot = nibble_block_dot(w[b].qs, 0, 0, a[b].qs);
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
    sum += fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
  }
  return sum;
}

float dot_q5_1(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ5_1*>(weight);
  const auto* a = static_cast<const q::BlockQ8_1*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    const int dot = nibble_block_dot(w[b].qs, load_u32(w[b].qh), 0, a[b].qs);
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
    sum += fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
  }
  return sum;
}

float dot_q8_0(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ8_0*>(weight);
  const auto* a = static_cast<const q::BlockQ8_0*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    int dot = 0;
    for (int j = 0; j < q::kBlock32; ++j) dot += w[b].qs[j] * a[b].qs[j];
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
  }
  return sum;
}

// q4_K / q5_K: sum over sub-blocks j of d sc_j sum(q qa) - dmin m_j sum(qa), everything times d_a; the sums of
// qa come from the q8_K bsums (two groups of 16 per sub-block).
template <bool kFifthBit, typename Block>
float dot_k_affine(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const q::BlockQ8K*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlockK; ++b) {
    int scaled_dot = 0;
    int scaled_min = 0;
    for (int c = 0; c < 4; ++c) {
      uint8_t sc_low, m_low, sc_high, m_high;
      q::unpack_k_scale_min(w[b].scales, 2 * c, sc_low, m_low);
      q::unpack_k_scale_min(w[b].scales, 2 * c + 1, sc_high, m_high);
      const uint8_t* qs = w[b].qs + 32 * c;
      const int8_t* a_low = a[b].qs + 64 * c;
      const int8_t* a_high = a_low + 32;
      int dot_low = 0, dot_high = 0;
      for (int l = 0; l < 32; ++l) {
        int low = qs[l] & 15;
        int high = qs[l] >> 4;
        if constexpr (kFifthBit) {
          low |= ((w[b].qh[l] >> (2 * c)) & 1) << 4;
          high |= ((w[b].qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        dot_low += low * a_low[l];
        dot_high += high * a_high[l];
      }
      scaled_dot += sc_low * dot_low + sc_high * dot_high;
      scaled_min += m_low * (a[b].bsums[4 * c] + a[b].bsums[4 * c + 1]);
      scaled_min += m_high * (a[b].bsums[4 * c + 2] + a[b].bsums[4 * c + 3]);
    }
    sum += (fp16_to_fp32(w[b].d) * a[b].d) * static_cast<float>(scaled_dot);
    sum -= (fp16_to_fp32(w[b].dmin) * a[b].d) * static_cast<float>(scaled_min);
  }
  return sum;
}

float dot_q6_k(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ6K*>(weight);
  const auto* a = static_cast<const q::BlockQ8K*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlockK; ++b) {
    int group_dot[16] = {};
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* av = a[b].qs + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int v[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) group_dot[(128 * h + 32 * k + l) / 16] += (v[k] - 32) * av[32 * k + l];
      }
    }
    int scaled_dot = 0;
    for (int g = 0; g < 16; ++g) scaled_dot += w[b].scales[g] * group_dot[g];
    sum += (fp16_to_fp32(w[b].d) * a[b].d) * static_cast<float>(scaled_dot);
  }
  return sum;
}

// ---- read-only types ----

// iq4_nl / mxfp4: blocks of 32 whose nibbles index a table of levels; mxfp4's scale is a power of two.
float dot_iq4_nl(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockIQ4NL*>(weight);
  const auto* a = static_cast<const q::BlockQ8_0*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    int dot = 0;
    for (int j = 0; j < 16; ++j) {
      dot += q::kIq4NlLevels[w[b].qs[j] & 15] * a[b].qs[j];
      dot += q::kIq4NlLevels[w[b].qs[j] >> 4] * a[b].qs[j + 16];
    }
    sum += (fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
  }
  return sum;
}

float dot_mxfp4(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockMXFP4*>(weight);
  const auto* a = static_cast<const q::BlockQ8_0*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlock32; ++b) {
    int dot = 0;
    for (int j = 0; j < 16; ++j) {
      dot += q::kMxfp4Levels[w[b].qs[j] & 15] * a[b].qs[j];
      dot += q::kMxfp4Levels[w[b].qs[j] >> 4] * a[b].qs[j + 16];
    }
    sum += (q::e8m0_half_to_fp32(w[b].e) * fp16_to_fp32(a[b].d)) * static_cast<float>(dot);
  }
  return sum;
}

// Level v (0..3) of a q2_K / q3_K / tq2_0 super-block: bits 2k, 2k + 1 of qs[32h + l] (layout in blocks.h).
inline int two_bits(const uint8_t* qs, int v) {
  return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

// q2_K: sum over groups g of d sc_g sum(q qa) - dmin m_g bsum_g, everything times d_a.
float dot_q2_k(int64_t n, const void* weight, const void* activation) {
  const auto* w = static_cast<const q::BlockQ2K*>(weight);
  const auto* a = static_cast<const q::BlockQ8K*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlockK; ++b) {
    int scaled_dot = 0;
    int scaled_min = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int v = 16 * g; v < 16 * g + 16; ++v) dot += two_bits(w[b].qs, v) * a[b].qs[v];
      scaled_dot += (w[b].scales[g] & 15) * dot;
      scaled_min += (w[b].scales[g] >> 4) * a[b].bsums[g];
    }
    sum += (fp16_to_fp32(w[b].d) * a[b].d) * static_cast<float>(scaled_dot);
    sum -= (fp16_to_fp32(w[b].dmin) * a[b].d) * static_cast<float>(scaled_min);
  }
  return sum;
}

// The fp16 super-block scale d of a block (iq1_m keeps it in the top nibbles of its scales).
template <typename Block>
float weight_scale(const Block& block) {
  return fp16_to_fp32(block.d);
}
float weight_scale(const q::BlockIQ1M& block) { return fp16_to_fp32(q::iq1_m_d_bits(block)); }

// The symmetric super-block types: S = sum of (signed) scale * level * qa, exact; sum += (d_w d_a) (S k) with k
// the power of two (exact) that the i-quants' odd scales 2 ls + 1 stand for (1/8, 1/4; 1 elsewhere).
template <typename Block, typename SuperBlockSum>
float dot_k_symmetric(int64_t n, const void* weight, const void* activation, SuperBlockSum super_block_sum,
                      float sum_scale = 1.0f) {
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const q::BlockQ8K*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / q::kBlockK; ++b) {
    sum += (weight_scale(w[b]) * a[b].d) * (static_cast<float>(super_block_sum(w[b], a[b].qs)) * sum_scale);
  }
  return sum;
}

float dot_q3_k(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockQ3K>(n, weight, activation, [](const q::BlockQ3K& block, const int8_t* qa) {
    int total = 0;
    for (int g = 0; g < 16; ++g) {
      int dot = 0;
      for (int v = 16 * g; v < 16 * g + 16; ++v) {
        const int high_bit = (block.hmask[v % 32] >> (v / 32)) & 1;
        dot += (two_bits(block.qs, v) - (high_bit != 0 ? 0 : 4)) * qa[v];
      }
      total += q::q3_k_scale(block.scales, g) * dot;
    }
    return total;
  });
}

float dot_iq4_xs(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ4XS>(n, weight, activation, [](const q::BlockIQ4XS& block, const int8_t* qa) {
    int total = 0;
    for (int j = 0; j < 8; ++j) {
      int dot = 0;
      for (int i = 0; i < 16; ++i) {
        dot += q::kIq4NlLevels[block.qs[16 * j + i] & 15] * qa[32 * j + i];
        dot += q::kIq4NlLevels[block.qs[16 * j + i] >> 4] * qa[32 * j + 16 + i];
      }
      total += q::iq4_xs_scale(block, j) * dot;
    }
    return total;
  });
}

float dot_tq1_0(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockTQ1_0>(n, weight, activation, [](const q::BlockTQ1_0& block, const int8_t* qa) {
    int total = 0;
    for (int k = 0; k < 5; ++k) {
      for (int l = 0; l < 32; ++l) total += (q::tq1_0_digit(block.qs[l], k) - 1) * qa[32 * k + l];
      for (int l = 0; l < 16; ++l) total += (q::tq1_0_digit(block.qs[32 + l], k) - 1) * qa[160 + 16 * k + l];
    }
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 4; ++l) total += (q::tq1_0_digit(block.qh[l], k) - 1) * qa[240 + 4 * k + l];
    }
    return total;
  });
}

float dot_tq2_0(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockTQ2_0>(n, weight, activation, [](const q::BlockTQ2_0& block, const int8_t* qa) {
    int total = 0;
    for (int v = 0; v < q::kBlockK; ++v) total += (two_bits(block.qs, v) - 1) * qa[v];
    return total;
  });
}

// ---- i-quants: groups of 8 or 4 values from the codebooks of tensor/quant/iq_grids.h ----

// The dot of `count` grid magnitudes (bytes of entry) carrying the signs in the bits of `signs` with qa.
int signed_group_dot(uint64_t entry, uint32_t signs, int count, const int8_t* qa) {
  int dot = 0;
  for (int j = 0; j < count; ++j) {
    const int magnitude = static_cast<int>((entry >> (8 * j)) & 0xFF);
    dot += ((signs >> j) & 1 ? -magnitude : magnitude) * qa[j];
  }
  return dot;
}

// iq1: 8 sum(grid qa) + delta_sign sum(qa) for one group of 8, the group's part of 8 x its dot (delta = +-1/8).
int iq1_group_dot(uint64_t entry, bool negative_delta, const int8_t* qa) {
  int dot = 0, sum = 0;
  for (int j = 0; j < 8; ++j) {
    dot += static_cast<int8_t>((entry >> (8 * j)) & 0xFF) * qa[j];
    sum += qa[j];
  }
  return 8 * dot + (negative_delta ? -sum : sum);
}

float dot_iq2_xxs(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ2XXS>(
      n, weight, activation,
      [](const q::BlockIQ2XXS& block, const int8_t* qa) {
        int total = 0;
        for (int j = 0; j < 8; ++j) {
          const auto* words = reinterpret_cast<const uint8_t*>(block.qs + 4 * j);
          const uint32_t indices = load_u32(words), codes = load_u32(words + 4);
          int dot = 0;
          for (int l = 0; l < 4; ++l) {
            dot += signed_group_dot(q::kIq2XxsGrid[(indices >> (8 * l)) & 0xFF], q::even_parity_signs(codes >> (7 * l)),
                                    8, qa + 32 * j + 8 * l);
          }
          total += static_cast<int>(2 * (codes >> 28) + 1) * dot;
        }
        return total;
      },
      0.125f);
}

float dot_iq2_xs(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ2XS>(
      n, weight, activation,
      [](const q::BlockIQ2XS& block, const int8_t* qa) {
        int total = 0;
        for (int g = 0; g < 32; ++g) {
          const uint16_t code = block.qs[g];
          total += (2 * q::iq2_scale_ls(block, g) + 1) *
                   signed_group_dot(q::kIq2XsGrid[code & 511], q::even_parity_signs(code >> 9), 8, qa + 8 * g);
        }
        return total;
      },
      0.125f);
}

float dot_iq2_s(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ2S>(
      n, weight, activation,
      [](const q::BlockIQ2S& block, const int8_t* qa) {
        int total = 0;
        for (int g = 0; g < 32; ++g) {
          total += (2 * q::iq2_scale_ls(block, g) + 1) *
                   signed_group_dot(q::kIq2SGrid[q::iq2_s_grid_index(block, g)], block.qs[32 + g], 8, qa + 8 * g);
        }
        return total;
      },
      0.125f);
}

float dot_iq3_xxs(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ3XXS>(
      n, weight, activation,
      [](const q::BlockIQ3XXS& block, const int8_t* qa) {
        int total = 0;
        for (int j = 0; j < 8; ++j) {
          const uint32_t codes = load_u32(block.qs + 64 + 4 * j);
          int dot = 0;
          for (int l = 0; l < 4; ++l) {
            const uint32_t signs = q::even_parity_signs(codes >> (7 * l));
            const uint8_t* indices = block.qs + 8 * j + 2 * l;
            const int8_t* group_qa = qa + 32 * j + 8 * l;
            dot += signed_group_dot(q::kIq3XxsGrid[indices[0]], signs, 4, group_qa);
            dot += signed_group_dot(q::kIq3XxsGrid[indices[1]], signs >> 4, 4, group_qa + 4);
          }
          total += static_cast<int>(2 * (codes >> 28) + 1) * dot;
        }
        return total;
      },
      0.25f);
}

float dot_iq3_s(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ3S>(n, weight, activation, [](const q::BlockIQ3S& block, const int8_t* qa) {
    int total = 0;
    for (int j = 0; j < 8; ++j) {
      int dot = 0;
      for (int k = 0; k < 8; ++k) {
        const int g = 8 * j + k;
        dot += signed_group_dot(q::kIq3SGrid[q::iq3_s_grid_index(block, g)], block.signs[g / 2] >> (4 * (g % 2)), 4,
                                qa + 4 * g);
      }
      total += (2 * q::iq3_s_scale_ls(block, j) + 1) * dot;
    }
    return total;
  });
}

float dot_iq1_s(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ1S>(
      n, weight, activation,
      [](const q::BlockIQ1S& block, const int8_t* qa) {
        int total = 0;
        for (int j = 0; j < 8; ++j) {
          const uint16_t qh = block.qh[j];
          int dot = 0;
          for (int l = 0; l < 4; ++l) {
            const int index = q::iq1_s_grid_index(block, 4 * j + l);
            dot += iq1_group_dot(q::kIq1SGrid[index], (qh & 0x8000) != 0, qa + 32 * j + 8 * l);
          }
          total += (2 * ((qh >> 12) & 7) + 1) * dot;
        }
        return total;
      },
      0.125f);
}

float dot_iq1_m(int64_t n, const void* weight, const void* activation) {
  return dot_k_symmetric<q::BlockIQ1M>(
      n, weight, activation,
      [](const q::BlockIQ1M& block, const int8_t* qa) {
        int total = 0;
        for (int s = 0; s < 16; ++s) {
          int dot = 0;
          for (int g = 2 * s; g < 2 * s + 2; ++g) {
            const int nibble = q::iq1_m_nibble(block, g);
            dot += iq1_group_dot(q::kIq1SGrid[block.qs[g] | ((nibble & 7) << 8)], (nibble & 8) != 0, qa + 8 * g);
          }
          total += (2 * q::iq1_m_scale(block, s) + 1) * dot;
        }
        return total;
      },
      0.125f);
}

template <VecDotFn kOne>
void tile_by_one(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                 const void* activations, size_t activation_row_bytes, int64_t n_act_rows, float* out,
                 int64_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* act = static_cast<const uint8_t*>(activations);
  for (int64_t r = 0; r < n_act_rows; ++r) {
    for (int64_t i = 0; i < n_weight_rows; ++i) {
      out[r * out_stride + i] = kOne(n, w + static_cast<size_t>(i) * weight_row_bytes,
                                     act + static_cast<size_t>(r) * activation_row_bytes);
    }
  }
}

template <VecDotFn kOne>
constexpr VecDotKernel make_kernel() {
  return {kOne, tile_by_one<kOne>, {}, {}};
}

void copy_f32_row(const float* x, void* activation_row, int64_t n) {
  std::memcpy(activation_row, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

VecDotKernel vec_dot_kernel(DType weight_type) {
  switch (weight_type) {
    case DType::f32: return make_kernel<dot_f32>();
    case DType::f16: return make_kernel<dot_f16>();
    case DType::bf16: return make_kernel<dot_bf16>();
    case DType::q4_0: return make_kernel<dot_q4_0>();
    case DType::q4_1: return make_kernel<dot_q4_1>();
    case DType::q5_0: return make_kernel<dot_q5_0>();
    case DType::q5_1: return make_kernel<dot_q5_1>();
    case DType::q8_0: return make_kernel<dot_q8_0>();
    case DType::q4_k: return make_kernel<dot_k_affine<false, q::BlockQ4K>>();
    case DType::q5_k: return make_kernel<dot_k_affine<true, q::BlockQ5K>>();
    case DType::q6_k: return make_kernel<dot_q6_k>();
    case DType::q2_k: return make_kernel<dot_q2_k>();
    case DType::q3_k: return make_kernel<dot_q3_k>();
    case DType::iq4_nl: return make_kernel<dot_iq4_nl>();
    case DType::iq4_xs: return make_kernel<dot_iq4_xs>();
    case DType::tq1_0: return make_kernel<dot_tq1_0>();
    case DType::tq2_0: return make_kernel<dot_tq2_0>();
    case DType::mxfp4: return make_kernel<dot_mxfp4>();
    case DType::iq2_xxs: return make_kernel<dot_iq2_xxs>();
    case DType::iq2_xs: return make_kernel<dot_iq2_xs>();
    case DType::iq2_s: return make_kernel<dot_iq2_s>();
    case DType::iq3_xxs: return make_kernel<dot_iq3_xxs>();
    case DType::iq3_s: return make_kernel<dot_iq3_s>();
    case DType::iq1_s: return make_kernel<dot_iq1_s>();
    case DType::iq1_m: return make_kernel<dot_iq1_m>();
    default: return {};
  }
}

QuantizeRowFn quantize_row_fn(DType activation_type) {
  switch (activation_type) {
    case DType::f32: return copy_f32_row;
    case DType::q8_0: return q::from_float_q8_0;
    case DType::q8_1: return q::from_float_q8_1;
    case DType::q8_k: return q::from_float_q8_k;
    default: return nullptr;
  }
}

}  // namespace rwd::kernels::cpu::scalar
