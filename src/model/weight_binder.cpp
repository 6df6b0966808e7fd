#include "model/weight_binder.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/model.h"

namespace rwd::model {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return text + "]";
}

}  // namespace

Result<const gguf::TensorInfo*> WeightBinder::find_with_shape(const std::string& name,
                                                              const std::vector<int64_t>& shape) {
  const gguf::TensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) return Status::errorf("{}: tensor '{}' is missing", file_.path(), name);
  const tensor::Tensor& t = info->tensor;
  // Missing outer dimensions count as 1, as in llama.cpp: its converter writes numpy's n_dims and
  // llama-quantize writes ggml's, which drops outer 1s, so one tensor reaches us both ways. Same layout either way.
  const auto expected = [&](size_t d) { return d < shape.size() ? shape[shape.size() - 1 - d] : int64_t{1}; };
  const auto found = [&](size_t d) { return d < static_cast<size_t>(t.n_dims) ? t.ne[d] : int64_t{1}; };
  bool matches = true;
  for (size_t d = 0; d < std::max(shape.size(), static_cast<size_t>(t.n_dims)); ++d) {
    matches = matches && expected(d) == found(d);
  }
  if (!matches) {
    return Status::errorf("{}: tensor '{}' has shape {}, expected {}", file_.path(), name, tensor::shape_string(t),
                          shape_text(shape));
  }
  return info;
}

Result<tensor::Tensor> WeightBinder::embeddings(const std::string& name, std::vector<int64_t> shape) {
  REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* info, find_with_shape(name, shape));
  if (!tensor::is_supported_weight_type(info->tensor.dtype)) {
    return Status::errorf("{}: tensor '{}' has type {}, which rewind cannot compute with yet", file_.path(), name,
                          tensor::dtype_name(info->tensor.dtype));
  }
  return info->tensor;
}

Result<tensor::Tensor> WeightBinder::matrix(const std::string& name, std::vector<int64_t> shape) {
  REWIND_ASSIGN_OR_RETURN(tensor::Tensor tensor, embeddings(name, shape));
  // The file's copy of a packed weight is read no more: its pages go back (a tensor bound twice packs once).
  if (model_.packed_.pack(tensor)) file_.release(tensor);
  return tensor;
}

Result<tensor::Tensor> WeightBinder::floats(const std::string& name, std::vector<int64_t> shape) {
  REWIND_ASSIGN_OR_RETURN(const gguf::TensorInfo* info, find_with_shape(name, shape));
  const int64_t n = info->tensor.n_elements();
  if (info->tensor.dtype == tensor::DType::f32) return info->tensor;
  const auto& traits = tensor::dtype_traits(info->tensor.dtype);
  if (traits.to_float == nullptr || n % traits.block_size != 0) {
    return Status::errorf("{}: tensor '{}' has type {}, expected f32 or f16", file_.path(), name, traits.name);
  }
  std::vector<float>& converted = model_.converted_.emplace_back(static_cast<size_t>(n));
  traits.to_float(info->tensor.data, converted.data(), n);
  tensor::Tensor result = info->tensor;
  result.dtype = tensor::DType::f32;
  result.data = converted.data();
  return result;
}

Result<tensor::Tensor> WeightBinder::stacked_floats(const std::vector<std::string>& names,
                                                    std::vector<int64_t> shape) {
  std::vector<tensor::Tensor> parts;
  for (const std::string& name : names) {
    REWIND_ASSIGN_OR_RETURN(tensor::Tensor part, floats(name, shape));
    parts.push_back(part);
  }
  const int64_t n_part = parts.empty() ? 0 : parts.front().n_elements();
  std::vector<float>& stacked = model_.converted_.emplace_back(static_cast<size_t>(n_part) * parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    std::copy_n(static_cast<const float*>(parts[i].data), n_part, stacked.data() + i * n_part);
  }
  tensor::Tensor result;
  result.dtype = tensor::DType::f32;
  result.n_dims = 2;
  result.ne = {shape.back(), static_cast<int64_t>(parts.size()) * (n_part / shape.back()), 1, 1};
  result.data = stacked.data();
  return result;
}

}  // namespace rwd::model
