// Tensor: a non-owning view of typed data (a mapped GGUF tensor or an arena buffer), with ggml's dimension
// order: ne[0] is the innermost (contiguous) dimension. A weight [n_out, n_in] in shape comments therefore
// has ne[0] = n_in, ne[1] = n_out. Rows are always contiguous; the view never owns or allocates.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace rwd::tensor {

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  int n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  const void* data = nullptr;
  // The same rows re-laid for the packed kernels of the AVX-512 VNNI set (kernels/cpu/packed_weights.h), held
  // by the model beside `data`; null when the weight is not packed. Views of other rows drop it.
  const void* packed = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_cols() const { return ne[0]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t bytes_per_row() const { return row_bytes(dtype, ne[0]); }
  size_t n_bytes() const { return bytes_per_row() * static_cast<size_t>(n_rows()); }
  const uint8_t* row(int64_t i) const { return static_cast<const uint8_t*>(data) + bytes_per_row() * i; }
  const float* f32() const { return static_cast<const float*>(data); }
  bool valid() const { return data != nullptr; }
};

// Matrix i of a [n, rows, cols] tensor as a 2-D [rows, cols] weight (an expert, an MLA head's projection).
inline Tensor matrix_slice(const Tensor& stacked, int64_t i) {
  Tensor slice = stacked;
  slice.n_dims = 2;
  slice.ne = {stacked.ne[0], stacked.ne[1], 1, 1};
  slice.data = stacked.row(i * stacked.ne[1]);
  slice.packed = nullptr;
  return slice;
}

// "[4096, 1024]" style, outermost first, for error messages.
std::string shape_string(const Tensor& tensor);

}  // namespace rwd::tensor
