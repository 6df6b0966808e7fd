// Dot products of one weight row (stored dtype) with one activation row (the weight type's vec_dot_type:
// f32, q8_0, q8_1 or q8_K), chosen once per process by CPU features (scalar, AVX2/FMA/F16C, or AVX2 with the
// VNNI integer dot products for the quantized types).
// Every function reduces its row in a fixed order that does not depend on anything but n, which keeps the
// matmul batch-invariant.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

using VecDotFn = float (*)(int64_t n, const void* weight_row, const void* activation_row);
using QuantizeRowFn = void (*)(const float* x, void* activation_row, int64_t n);

// Null when the weight type has no kernel.
VecDotFn vec_dot_fn(tensor::DType weight_type);
// Quantizes a float row into the activation type (q8_0, q8_1, q8_K; f32 is a copy).
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);

// The kernel sets. Where the CPU has them, avx512vnni is preferred to avxvnni, avxvnni to avx2, avx2 to scalar:
// avxvnni and avx512vnni are AVX2 with the VNNI dot product (VEX / EVEX) for the quantized weight types;
// vnni_emulated is the same code with that instruction spelled in AVX2, slower than avx2, chosen only when
// REWIND_ISA asks for it (tests of the VNNI logic). Every set but scalar gives the same bits as avx2 for every
// weight type.
enum class KernelIsa { scalar, avx2, avxvnni, avx512vnni, vnni_emulated };

// The set dispatch picked: the best the CPU supports, or REWIND_ISA=scalar|avx2|avxvnni|avx512vnni|vnni-emulated
// where the CPU supports that one. Decided on first use.
KernelIsa kernel_isa();
// "scalar", "avx2", "avxvnni", "avx512vnni" or "vnni-emulated" (REWIND_ISA's spelling).
const char* isa_name(KernelIsa isa);
// isa_name(kernel_isa()), for logs and benchmarks.
const char* isa_name();

}  // namespace rwd::kernels::cpu
