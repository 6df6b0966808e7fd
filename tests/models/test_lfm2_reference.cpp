// LFM2's short-convolution block (and the attention layer it alternates with) against a float64 forward
// written here from the model definition, with no code shared with src/model or the kernels: random weights
// in a two-layer GGUF built by the test (a convolution layer, then attention), L = 2, 3 and 4 taps, prompts of
// 1, 2, 63 and 200 tokens, logits at every position of a prefill and of token-by-token decoding.
// links: rewind_runtime
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/forward_context.h"
#include "model/model.h"

namespace rwd {
namespace {

constexpr int64_t kEmbd = 64;
constexpr int64_t kFf = 96;
constexpr int64_t kVocab = 200;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = kEmbd / kHeads;
constexpr double kEps = 1e-5;
constexpr double kRopeBase = 1000000.0;

using Vec = std::vector<double>;
using Tensors = std::map<std::string, Vec>;

Tensors build_model(int64_t l_cache, const std::string& path) {
  std::mt19937_64 rng(99 + l_cache);
  gguf::GgufWriter writer;
  Tensors w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double scale, double offset) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = static_cast<float>(offset + normal(rng));
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.add_tensor(name, tensor::DType::f32, shape, std::move(bytes));
    w[name] = Vec(values.begin(), values.end());
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    add(name, {rows, cols}, 1.0 / std::sqrt(static_cast<double>(cols)), 0.0);
  };
  const std::string a = "lfm2";
  writer.set_string("general.architecture", a);
  writer.set_u32(a + ".embedding_length", kEmbd);
  writer.set_u32(a + ".block_count", 2);
  writer.set_u32(a + ".feed_forward_length", kFf);
  writer.set_u32(a + ".attention.head_count", kHeads);
  writer.set_i32_array(a + ".attention.head_count_kv", {0, static_cast<int32_t>(kKvHeads)});
  writer.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(kEps));
  writer.set_f32(a + ".rope.freq_base", static_cast<float>(kRopeBase));
  writer.set_u32(a + ".shortconv.l_cache", static_cast<uint32_t>(l_cache));
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "qwen2");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(kVocab, 3));
  writer.set_string_array("tokenizer.ggml.merges", {});
  add("token_embd.weight", {kVocab, kEmbd}, 0.3, 0.0);
  for (int il = 0; il < 2; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {kEmbd}, 0.05, 1.0);
    add(p + "ffn_norm.weight", {kEmbd}, 0.05, 1.0);
    matrix(p + "ffn_gate.weight", kFf, kEmbd);
    matrix(p + "ffn_up.weight", kFf, kEmbd);
    matrix(p + "ffn_down.weight", kEmbd, kFf);
  }
  add("blk.0.shortconv.conv.weight", {kEmbd, l_cache}, 0.6, 0.0);
  matrix("blk.0.shortconv.in_proj.weight", 3 * kEmbd, kEmbd);
  matrix("blk.0.shortconv.out_proj.weight", kEmbd, kEmbd);
  matrix("blk.1.attn_q.weight", kEmbd, kEmbd);
  matrix("blk.1.attn_k.weight", kKvHeads * kHeadDim, kEmbd);
  matrix("blk.1.attn_v.weight", kKvHeads * kHeadDim, kEmbd);
  matrix("blk.1.attn_output.weight", kEmbd, kEmbd);
  add("blk.1.attn_q_norm.weight", {kHeadDim}, 0.05, 1.0);
  add("blk.1.attn_k_norm.weight", {kHeadDim}, 0.05, 1.0);
  add("token_embd_norm.weight", {kEmbd}, 0.05, 1.0);
  EXPECT_TRUE(writer.write(path).is_ok());
  return w;
}

Vec matvec(const Tensors& w, const std::string& name, const Vec& x) {
  const Vec& m = w.at(name);
  Vec y(m.size() / x.size(), 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    for (size_t i = 0; i < x.size(); ++i) y[r] += m[r * x.size() + i] * x[i];
  }
  return y;
}

Vec rms_norm(const Vec& x, size_t offset, size_t n, const Vec& weight) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + kEps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[offset + i] * scale * weight[i];
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

