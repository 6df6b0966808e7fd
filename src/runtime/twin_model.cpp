// make_twin_model of include/rewind/tools.h: a copy of a GGUF model with seeded noise on its matrices, to serve
// as a draft model that agrees with its source only part of the time. It reads and writes files through gguf/
// and converts values through the dtype traits; it knows no architecture, so every model rewind can read can
// be twinned. The whole output is built in memory (GgufWriter), so it needs about twice the model's size.
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "rewind/tools.h"
#include "tensor/dtype.h"

namespace rwd {
namespace {

constexpr float kMaxNoise = 10.0f;

// Standard normal values by Box-Muller from the raw engine output: std::mt19937_64 is specified bit for bit,
// std::normal_distribution is not (libstdc++ and libc++ differ), and a seed should name one twin everywhere.
class GaussianSource {
 public:
  explicit GaussianSource(uint64_t seed) : engine_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform();  // (0, 1], so the log is finite
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return radius * std::cos(2.0 * M_PI * u2);
  }

 private:
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1p-53; }  // [0, 1)

  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Outermost first, as GgufWriter::add_tensor takes it.
std::vector<int64_t> shape_of(const tensor::Tensor& t) {
  std::vector<int64_t> shape;
  for (int d = t.n_dims - 1; d >= 0; --d) shape.push_back(t.ne[d]);
  return shape;
}

// Noise is scaled by each row's own RMS rather than the tensor's: rows that are zero (the output rows of the
// tokens a synthetic model never emits) stay zero, and rows of very different magnitudes (embeddings of rare
// and common tokens) are disturbed by the same relative amount.
Result<std::vector<uint8_t>> perturb_matrix(const gguf::TensorInfo& info, float noise, GaussianSource& gaussian,
                                            const std::string& source_path) {
  const tensor::Tensor& t = info.tensor;
  const tensor::DTypeTraits& traits = tensor::dtype_traits(t.dtype);
  if (traits.to_float == nullptr || traits.from_float == nullptr) {
    return Status::errorf("{}: tensor '{}' of type {} cannot be perturbed: rewind cannot dequantize and "
                          "requantize {}", source_path, t.name, traits.name, traits.name);
  }
  const int64_t n_cols = t.n_cols();
  const size_t row_bytes = t.bytes_per_row();
  std::vector<uint8_t> out(info.n_bytes);
  std::vector<float> row(static_cast<size_t>(n_cols));
  for (int64_t ir = 0; ir < t.n_rows(); ++ir) {
    traits.to_float(t.row(ir), row.data(), n_cols);
    double sum_squares = 0.0;
    for (float v : row) sum_squares += static_cast<double>(v) * v;
    const double scale = noise * std::sqrt(sum_squares / static_cast<double>(n_cols));
    for (float& v : row) v = static_cast<float>(v + scale * gaussian.next());
    traits.from_float(row.data(), out.data() + row_bytes * static_cast<size_t>(ir), n_cols);
  }
  return out;
}

}  // namespace

Status make_twin_model(const TwinModelOptions& options) {
  if (!std::isfinite(options.noise) || options.noise < 0.0f || options.noise > kMaxNoise) {
    return Status::errorf("mkmodel --twin-of: noise {} is not a finite value in [0, {}]", options.noise, kMaxNoise);
  }
  std::error_code same_error;
  if (std::filesystem::equivalent(options.source_path, options.output_path, same_error)) {
    return Status::errorf("mkmodel --twin-of: output {} is the source file itself; write the twin elsewhere",
                          options.output_path);
  }
  auto opened = gguf::GgufFile::open(options.source_path);
  if (!opened) return opened.status().with_context("mkmodel --twin-of");
  const std::unique_ptr<gguf::GgufFile> source = std::move(opened).value();

  gguf::GgufWriter writer;
  for (const auto& [key, value] : source->metadata()) writer.set_value(key, value);
  // One stream over the tensors in file order: the same source, noise and seed give the same twin.
  GaussianSource gaussian(options.seed);
  for (const gguf::TensorInfo& info : source->tensors()) {
    const tensor::Tensor& t = info.tensor;
    // 1-D tensors (norm weights, biases, decay constants) set scales and stabilities; noise there would
    // change how the model behaves rather than which tokens it prefers, so they are copied.
    if (options.noise == 0.0f || t.n_dims < 2) {
      const auto* bytes = static_cast<const uint8_t*>(t.data);
      writer.add_tensor(t.name, t.dtype, shape_of(t), std::vector<uint8_t>(bytes, bytes + info.n_bytes));
      continue;
    }
    REWIND_ASSIGN_OR_RETURN(std::vector<uint8_t> data,
                            perturb_matrix(info, options.noise, gaussian, options.source_path));
    writer.add_tensor(t.name, t.dtype, shape_of(t), std::move(data));
  }
  return writer.write(options.output_path, source->alignment()).with_context("mkmodel --twin-of");
}

}  // namespace rwd
