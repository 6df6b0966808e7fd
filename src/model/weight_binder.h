// WeightBinder: looks up tensors by name in a GGUF file and checks dtype and shape before binding, so a
// wrong file fails at load with the tensor, the expected and the found shape — never in the forward.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tensor/tensor.h"

namespace rwd::model {

class Model;

class WeightBinder {
 public:
  WeightBinder(Model& model, const gguf::GgufFile& file) : model_(model), file_(file) {}

  // A matrix used by matmul: any supported weight dtype. shape outermost first, e.g. {n_out, n_in}. Packed for
  // the dispatched kernel set where it has a packed layout for it (Model::pack).
  Result<tensor::Tensor> matrix(const std::string& name, std::vector<int64_t> shape);
  // Token embeddings: a matrix whose rows are read one by one, left in the file's layout (a tied output head
  // gets its packed copy from Model::from_file).
  Result<tensor::Tensor> embeddings(const std::string& name, std::vector<int64_t> shape);
  // A vector used elementwise (norm weights): converted to f32 when stored otherwise.
  Result<tensor::Tensor> vector(const std::string& name, int64_t n) { return floats(name, {n}); }
  // Any tensor read element by element (conv taps, biases): f32, converted when stored otherwise.
  Result<tensor::Tensor> floats(const std::string& name, std::vector<int64_t> shape);
  // Tensors of one shape, each read as floats(), stacked along the outermost dimension into one f32 tensor the
  // model owns (Kimi's three q/k/v conv weights become the one conv over the q | k | v channels).
  Result<tensor::Tensor> stacked_floats(const std::vector<std::string>& names, std::vector<int64_t> shape);
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // An architecture's refusal of the file's tensors, prefixed with the file like the binder's own errors.
  template <typename... Args>
  Status refuse(fmt::format_string<Args...> format, Args&&... args) const {
    return Status::errorf("{}: {}", file_.path(), fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  Result<const gguf::TensorInfo*> find_with_shape(const std::string& name, const std::vector<int64_t>& shape);

  Model& model_;
  const gguf::GgufFile& file_;
};

}  // namespace rwd::model
