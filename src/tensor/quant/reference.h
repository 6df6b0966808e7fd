// Reference conversions between float rows and every tensor type rewind reads or writes (the traits table in
// tensor/dtype.cpp points at these). Dequantizers follow ggml's formats bit for bit (see blocks.h); the
// quantizers are rewind's own: round-to-nearest against a least-squares scale search, not bit-identical to
// llama.cpp's, but every block they write is valid for any GGUF reader.
// Each function converts one row of n values; n is a multiple of the type's block size.
// The q8_0 / q8_1 / q8_K quantizers are also the activation quantizers of the dot products, so the fast
// kernels must reproduce their bytes exactly (tests/kernels/test_vec_dot.cpp checks it).
#pragma once

#include <cstdint>

namespace rwd::tensor::quant {

void to_float_f32(const void* src, float* dst, int64_t n);
void to_float_f16(const void* src, float* dst, int64_t n);
void to_float_bf16(const void* src, float* dst, int64_t n);
void to_float_q4_0(const void* src, float* dst, int64_t n);
void to_float_q4_1(const void* src, float* dst, int64_t n);
void to_float_q5_0(const void* src, float* dst, int64_t n);
void to_float_q5_1(const void* src, float* dst, int64_t n);
void to_float_q8_0(const void* src, float* dst, int64_t n);
void to_float_q8_1(const void* src, float* dst, int64_t n);
void to_float_q4_k(const void* src, float* dst, int64_t n);
void to_float_q5_k(const void* src, float* dst, int64_t n);
void to_float_q6_k(const void* src, float* dst, int64_t n);
void to_float_q8_k(const void* src, float* dst, int64_t n);
// Read-only types (rewind runs GGUFs holding them but never writes them): no from_float_*.
void to_float_q2_k(const void* src, float* dst, int64_t n);
void to_float_q3_k(const void* src, float* dst, int64_t n);
void to_float_iq4_nl(const void* src, float* dst, int64_t n);
void to_float_iq4_xs(const void* src, float* dst, int64_t n);
void to_float_tq1_0(const void* src, float* dst, int64_t n);
void to_float_tq2_0(const void* src, float* dst, int64_t n);
void to_float_mxfp4(const void* src, float* dst, int64_t n);
void to_float_iq2_xxs(const void* src, float* dst, int64_t n);
void to_float_iq2_xs(const void* src, float* dst, int64_t n);
void to_float_iq2_s(const void* src, float* dst, int64_t n);
void to_float_iq3_xxs(const void* src, float* dst, int64_t n);
void to_float_iq3_s(const void* src, float* dst, int64_t n);
void to_float_iq1_s(const void* src, float* dst, int64_t n);
void to_float_iq1_m(const void* src, float* dst, int64_t n);

void from_float_f32(const float* src, void* dst, int64_t n);
void from_float_f16(const float* src, void* dst, int64_t n);
void from_float_bf16(const float* src, void* dst, int64_t n);
void from_float_q4_0(const float* src, void* dst, int64_t n);
void from_float_q4_1(const float* src, void* dst, int64_t n);
void from_float_q5_0(const float* src, void* dst, int64_t n);
void from_float_q5_1(const float* src, void* dst, int64_t n);
// q8_0 / q8_1: d = fp16(amax / 127), q = round-half-even(x * (1 / d)) clamped to ±127 (d as stored);
// q8_1 adds s = fp16(d * sum q).
void from_float_q8_0(const float* src, void* dst, int64_t n);
void from_float_q8_1(const float* src, void* dst, int64_t n);
void from_float_q4_k(const float* src, void* dst, int64_t n);
void from_float_q5_k(const float* src, void* dst, int64_t n);
void from_float_q6_k(const float* src, void* dst, int64_t n);
// q8_K: d = amax / 127 (float), q = round-half-even(x * (1 / d)) clamped to ±127, bsums filled.
void from_float_q8_k(const float* src, void* dst, int64_t n);

}  // namespace rwd::tensor::quant
