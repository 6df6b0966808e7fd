// The dense architectures (llama, qwen2, qwen3, gemma3) against an independent float64 forward written here
// straight from the model definitions (no code shared with src/model), on generated random-weight models.
// Also checks the invariants exactness rests on: prefill and token-by-token decode give bit-identical
// logits (batch invariance), and two slots in one batch give exactly what each gives alone.
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"

namespace rwd {
namespace {

using Matrix = std::vector<double>;  // row-major [rows, cols]

struct RefWeights {
  std::map<std::string, Matrix> tensors;
  std::map<std::string, int64_t> cols;
};

RefWeights read_weights(const gguf::GgufFile& file) {
  RefWeights w;
  for (const gguf::TensorInfo& info : file.tensors()) {
    const auto& traits = tensor::dtype_traits(info.tensor.dtype);
    std::vector<float> values(static_cast<size_t>(info.tensor.n_elements()));
    const int64_t n_cols = info.tensor.ne[0];
    for (int64_t r = 0; r < info.tensor.n_rows(); ++r) traits.to_float(info.tensor.row(r), values.data() + r * n_cols, n_cols);
    w.tensors[info.tensor.name] = Matrix(values.begin(), values.end());
    w.cols[info.tensor.name] = n_cols;
  }
  return w;
}

struct RefConfig {
  std::string arch;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, window;
  double eps, rope_base;
};

std::vector<double> matvec(const RefWeights& w, const std::string& name, const std::vector<double>& x) {
  const Matrix& m = w.tensors.at(name);
  const int64_t n_cols = w.cols.at(name);
  EXPECT_EQ(static_cast<int64_t>(x.size()), n_cols) << name;
  std::vector<double> y(m.size() / n_cols, 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    for (int64_t c = 0; c < n_cols; ++c) y[r] += m[r * n_cols + c] * x[c];
  }
  return y;
}

void rms_norm(std::vector<double>& x, size_t offset, size_t n, const Matrix& weight, double eps) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(sum / n + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] = x[offset + i] * scale * weight[i];
}

void rope(std::vector<double>& x, int64_t n_head, int64_t head_dim, int64_t pos, double base, bool neox) {
  for (int64_t h = 0; h < n_head; ++h) {
    double* v = x.data() + h * head_dim;
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const double theta = pos * std::pow(base, -2.0 * i / head_dim);
      const int64_t a = neox ? i : 2 * i;
      const int64_t b = neox ? i + head_dim / 2 : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

// Logits of every position of `tokens`, one sequence, float64 throughout.
std::vector<std::vector<double>> reference_forward(const RefConfig& c, const RefWeights& w, const std::vector<int32_t>& tokens) {
  const bool gemma = c.arch == "gemma3";
  const bool neox = c.arch != "llama";
  const bool qk_norm = c.arch == "qwen3" || gemma;
  const bool qkv_bias = c.arch == "qwen2";
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<std::vector<double>> x(n);
  for (int64_t t = 0; t < n; ++t) {
    const Matrix& e = w.tensors.at("token_embd.weight");
    x[t].assign(e.begin() + tokens[t] * c.n_embd, e.begin() + (tokens[t] + 1) * c.n_embd);
    if (gemma) for (double& v : x[t]) v *= std::sqrt(static_cast<double>(c.n_embd));
  }
  for (int il = 0; il < c.n_layer; ++il) {
    auto name = [il](const char* s) { return "blk." + std::to_string(il) + "." + s + ".weight"; };
    const bool sliding = gemma && il % 6 < 5;
    const double base = sliding ? 10000.0 : c.rope_base;
    std::vector<std::vector<double>> keys(n), values(n), queries(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> h = x[t];
      rms_norm(h, 0, c.n_embd, w.tensors.at(name("attn_norm")), c.eps);
      queries[t] = matvec(w, name("attn_q"), h);
      keys[t] = matvec(w, name("attn_k"), h);
      values[t] = matvec(w, name("attn_v"), h);
      if (qkv_bias) {
        auto add_bias = [&](std::vector<double>& y, const char* s) {
          const Matrix& b = w.tensors.at("blk." + std::to_string(il) + "." + s + ".bias");
          for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
        };
        add_bias(queries[t], "attn_q");
        add_bias(keys[t], "attn_k");
        add_bias(values[t], "attn_v");
      }
      if (qk_norm) {
        for (int64_t hh = 0; hh < c.n_head; ++hh) rms_norm(queries[t], hh * c.head_dim, c.head_dim, w.tensors.at(name("attn_q_norm")), c.eps);
        for (int64_t hh = 0; hh < c.n_head_kv; ++hh) rms_norm(keys[t], hh * c.head_dim, c.head_dim, w.tensors.at(name("attn_k_norm")), c.eps);
      }
      rope(queries[t], c.n_head, c.head_dim, t, base, neox);
      rope(keys[t], c.n_head_kv, c.head_dim, t, base, neox);
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> mixed(c.n_head * c.head_dim, 0.0);
      for (int64_t hh = 0; hh < c.n_head; ++hh) {
        const int64_t kvh = hh / (c.n_head / c.n_head_kv);
        std::vector<double> scores;
        std::vector<int64_t> used;
        for (int64_t p = 0; p <= t; ++p) {
          if (sliding && t - p >= c.window) continue;
          double s = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) s += queries[t][hh * c.head_dim + d] * keys[p][kvh * c.head_dim + d];
          scores.push_back(s / std::sqrt(static_cast<double>(c.head_dim)));
          used.push_back(p);
        }
        double max = scores[0];
        for (double s : scores) max = std::max(max, s);
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (size_t j = 0; j < used.size(); ++j) {
          for (int64_t d = 0; d < c.head_dim; ++d) mixed[hh * c.head_dim + d] += scores[j] / sum * values[used[j]][kvh * c.head_dim + d];
        }
      }
      std::vector<double> o = matvec(w, name("attn_output"), mixed);
      if (gemma) rms_norm(o, 0, c.n_embd, w.tensors.at(name("post_attention_norm")), c.eps);
      for (int64_t i = 0; i < c.n_embd; ++i) x[t][i] += o[i];
      std::vector<double> h = x[t];
      rms_norm(h, 0, c.n_embd, w.tensors.at(name("ffn_norm")), c.eps);
      std::vector<double> g = matvec(w, name("ffn_gate"), h);
      std::vector<double> u = matvec(w, name("ffn_up"), h);
      for (size_t i = 0; i < g.size(); ++i) {
        const double a = g[i];
        const double act = gemma ? 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                                 : a / (1.0 + std::exp(-a));
        g[i] = act * u[i];
      }
      std::vector<double> d = matvec(w, name("ffn_down"), g);
      if (gemma) rms_norm(d, 0, c.n_embd, w.tensors.at(name("post_ffw_norm")), c.eps);
      for (int64_t i = 0; i < c.n_embd; ++i) x[t][i] += d[i];
    }
  }
  std::vector<std::vector<double>> logits(n);
  const std::string output = w.tensors.count("output.weight") ? "output.weight" : "token_embd.weight";
  for (int64_t t = 0; t < n; ++t) {
    rms_norm(x[t], 0, c.n_embd, w.tensors.at("output_norm.weight"), c.eps);
    logits[t] = matvec(w, output, x[t]);
  }
  return logits;
}

class DenseReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rewind_dense_" + GetParam() + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "model.gguf").string();
    SyntheticModelOptions options{GetParam(), "tiny", "f32", 7, path_};
    ASSERT_TRUE(make_synthetic_model(options).is_ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string path_;
};

std::vector<int32_t> test_tokens(int n) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(32 + (i * 37 + 5) % 95);
  return tokens;
}

TEST_P(DenseReference, PrefillAndDecodeMatchFloat64Reference) {
  auto file = gguf::GgufFile::open(path_);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  const RefWeights weights = read_weights(**file);
  auto model = model::Model::load(path_);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const model::HParams& hp = (*model)->hparams();
  const RefConfig config{GetParam(), hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_ff,
                         hp.n_vocab, GetParam() == "gemma3" ? 16 : 0, 1e-6,
                         GetParam() == "llama" ? 10000.0 : 1000000.0};
  const std::vector<int32_t> tokens = test_tokens(40);  // longer than gemma3's tiny window of 16
  const auto expected = reference_forward(config, weights, tokens);

  ThreadPool pool(2);
  model::ForwardContext ctx(**model, pool, 64);
  state::ModelState model_state((*model)->kv_specs(), (*model)->recurrent_specs(), 1, 64);
  // First 30 tokens as one prefill batch with logits for each, then one token at a time.
  model::Batch batch;
  for (int i = 0; i < 30; ++i) batch.add(tokens[i], i, 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(batch, model_state, logits).is_ok());
  auto check = [&](const float* row, int position) {
    double max_error = 0, max_abs = 0;
    for (int64_t v = 0; v < hp.n_vocab; ++v) {
      max_error = std::max(max_error, std::abs(row[v] - expected[position][v]));
      max_abs = std::max(max_abs, std::abs(expected[position][v]));
    }
    EXPECT_LT(max_error, 2e-4 * std::max(1.0, max_abs)) << GetParam() << " position " << position;
  };
  for (int i = 0; i < 30; ++i) check(logits.data() + i * hp.n_vocab, i);
  for (int i = 30; i < 40; ++i) {
    batch.clear();
    batch.add(tokens[i], i, 0, true);
    ASSERT_TRUE(ctx.forward(batch, model_state, logits).is_ok());
    check(logits.data(), i);
  }
}

TEST_P(DenseReference, BatchInvarianceAndSlotIsolationAreBitExact) {
  auto model = model::Model::load(path_);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const int64_t n_vocab = (*model)->hparams().n_vocab;
  ThreadPool pool(2);
  model::ForwardContext ctx(**model, pool, 64);
  const std::vector<int32_t> a = test_tokens(20);
  std::vector<int32_t> b = test_tokens(27);
  for (int32_t& t : b) t = 32 + (t * 3) % 95;

  // Token by token, slot 0 alone.
  state::ModelState state_single((*model)->kv_specs(), (*model)->recurrent_specs(), 2, 64);
  std::vector<std::vector<float>> single;
  model::Batch batch;
  std::vector<float> logits;
  for (size_t i = 0; i < a.size(); ++i) {
    batch.clear();
    batch.add(a[i], static_cast<int32_t>(i), 0, true);
    ASSERT_TRUE(ctx.forward(batch, state_single, logits).is_ok());
    single.push_back(logits);
  }
  // Whole prompt of a in slot 1 next to b's prompt in slot 0, one batch.
  state::ModelState state_mixed((*model)->kv_specs(), (*model)->recurrent_specs(), 2, 64);
  batch.clear();
  for (size_t i = 0; i < b.size(); ++i) batch.add(b[i], static_cast<int32_t>(i), 0, false);
  for (size_t i = 0; i < a.size(); ++i) batch.add(a[i], static_cast<int32_t>(i), 1, true);
  ASSERT_TRUE(ctx.forward(batch, state_mixed, logits).is_ok());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(logits.data() + i * n_vocab, single[i].data(), n_vocab * sizeof(float)))
        << GetParam() << ": position " << i << " differs between a batch of " << batch.size() << " and decoding alone";
  }
}

