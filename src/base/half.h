// IEEE half and bfloat16 conversions, exact and branch-light, usable in scalar reference code.
// Rounding is to nearest even, as F16C and the converters of the field do, so scalar and SIMD paths agree.
#pragma once

#include <bit>
#include <cstdint>

namespace rwd {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: value = mantissa * 2^-24
      const float value = static_cast<float>(mantissa) * 0x1p-24f;
      bits = sign | std::bit_cast<uint32_t>(value);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs_bits < 0x38800000u) {  // result is subnormal or zero: round value * 2^24 to an integer
    const float magnitude = std::bit_cast<float>(abs_bits);
    const float scaled = magnitude * 0x1p24f;
    // Adding and subtracting 2^23 rounds to nearest even in the default rounding mode.
    const float rounded = (scaled + 0x1p23f) - 0x1p23f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  const uint32_t exponent = (abs_bits >> 23) - 112;
  uint32_t mantissa = abs_bits & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet nan
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace rwd
