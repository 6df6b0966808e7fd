#include "kernels/ref/vec_dot.h"

#include <vector>

#include "base/check.h"

namespace rwd::kernels::ref {

double vec_dot(tensor::DType weight_type, int64_t n, const void* weight_row, const float* x) {
  const tensor::DTypeTraits& traits = tensor::dtype_traits(weight_type);
  REWIND_CHECK(traits.to_float != nullptr, "ref::vec_dot: no reference dequantizer for {}", traits.name);
  REWIND_CHECK(n % traits.block_size == 0, "ref::vec_dot: n = {} is not a multiple of the {} block of {}", n,
               traits.name, traits.block_size);
  std::vector<float> weight(static_cast<size_t>(n));
  traits.to_float(weight_row, weight.data(), n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(weight[i]) * static_cast<double>(x[i]);
  return sum;
}

}  // namespace rwd::kernels::ref
