// Shared by the quantization, dot-product and matmul tests: seeded rows whose magnitude changes from block to
// block (as real weights and activations do), and the error bound of a dot product whose activations were
// quantized to q8_0 / q8_1 / q8_K, derived from the formats rather than measured, and random weight rows of
// every type the kernels run, including the read-only ones rewind has no quantizer for.
// Random values come from raw mt19937_64 draws, so inputs are the same with every standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/quant/blocks.h"

namespace rwd::test {

class QuantRandom {
 public:
  explicit QuantRandom(uint64_t seed) : engine_(seed) {}

  double unit() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1p-53; }  // (0, 1)
  double gaussian() { return std::sqrt(-2.0 * std::log(unit())) * std::cos(6.283185307179586 * unit()); }
  int64_t integer(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(engine_() % (hi - lo + 1)); }

  // Gaussian values; every group of 32 is scaled by 10^u with u uniform in [lo_exp, hi_exp], and one value in
  // 64 is an outlier five times larger. Values are never exactly zero.
  std::vector<float> row(int64_t n, double lo_exp = -2.0, double hi_exp = 1.5) {
    std::vector<float> values(static_cast<size_t>(n));
    double scale = 1.0;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 32 == 0) scale = std::pow(10.0, lo_exp + (hi_exp - lo_exp) * unit());
      double v = gaussian() * scale;
      if (engine_() % 64 == 0) v *= 5.0;
      if (v == 0.0) v = scale * 1e-3;
      values[static_cast<size_t>(i)] = static_cast<float>(v);
    }
    return values;
  }

 private:
  std::mt19937_64 engine_;
};

// A finite fp16 of magnitude 2^[lo_exp, hi_exp), negative half the time unless positive.
inline uint16_t random_fp16(QuantRandom& random, double lo_exp, double hi_exp, bool positive = false) {
  const double magnitude = std::pow(2.0, lo_exp + (hi_exp - lo_exp) * random.unit());
  return fp32_to_fp16(static_cast<float>(positive || random.unit() < 0.5 ? magnitude : -magnitude));
}

// Every weight type the kernels run (tensor::is_supported_weight_type), in the traits table's order.
inline std::vector<tensor::DType> weight_types() {
  std::vector<tensor::DType> types;
  for (const tensor::DTypeTraits& traits : tensor::all_dtype_traits()) {
    if (tensor::is_supported_weight_type(traits.dtype)) types.push_back(traits.dtype);
  }
  return types;
}

// The weight types rewind reads but never writes (no reference quantizer): q2_K, q3_K, the i-quants, tq1_0,
// tq2_0, mxfp4.
inline std::vector<tensor::DType> read_only_types() {
  std::vector<tensor::DType> types;
  for (tensor::DType type : weight_types()) {
    if (tensor::dtype_traits(type).from_float == nullptr) types.push_back(type);
  }
  return types;
}

// Raw blocks of a read-only type: every payload byte uniform in 0..255 (all levels, scales, mins, digits, grid
// indices and signs occur), fp16 scales of magnitude 2^[-8, 0) (q2_K's d and dmin positive, as ggml writes
// them), mxfp4 scales 2^(e - 128) for e in 110..135.
inline std::vector<uint8_t> random_raw_blocks(tensor::DType type, int64_t n, QuantRandom& random) {
  namespace q = tensor::quant;
  const tensor::DTypeTraits& traits = tensor::dtype_traits(type);
  std::vector<uint8_t> row(tensor::row_bytes(type, n));
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(random.integer(0, 255));
  auto put_half = [&](uint8_t* block, size_t offset, bool positive) {
    const uint16_t bits = random_fp16(random, -8.0, 0.0, positive);
    std::memcpy(block + offset, &bits, sizeof(bits));
  };
  for (int64_t b = 0; b < n / traits.block_size; ++b) {
    uint8_t* block = row.data() + static_cast<size_t>(b) * traits.block_bytes;
    switch (type) {
      case tensor::DType::q2_k:
        put_half(block, offsetof(q::BlockQ2K, d), true);
        put_half(block, offsetof(q::BlockQ2K, dmin), true);
        break;
      case tensor::DType::q3_k: put_half(block, offsetof(q::BlockQ3K, d), false); break;
      case tensor::DType::iq4_nl: put_half(block, offsetof(q::BlockIQ4NL, d), false); break;
      case tensor::DType::iq4_xs: put_half(block, offsetof(q::BlockIQ4XS, d), false); break;
      case tensor::DType::tq1_0: put_half(block, offsetof(q::BlockTQ1_0, d), false); break;
      case tensor::DType::tq2_0: put_half(block, offsetof(q::BlockTQ2_0, d), false); break;
      case tensor::DType::mxfp4:
        block[offsetof(q::BlockMXFP4, e)] = static_cast<uint8_t>(random.integer(110, 135));
        break;
      case tensor::DType::iq2_xxs: put_half(block, offsetof(q::BlockIQ2XXS, d), false); break;
      case tensor::DType::iq2_xs: put_half(block, offsetof(q::BlockIQ2XS, d), false); break;
      case tensor::DType::iq2_s: put_half(block, offsetof(q::BlockIQ2S, d), false); break;
      case tensor::DType::iq3_xxs: put_half(block, offsetof(q::BlockIQ3XXS, d), false); break;
      case tensor::DType::iq3_s: put_half(block, offsetof(q::BlockIQ3S, d), false); break;
      case tensor::DType::iq1_s: put_half(block, offsetof(q::BlockIQ1S, d), false); break;
      case tensor::DType::iq1_m: {
        // d's four nibbles are the top nibbles of the four 16-bit scale words (blocks.h).
        const uint16_t d = random_fp16(random, -8.0, 0.0);
        uint8_t* scales = block + offsetof(q::BlockIQ1M, scales);
        for (int i = 0; i < 4; ++i) {
          scales[2 * i + 1] = static_cast<uint8_t>((scales[2 * i + 1] & 0x0F) | (((d >> (4 * i)) & 0xF) << 4));
        }
        break;
      }
      default: return {};  // not a read-only type
    }
  }
  return row;
}