TEST_P(DenseReference, BadBatchesAreRejectedWithAReason) {
  auto model = model::Model::load(path_);
  ASSERT_TRUE(model.is_ok());
  ThreadPool pool(1);
  model::ForwardContext ctx(**model, pool, 8);
  state::ModelState model_state((*model)->kv_specs(), (*model)->recurrent_specs(), 2, 16);
  std::vector<float> logits;
  model::Batch batch;
  batch.add(100000, 0, 0, true);
  EXPECT_NE(ctx.forward(batch, model_state, logits).message().find("vocabulary"), std::string::npos);
  batch.clear();
  batch.add(65, 16, 0, true);
  EXPECT_NE(ctx.forward(batch, model_state, logits).message().find("context"), std::string::npos);
  batch.clear();
  batch.add(65, 0, 2, true);
  EXPECT_NE(ctx.forward(batch, model_state, logits).message().find("slot"), std::string::npos);
  batch.clear();
  batch.add(65, 0, 0, true);
  batch.add(66, 2, 0, true);
  EXPECT_NE(ctx.forward(batch, model_state, logits).message().find("does not follow"), std::string::npos);
  batch.clear();
  for (int i = 0; i < 9; ++i) batch.add(65, i, 0, true);
  EXPECT_NE(ctx.forward(batch, model_state, logits).message().find("exceeds"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Architectures, DenseReference, ::testing::Values("llama", "qwen2", "qwen3", "gemma3"));

}  // namespace
}  // namespace rwd
