// Internal: 8-lane float exp and tanh and fixed-order horizontal reductions for the float kernels' AVX2 files
// (softmax, glu, attention). Only *_avx2.cpp files may include it. The dot products of quantized weights have
// their own helpers (vec_dot*); nothing here is shared with them.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "vector_math_avx2.h needs -mavx2 -mfma: include it only from *_avx2.cpp files"
#endif

#include <immintrin.h>

namespace rwd::kernels::cpu::vmath {

// Sum of the 8 lanes as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)): the same tree as reduce4 below, so one value
// reduced alone or beside three others gives the same bits.
inline float reduce_add(__m256 v) {
  const __m256 pairs = _mm256_hadd_ps(v, v);
  const __m256 quads = _mm256_hadd_ps(pairs, pairs);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
}

// Lane i of the result is reduce_add(v_i), bit for bit.
inline __m128 reduce4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 quads = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1));
}

inline float reduce_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline double reduce_add(__m256d v) {
  const __m128d halves = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(halves, _mm_unpackhi_pd(halves, halves)));
}

// acc += the 8 floats of v widened to double (lanes 0-3 into acc_lo, 4-7 into acc_hi).
inline void accumulate_double(__m256 v, __m256d& acc_lo, __m256d& acc_hi) {
  acc_lo = _mm256_add_pd(acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  acc_hi = _mm256_add_pd(acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// e^x to within about 2 ulp over the whole float range: subnormal results are computed (not flushed), x below
// about -104 gives 0, above ln(FLT_MAX) gives +inf, -inf gives 0 and NaN stays NaN.
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact), e^r by its Taylor series to r^7
// (truncation below 6e-9 relative), and 2^n applied as two factors so every n from -150 to 129 is reachable.
inline __m256 exp(__m256 x) {
  // max/min return their second operand when one is NaN: x goes second so NaN passes through.
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440054690583e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i n_int = _mm256_cvtps_epi32(n);
  const __m256i n_half = _mm256_srai_epi32(n_int, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 scale_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_half, bias), 23));
  const __m256 scale_b =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(n_int, n_half), bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, scale_a), scale_b);
}

// tanh(x) to within a few ulp: the odd Taylor series to x^11 for |x| < 0.25 (truncation below 1e-8
// relative), 1 - 2 / (e^{2|x|} + 1) with the sign of x elsewhere.
inline __m256 tanh(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_mask, x);
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 series = _mm256_set1_ps(-1382.0f / 155925.0f);
  series = _mm256_fmadd_ps(series, x2, _mm256_set1_ps(62.0f / 2835.0f));
  series = _mm256_fmadd_ps(series, x2, _mm256_set1_ps(-17.0f / 315.0f));
  series = _mm256_fmadd_ps(series, x2, _mm256_set1_ps(2.0f / 15.0f));
  series = _mm256_fmadd_ps(series, x2, _mm256_set1_ps(-1.0f / 3.0f));
  series = _mm256_fmadd_ps(_mm256_mul_ps(series, x2), x, x);
  const __m256 e = exp(_mm256_add_ps(ax, ax));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 large = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  const __m256 signed_large = _mm256_or_ps(large, _mm256_and_ps(sign_mask, x));
  return _mm256_blendv_ps(signed_large, series, _mm256_cmp_ps(ax, _mm256_set1_ps(0.25f), _CMP_LT_OQ));
}

}  // namespace rwd::kernels::cpu::vmath
