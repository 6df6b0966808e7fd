#include "tensor/tensor.h"

#include <fmt/format.h>

namespace rwd::tensor {

std::string shape_string(const Tensor& tensor) {
  std::string text = "[";
  for (int i = tensor.n_dims - 1; i >= 0; --i) {
    text += fmt::format("{}", tensor.ne[i]);
    if (i > 0) text += ", ";
  }
  return text + "]";
}

}  // namespace rwd::tensor
