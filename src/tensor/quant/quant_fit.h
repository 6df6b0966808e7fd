// Scale fitting shared by the reference quantizers: least-squares searches for the scale (and offset) of one
// group of values, and the rounding rule every quantizer uses. Not here: block packing (reference.cpp).
#pragma once

#include <cmath>
#include <cstdint>

namespace rwd::tensor::quant {

// Rounds half to even (the default floating-point mode, as SIMD conversions do) and clamps to [lo, hi];
// NaN maps to lo, so no input makes the float-to-int conversion undefined.
inline int round_clamp(float value, int lo, int hi) {
  if (!(value >= static_cast<float>(lo))) return lo;
  if (value >= static_cast<float>(hi)) return hi;
  return static_cast<int>(std::nearbyint(value));
}

// Finds d minimizing sum (x - d * q)^2 with q integer in [-n_neg, n_neg - 1]; returns d (its sign puts the
// value of largest magnitude on the longer, negative side) and writes q unless levels is null. All-zero input
// gives d = 0, q = 0.
float fit_symmetric(const float* x, int n, int n_neg, int8_t* levels);

struct AffineFit {
  float scale;   // d
  float offset;  // m: x ≈ d * q + m, q integer in [0, n_max]
};

// Finds d >= 0 and m minimizing sum (x - d * q - m)^2; with offset_at_most_zero, m is kept <= 0 (the k-quants
// store -m as an unsigned min).
AffineFit fit_affine(const float* x, int n, int n_max, bool offset_at_most_zero);

}  // namespace rwd::tensor::quant
