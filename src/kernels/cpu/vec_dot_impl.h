// Internal to kernels/cpu: the per-ISA kernel tables behind vec_dot.h, so that tests can run the scalar, AVX2
// and VNNI kernels side by side and the matmul can use the tiled form. Everything here obeys vec_dot.h's
// contract; dispatch.cpp decides which table the public functions return.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/vec_dot.h"
#include "tensor/dtype.h"

namespace rwd::kernels::cpu {

// out[a * out_stride + w] = dot(weight row w, activation row a) for w in [0, n_weight_rows) and a in
// [0, n_act_rows); weight row w starts at weights + w * weight_row_bytes, activation row a at
// activations + a * activation_row_bytes. Each result is bit-identical to the VecDotFn of the same table on
// that pair alone: a tile shares the unpacking and loading of blocks, never an accumulator.
using VecDotTileFn = void (*)(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                              const void* activations, size_t activation_row_bytes, int64_t n_act_rows, float* out,
                              int64_t out_stride);

// ---- panels: the activation side of the many-row matmul ----
//
// A panel holds kPanelRows activation rows quantized to the weight type's vec_dot_type and interleaved so that
// one 32-byte load gives a few consecutive values of all 8 rows, one 32-bit lane per row. A panel kernel
// applies a weight row to all 8 rows at once, so the unpacking of each weight block and the float work per
// block (conversion, scaling, accumulation) are paid once per 8 rows. Rows past the last one are zero.
inline constexpr int kPanelRows = 8;
// A narrow panel holds up to 4 rows with twice the values of each per load, for the batches of a speculative
// verify: a full panel there would do 8 rows of work for 2 to 4, and the tiles pay per row.
inline constexpr int kNarrowPanelRows = 4;

// Interleaves n_rows <= rows (the kernel's kPanelRows, kNarrowPanelRows or 1) quantized activation rows (plain
// vec_dot_type rows, row_bytes apart) of n values into a panel of panel_bytes(n) bytes.
using PanelPackFn = void (*)(int64_t n, const void* rows, size_t row_bytes, int64_t n_rows, void* panel);
// out[r * out_stride + w] = dot(weight row w, panel row r) for w in [0, n_weight_rows) and r in [0, n_rows),
// bit-identical to the table's VecDotFn on that pair.
using PanelDotFn = void (*)(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                            const void* panel, int64_t n_rows, float* out, int64_t out_stride);
using PanelBytesFn = size_t (*)(int64_t n);

struct PanelKernel {
  PanelPackFn pack = nullptr;
  PanelDotFn dot = nullptr;
  PanelBytesFn panel_bytes = nullptr;
  // From this many activation rows on, a panel beats the tile form (which costs per row): the matmul uses
  // panels from min_rows rows, and for the n_rows % rows rows past the last full panel when they are that many.
  int64_t min_rows = 0;
  int64_t rows = kPanelRows;  // activation rows a panel holds
};

struct VecDotKernel {
  VecDotFn one = nullptr;
  VecDotTileFn tile = nullptr;
  PanelKernel panel;  // empty where the table has no panel kernel for the type
  // For min_rows .. narrow_panel.rows activation rows where `panel` does not take them: a verify batch of 4
  // (kNarrowPanelRows) or a decode step's single row; empty where none.
  PanelKernel narrow_panel;
};

namespace scalar {
// Null members where the weight type has no kernel.
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
// The reference quantizers of tensor/quant (q8_0, q8_1, q8_K) or a copy for f32; null otherwise.
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);
}  // namespace scalar

namespace avx2 {
// Call only where avx2_supported(); the functions use AVX2, FMA and F16C instructions.
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
// Byte-identical to the scalar quantizers, only faster.
QuantizeRowFn quantize_row_fn(tensor::DType activation_type);
// The panel kernels of a quantized weight type (vec_dot_panel_avx2.cpp); empty for others.
PanelKernel panel_kernel(tensor::DType weight_type);
PanelKernel narrow_panel_kernel(tensor::DType weight_type);
}  // namespace avx2

// The VNNI tables (vec_dot_vnni_impl.h, one file per flavour): VNNI kernels for the quantized weight types, the
// AVX2 ones for the float types; bit-identical to avx2::vec_dot_kernel. Call each only where
// isa_supported() says so: the avx512vnni and avxvnni files are compiled with those instructions.
namespace avx512vnni {
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
}  // namespace avx512vnni
namespace avxvnni {
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
}  // namespace avxvnni
namespace vnni_emulated {
VecDotKernel vec_dot_kernel(tensor::DType weight_type);
}  // namespace vnni_emulated

// True when the CPU (and OS) support AVX2, FMA and F16C.
bool avx2_supported();
// True when the CPU (and OS) can run the kernels of isa (the VNNI sets all need AVX2 too).
bool isa_supported(KernelIsa isa);

// The table of a given, supported ISA (tests, benchmarks); the quantizers every ISA but scalar shares are AVX2's.
VecDotKernel vec_dot_kernel(KernelIsa isa, tensor::DType weight_type);
QuantizeRowFn quantize_row_fn(KernelIsa isa, tensor::DType activation_type);

// The whole table entry dispatch picked for a weight type.
VecDotKernel vec_dot_kernel(tensor::DType weight_type);

}  // namespace rwd::kernels::cpu
