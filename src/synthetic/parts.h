// Pieces shared by the random-weight model generators of `rewind mkmodel`: a platform-independent RNG,
// a tensor writer that quantizes to the requested dtype, the byte-level vocabulary and the common header.
// Each architecture's generator lives in its own file beside this one (synthetic/<arch>.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "model/arch/list.h"
#include "synthetic/synthetic_model.h"
#include "tensor/dtype.h"

namespace rwd::synthetic {

// splitmix64: small, fast and the same on every platform, so a seed names one model everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  float normal() {
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }

 private:
  uint64_t state_;
};

class TensorMaker {
 public:
  TensorMaker(gguf::GgufWriter& writer, tensor::DType dtype, uint64_t seed) : writer_(writer), dtype_(dtype), rng_(seed) {}

  // Gaussian matrix [n_out, n_in] with standard deviation gain / sqrt(n_in); rows in `zero_rows` are zero.
  void matrix(const std::string& name, int64_t n_out, int64_t n_in, float gain, const std::vector<bool>* keep_row = nullptr) {
    const float scale = gain / std::sqrt(static_cast<float>(n_in));
    std::vector<float> values(static_cast<size_t>(n_out * n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      const bool keep = keep_row == nullptr || (*keep_row)[r];
      for (int64_t c = 0; c < n_in; ++c) values[r * n_in + c] = keep ? rng_.normal() * scale : 0.0f;
    }
    add(name, {n_out, n_in}, values, true);
  }
  // n_expert stacked matrices [n_expert, n_out, n_in], each like matrix().
  void experts(const std::string& name, int64_t n_expert, int64_t n_out, int64_t n_in, float gain) {
    const float scale = gain / std::sqrt(static_cast<float>(n_in));
    std::vector<float> values(static_cast<size_t>(n_expert * n_out * n_in));
    for (float& v : values) v = rng_.normal() * scale;
    add(name, {n_expert, n_out, n_in}, values, true);
  }
  void embedding(const std::string& name, int64_t n_vocab, int64_t n_embd, float stddev) {
    std::vector<float> values(static_cast<size_t>(n_vocab * n_embd));
    for (float& v : values) v = rng_.normal() * stddev;
    add(name, {n_vocab, n_embd}, values, true);
  }
  // Norm weights near one, with a little spread so a wrong norm is visible in the output.
  void norm(const std::string& name, int64_t n) { uniform(name, {n}, 0.95f, 1.05f); }
  // f32 values uniform in [lo, hi), never quantized (biases, decay constants, conv taps).
  void uniform(const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = lo + static_cast<float>(rng_.uniform()) * (hi - lo);
    add(name, std::move(shape), values, false);
  }
  float draw_uniform(float lo, float hi) { return lo + static_cast<float>(rng_.uniform()) * (hi - lo); }
  void values(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data) {
    add(name, std::move(shape), data, false);
  }

 private:
  void add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values, bool quantize) {
    tensor::DType dtype = quantize ? dtype_ : tensor::DType::f32;
    const int64_t n_in = shape.back();
    // Like llama.cpp's quantizer, fall back to q8_0 for rows that are not a whole number of blocks.
    if (n_in % tensor::dtype_traits(dtype).block_size != 0) dtype = tensor::DType::q8_0;
    if (n_in % tensor::dtype_traits(dtype).block_size != 0) dtype = tensor::DType::f32;
    const auto& traits = tensor::dtype_traits(dtype);
    const int64_t n_rows = static_cast<int64_t>(values.size()) / n_in;
    std::vector<uint8_t> data(tensor::row_bytes(dtype, n_in) * static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      traits.from_float(values.data() + r * n_in, data.data() + r * tensor::row_bytes(dtype, n_in), n_in);
    }
    writer_.add_tensor(name, dtype, shape, std::move(data));
  }

  gguf::GgufWriter& writer_;
  tensor::DType dtype_;
  Rng rng_;
};

// The byte-level BPE vocabulary (256 byte tokens, ChatML specials, control fillers up to n_vocab).
void write_tokenizer(gguf::GgufWriter& writer, int64_t n_vocab);
Result<tensor::DType> parse_dtype(const std::string& name);
// general.* keys of a generated model.
void write_general(gguf::GgufWriter& writer, const SyntheticModelOptions& options);
// Rows of the output matrix that stay non-zero: printable ASCII, so greedy text is readable.
std::vector<bool> printable_rows(int64_t n_vocab);

// One generator per architecture: writes keys and tensors for options.preset into writer.
#define REWIND_DECLARE_GENERATOR(id) \
  Status write_##id(const SyntheticModelOptions& options, gguf::GgufWriter& writer, TensorMaker& maker);
REWIND_ARCHITECTURES(REWIND_DECLARE_GENERATOR)
#undef REWIND_DECLARE_GENERATOR

}  // namespace rwd::synthetic
