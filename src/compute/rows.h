// Typed views of float rows in a backend's memory, the operands of Backend ops (compute/backend.h).
// A view names rows, it owns nothing: n_rows rows of `width` values, row r starting at data + r * stride.
// Column slices (columns()) and row ranges (rows()) are views of the same memory, so an op can read the q | k | v
// columns of a projection without a copy. For the CPU backend `data` is host memory.
#pragma once

#include <cstdint>
#include <type_traits>

namespace rwd::compute {

template <typename T>
struct RowsOf {
  T* data = nullptr;
  int64_t n_rows = 0;
  int64_t width = 0;
  int64_t stride = 0;

  RowsOf() = default;
  RowsOf(T* data_, int64_t n_rows_, int64_t width_) : RowsOf(data_, n_rows_, width_, width_) {}
  RowsOf(T* data_, int64_t n_rows_, int64_t width_, int64_t stride_)
      : data(data_), n_rows(n_rows_), width(width_), stride(stride_) {}
  // A read-only view of writable rows.
  template <typename U>
    requires(!std::is_same_v<U, T>)
  RowsOf(const RowsOf<U>& other) : data(other.data), n_rows(other.n_rows), width(other.width), stride(other.stride) {}

  T* row(int64_t r) const { return data + r * stride; }
  bool contiguous() const { return stride == width || n_rows <= 1; }
  int64_t size() const { return n_rows * width; }
  // Columns [first, first + n) of every row.
  RowsOf columns(int64_t first, int64_t n) const { return {data + first, n_rows, n, stride}; }
  // Rows [first, first + n).
  RowsOf rows(int64_t first, int64_t n) const { return {data + first * stride, n, width, stride}; }
};

using Rows = RowsOf<float>;
using ConstRows = RowsOf<const float>;

}  // namespace rwd::compute
