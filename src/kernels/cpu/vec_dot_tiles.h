// The tile form of the quantized dot products, shared by the AVX2 and VNNI tables: a tile of weight rows by
// activation rows served by a kernel's `rows<NA>` (NA activation rows against one weight row, sharing the
// weight's unpacking) and `one`. Plain C++ over the kernel type, so it compiles with whatever instructions its
// includer's kernels use; its instances are as internal as the kernel types they are made for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rwd::kernels::cpu::tiles {

// The last n_act_rows <= NA rows of a tile, by the instance of exactly that many rows (one row: the one-row
// kernel itself, the decode path).
template <typename Kernel, int NA>
void rows_remaining(int64_t n, const void* weight, const uint8_t* act, size_t act_row_bytes, int64_t n_act_rows,
                    float* out, int64_t out_stride) {
  if constexpr (NA == 1) {
    out[0] = Kernel::one(n, weight, act);
  } else if (n_act_rows == NA) {
    Kernel::template rows<NA>(n, weight, act, act_row_bytes, out, out_stride);
  } else {
    rows_remaining<Kernel, NA - 1>(n, weight, act, act_row_bytes, n_act_rows, out, out_stride);
  }
}

// Groups of up to Kernel::kMaxRows activation rows, of equal size (5 rows as 3 + 2, not 4 + 1), share each
// weight row's unpacking; weight rows inner, so the group stays in L1. Many activation rows go through the
// panel kernels instead.
template <typename Kernel>
void tile_by_row_groups(int64_t n, const void* weights, size_t weight_row_bytes, int64_t n_weight_rows,
                        const void* activations, size_t act_row_bytes, int64_t n_act_rows, float* out,
                        int64_t out_stride) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* act = static_cast<const uint8_t*>(activations);
  const int64_t n_groups = (n_act_rows + Kernel::kMaxRows - 1) / Kernel::kMaxRows;
  for (int64_t g = 0, r = 0; g < n_groups; ++g) {
    const int64_t n_group = (n_act_rows - r) / (n_groups - g);
    for (int64_t i = 0; i < n_weight_rows; ++i) {
      rows_remaining<Kernel, Kernel::kMaxRows>(n, w + static_cast<size_t>(i) * weight_row_bytes,
                                               act + static_cast<size_t>(r) * act_row_bytes, act_row_bytes, n_group,
                                               out + r * out_stride + i, out_stride);
    }
    r += n_group;
  }
}

}  // namespace rwd::kernels::cpu::tiles