// A weight row of n values: random.row(n) quantized by the reference quantizer where the type has one, else
// random_raw_blocks.
inline std::vector<uint8_t> random_weight_row(tensor::DType type, int64_t n, QuantRandom& random) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(type);
  if (traits.from_float == nullptr) return random_raw_blocks(type, n, random);
  const std::vector<float> x = random.row(n);
  std::vector<uint8_t> row(tensor::row_bytes(type, n), 0xCD);
  traits.from_float(x.data(), row.data(), n);
  return row;
}

// Largest |x̂ - x| the activation quantizer of act_type may leave on each value of x.
//   q8_0 / q8_1: q = round(x / d16) with d16 = fp16(amax / 127) leaves d16 / 2 <= d (1 + 2^-11) / 2. Where d16 is
//                subnormal (d < 2^-14) it can be off by 2^-25 absolute, and the values clipped at ±127 may then
//                lose up to 127 * 2^-25 more.
//   q8_K:        d = amax / 127 in float: d / 2 (1 + 2^-22).
//   Both:        plus the rounding of x * (1 / d): |x| 2^-22.
inline std::vector<double> activation_error_bounds(tensor::DType act_type, const float* x, int64_t n) {
  std::vector<double> bounds(static_cast<size_t>(n), 0.0);
  if (act_type == tensor::DType::f32) return bounds;
  const int64_t block = act_type == tensor::DType::q8_k ? 256 : 32;
  for (int64_t b = 0; b < n; b += block) {
    double amax = 0.0;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    const double d = amax / 127.0;
    double e = d / 2.0 * (1.0 + 0x1p-22);
    if (act_type != tensor::DType::q8_k) e = d / 2.0 * (1.0 + 0x1p-11) + (d < 0x1p-14 ? 128.0 * 0x1p-25 : 0.0);
    for (int64_t i = b; i < b + block; ++i) {
      bounds[static_cast<size_t>(i)] = e + std::fabs(static_cast<double>(x[i])) * 0x1p-22;
    }
  }
  return bounds;
}

// Tolerance for |kernel(w, quantize(x)) - Σ w_i x_i| (the float64 reference on unquantized x), where w is the
// dequantized weight row of weight_type:
//   activation error   Σ |w_i| e_i                         (e_i from activation_error_bounds)
//   q4_1 / q5_1 min    Σ_blocks |m| 2^-11 (Σ|x| + Σ e)      (s = fp16(d Σq) carries the fp16 rounding)
//   float arithmetic   (n_sums + 16) 2^-22 Σ |w_i| (|x_i| + e_i), n_sums the longest chain of float adds
inline double dot_tolerance(tensor::DType weight_type, int64_t n, const void* weight_row, const float* w,
                            const float* x) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(weight_type);
  const std::vector<double> e = activation_error_bounds(traits.vec_dot_type, x, n);
  double activation = 0.0, magnitude = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    activation += std::fabs(static_cast<double>(w[i])) * e[static_cast<size_t>(i)];
    magnitude +=
        std::fabs(static_cast<double>(w[i])) * (std::fabs(static_cast<double>(x[i])) + e[static_cast<size_t>(i)]);
  }
  double min_term = 0.0;
  if (weight_type == tensor::DType::q4_1 || weight_type == tensor::DType::q5_1) {
    for (int64_t b = 0; b < n / 32; ++b) {
      const auto* bytes = static_cast<const uint8_t*>(weight_row) + b * static_cast<int64_t>(traits.block_bytes);
      uint16_t m_bits;  // m follows d in both block types
      std::copy(bytes + 2, bytes + 4, reinterpret_cast<uint8_t*>(&m_bits));
      double block_sum = 0.0;
      for (int64_t i = 32 * b; i < 32 * b + 32; ++i) block_sum += std::fabs(x[i]) + e[static_cast<size_t>(i)];
      min_term += std::fabs(fp16_to_fp32(m_bits)) * 0x1p-11 * block_sum;
    }
  }
  const int64_t n_sums = traits.block_size == 1 ? n / 8 : n / traits.block_size;
  return activation + min_term + static_cast<double>(n_sums + 16) * 0x1p-22 * magnitude;
}

}  // namespace rwd::test