std::vector<Vec> reference(const Tensors& w, int64_t l_cache, const std::vector<int32_t>& tokens) {
  std::vector<Vec> bx_rows, keys, values, logits;
  for (size_t t = 0; t < tokens.size(); ++t) {
    Vec x(w.at("token_embd.weight").begin() + tokens[t] * kEmbd,
          w.at("token_embd.weight").begin() + (tokens[t] + 1) * kEmbd);
    // Layer 0: short convolution.
    {
      const Vec bcx =
          matvec(w, "blk.0.shortconv.in_proj.weight", rms_norm(x, 0, kEmbd, w.at("blk.0.attn_norm.weight")));
      Vec bx(kEmbd);
      for (int64_t i = 0; i < kEmbd; ++i) bx[i] = bcx[i] * bcx[2 * kEmbd + i];
      bx_rows.push_back(bx);
      Vec y(kEmbd, 0.0);
      for (int64_t ch = 0; ch < kEmbd; ++ch) {
        for (int64_t k = 0; k < l_cache; ++k) {  // tap l_cache - 1 is the current token
          const int64_t src = static_cast<int64_t>(t) - (l_cache - 1) + k;
          if (src >= 0) y[ch] += w.at("blk.0.shortconv.conv.weight")[ch * l_cache + k] * bx_rows[src][ch];
        }
        y[ch] *= bcx[kEmbd + ch];
      }
      const Vec out = matvec(w, "blk.0.shortconv.out_proj.weight", y);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += out[i];
    }
    auto ffn = [&](const std::string& p) {
      const Vec f = rms_norm(x, 0, kEmbd, w.at(p + "ffn_norm.weight"));
      Vec g = matvec(w, p + "ffn_gate.weight", f);
      const Vec u = matvec(w, p + "ffn_up.weight", f);
      for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
      const Vec d = matvec(w, p + "ffn_down.weight", g);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += d[i];
    };
    ffn("blk.0.");
    // Layer 1: GQA attention with q/k head norms and NeoX RoPE.
    {
      const Vec h = rms_norm(x, 0, kEmbd, w.at("blk.1.attn_norm.weight"));
      Vec q = matvec(w, "blk.1.attn_q.weight", h);
      Vec k = matvec(w, "blk.1.attn_k.weight", h);
      const Vec v = matvec(w, "blk.1.attn_v.weight", h);
      auto norm_rope = [&](Vec& vec, int64_t n_heads, const Vec& weight) {
        for (int64_t hh = 0; hh < n_heads; ++hh) {
          Vec r = rms_norm(vec, hh * kHeadDim, kHeadDim, weight);
          for (int64_t i = 0; i < kHeadDim / 2; ++i) {
            const double theta = static_cast<double>(t) * std::pow(kRopeBase, -2.0 * i / kHeadDim);
            const double x0 = r[i], x1 = r[i + kHeadDim / 2];
            r[i] = x0 * std::cos(theta) - x1 * std::sin(theta);
            r[i + kHeadDim / 2] = x0 * std::sin(theta) + x1 * std::cos(theta);
          }
          std::copy(r.begin(), r.end(), vec.begin() + hh * kHeadDim);
        }
      };
      norm_rope(q, kHeads, w.at("blk.1.attn_q_norm.weight"));
      norm_rope(k, kKvHeads, w.at("blk.1.attn_k_norm.weight"));
      keys.push_back(k);
      values.push_back(v);
      Vec mixed(kEmbd, 0.0);
      for (int64_t hh = 0; hh < kHeads; ++hh) {
        const int64_t kvh = hh / (kHeads / kKvHeads);
        Vec scores(t + 1);
        double max = -1e300, sum = 0;
        for (size_t p = 0; p <= t; ++p) {
          double s = 0;
          for (int64_t d = 0; d < kHeadDim; ++d) s += q[hh * kHeadDim + d] * keys[p][kvh * kHeadDim + d];
          scores[p] = s / std::sqrt(static_cast<double>(kHeadDim));
          max = std::max(max, scores[p]);
        }
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (size_t p = 0; p <= t; ++p) {
          for (int64_t d = 0; d < kHeadDim; ++d)
            mixed[hh * kHeadDim + d] += scores[p] / sum * values[p][kvh * kHeadDim + d];
        }
      }
      const Vec out = matvec(w, "blk.1.attn_output.weight", mixed);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += out[i];
    }
    ffn("blk.1.");
    logits.push_back(matvec(w, "token_embd.weight", rms_norm(x, 0, kEmbd, w.at("token_embd_norm.weight"))));
  }
  return logits;
}

class Lfm2Reference : public ::testing::TestWithParam<int64_t> {};

TEST_P(Lfm2Reference, PrefillAndDecodeMatchFloat64Math) {
  const int64_t l_cache = GetParam();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rewind_lfm2_" + std::to_string(l_cache) + "_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  const Tensors w = build_model(l_cache, path);
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  for (int n_prompt : {1, 2, 63, 200}) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n_prompt + 3; ++i) tokens.push_back((i * 61 + n_prompt * 7 + 1) % kVocab);
    const std::vector<Vec> expected = reference(w, l_cache, tokens);
    model::ForwardContext ctx(**model, pool, 256);
    state::ModelState state((*model)->kv_specs(), (*model)->recurrent_specs(), 1, 256);
    model::Batch batch;
    for (int i = 0; i < n_prompt; ++i) batch.add(tokens[i], i, 0, true);
    std::vector<float> logits;
    ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
    auto check = [&](const float* row, int position) {
      double max_error = 0, max_abs = 0;
      for (int64_t v = 0; v < kVocab; ++v) {
        max_error = std::max(max_error, std::abs(row[v] - expected[position][v]));
        max_abs = std::max(max_abs, std::abs(expected[position][v]));
      }
      EXPECT_LT(max_error, 2e-4 * std::max(1.0, max_abs))
          << "L " << l_cache << " prompt " << n_prompt << " position " << position;
    };
    for (int i = 0; i < n_prompt; ++i) check(logits.data() + i * kVocab, i);
    for (int i = n_prompt; i < n_prompt + 3; ++i) {
      batch.clear();
      batch.add(tokens[i], i, 0, true);
      ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
      check(logits.data(), i);
    }
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Taps, Lfm2Reference, ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace rwd
