#include "kernels/ref/matmul.h"

#include <vector>

#include "base/check.h"

namespace rwd::kernels::ref {

void matmul(const tensor::Tensor& weight, const float* x, int64_t n_rows, float* y) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(weight.dtype);
  REWIND_CHECK(traits.to_float != nullptr, "ref::matmul: no reference dequantizer for {} ({})", traits.name,
               weight.name);
  const int64_t n_in = weight.n_cols();
  const int64_t n_out = weight.n_rows();
  std::vector<float> weight_row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    traits.to_float(weight.row(o), weight_row.data(), n_in);
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x + r * n_in;
      double sum = 0.0;  // the same sum as ref::vec_dot
      for (int64_t i = 0; i < n_in; ++i) sum += static_cast<double>(weight_row[i]) * static_cast<double>(xr[i]);
      y[r * n_out + o] = static_cast<float>(sum);
    }
  }
}

}  // namespace rwd::kernels::ref
