// Shared by the float kernel tests (rms_norm, rope, softmax, glu, attention): seeded random inputs that are
// never zero, NaN-poisoned outputs, the ISA paths to run, and float32 tolerance constants.
// Random values come from raw mt19937_64 draws, so inputs are the same on every platform.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace rwd::test {

// Unit roundoff of float32 is kFloatEps / 2; bounds below are written in multiples of kFloatEps = 2^-23.
inline constexpr double kFloatEps = 0x1p-23;

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi) with 24 random bits, never exactly 0.
  float uniform(float lo, float hi) {
    while (true) {
      const double unit = static_cast<double>(engine_() >> 40) * 0x1p-24;
      const float value = static_cast<float>(lo + (static_cast<double>(hi) - lo) * unit);
      if (value != 0.0f) return value;
    }
  }
  std::vector<float> floats(int64_t n, float lo, float hi) {
    std::vector<float> values(static_cast<size_t>(n));
    for (float& value : values) value = uniform(lo, hi);
    return values;
  }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  std::mt19937_64 engine_;
};

inline std::vector<float> nan_filled(int64_t n) {
  return std::vector<float>(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
}

enum class Isa { scalar, avx2 };

inline std::string isa_name(Isa isa) { return isa == Isa::scalar ? "scalar" : "avx2"; }
inline std::string isa_test_name(const ::testing::TestParamInfo<Isa>& param) { return isa_name(param.param); }

// AVX2 tests skip on CPUs without it (and under REWIND_ISA=scalar, which has_avx2_fma() honours).
#define REWIND_SKIP_UNLESS_AVAILABLE(isa)                                             \
  do {                                                                                 \
    if ((isa) == ::rwd::test::Isa::avx2 && !::rwd::kernels::cpu::has_avx2_fma()) {     \
      GTEST_SKIP() << "AVX2/FMA not available or disabled by REWIND_ISA";              \
    }                                                                                  \
  } while (0)

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace rwd::test
