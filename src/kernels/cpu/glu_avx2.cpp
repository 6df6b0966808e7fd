// SwiGLU/GeGLU, AVX2 path: the same formulas as glu.cpp with the 8-lane exp; the tail goes through a padded
// block so every element uses the same exp.
#include <immintrin.h>

#include "kernels/cpu/float_kernel_variants.h"
#include "kernels/cpu/vector_math_avx2.h"

namespace rwd::kernels::cpu::detail {
namespace {

inline __m256 swiglu8(__m256 g, __m256 u) {
  const __m256 e = vmath::exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

inline __m256 geglu8(__m256 g, __m256 u) {
  const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
  const __m256 inner = _mm256_add_ps(g, _mm256_mul_ps(_mm256_set1_ps(0.044715f), cube));
  const __m256 e = vmath::exp(_mm256_mul_ps(_mm256_set1_ps(-1.5957691216057308f), inner));  // -2 sqrt(2/pi)
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

template <__m256 (*kOp)(__m256, __m256)>
void glu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, kOp(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    alignas(32) float gate_tail[8] = {};
    alignas(32) float up_tail[8] = {};
    for (int64_t j = i; j < n; ++j) {
      gate_tail[j - i] = gate[j];
      up_tail[j - i] = up[j];
    }
    alignas(32) float out_tail[8];
    _mm256_store_ps(out_tail, kOp(_mm256_load_ps(gate_tail), _mm256_load_ps(up_tail)));
    for (int64_t j = i; j < n; ++j) out[j] = out_tail[j - i];
  }
}

inline __m256 silu8(__m256 x) {
  const __m256 e = vmath::exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace

void silu_avx2(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = x[j];
    _mm256_store_ps(tail, silu8(_mm256_load_ps(tail)));
    for (int64_t j = i; j < n; ++j) out[j] = tail[j - i];
  }
}

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) { glu<swiglu8>(gate, up, out, n); }
void geglu_avx2(const float* gate, const float* up, float* out, int64_t n) { glu<geglu8>(gate, up, out, n); }

}  // namespace rwd::kernels::cpu::detail
