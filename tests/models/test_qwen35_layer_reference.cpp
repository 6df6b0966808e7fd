// One Gated DeltaNet layer, one gated-attention layer and the MTP block of qwen35 against a float64 forward
// written here
// from the math (no code shared with src/model or the kernels): random weights in a GGUF built by
// the test, several head configurations (H_k < H_v, head sizes 32/64/128), prompts of 1, 2, 63 and 200
// tokens, logits compared at every position of a prefill and of token-by-token decoding.
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

struct Config {
  const char* name;
  bool attention;  // the single layer is gated attention (else Gated DeltaNet)
  int64_t ssm_n_head_k, ssm_n_head_v, ssm_head_dim;
  int64_t n_head, n_head_kv, head_dim, n_rot;
};

constexpr int64_t kEmbd = 96;
constexpr int64_t kFf = 160;
constexpr int64_t kVocab = 300;
constexpr int64_t kConv = 4;
constexpr double kEps = 1e-6;
constexpr double kRopeBase = 10000.0;

using Tensors = std::map<std::string, std::vector<double>>;

struct Built {
  std::string path;
  Tensors w;
};

std::vector<float> randn(std::mt19937_64& rng, size_t n, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(normal(rng));
  return v;
}

Built build_model(const Config& c, const std::string& path, bool with_mtp = false) {
  std::mt19937_64 rng(1234);
  gguf::GgufWriter writer;
  Built built{path, {}};
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.add_tensor(name, tensor::DType::f32, shape, std::move(bytes));
    built.w[name] = std::vector<double>(values.begin(), values.end());
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    add(name, {rows, cols}, randn(rng, rows * cols, 1.0 / std::sqrt(static_cast<double>(cols))));
  };
  auto norm = [&](const std::string& name, int64_t n) {
    std::vector<float> v = randn(rng, n, 0.05);
    for (float& x : v) x += 1.0f;
    add(name, {n}, v);
  };
  const std::string a = "qwen35";
  writer.set_string("general.architecture", a);
  writer.set_u32(a + ".embedding_length", kEmbd);
  writer.set_u32(a + ".block_count", with_mtp ? 2 : 1);
  if (with_mtp) writer.set_u32(a + ".nextn_predict_layers", 1);
  writer.set_u32(a + ".feed_forward_length", kFf);
  writer.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.n_head));
  writer.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
  writer.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  writer.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  writer.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(kEps));
  writer.set_f32(a + ".rope.freq_base", static_cast<float>(kRopeBase));
  writer.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.n_rot));
  writer.set_u32(a + ".ssm.conv_kernel", kConv);
  writer.set_u32(a + ".ssm.state_size", static_cast<uint32_t>(c.ssm_head_dim));
  writer.set_u32(a + ".ssm.group_count", static_cast<uint32_t>(c.ssm_n_head_k));
  writer.set_u32(a + ".ssm.time_step_rank", static_cast<uint32_t>(c.ssm_n_head_v));
  writer.set_u32(a + ".ssm.inner_size", static_cast<uint32_t>(c.ssm_n_head_v * c.ssm_head_dim));
  writer.set_u32(a + ".full_attention_interval", c.attention ? 1 : 2);
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "qwen2");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(kVocab, 3));
  writer.set_string_array("tokenizer.ggml.merges", {});

  add("token_embd.weight", {kVocab, kEmbd}, randn(rng, kVocab * kEmbd, 1.0));
  norm("blk.0.attn_norm.weight", kEmbd);
  norm("blk.0.post_attention_norm.weight", kEmbd);
  if (c.attention) {
    matrix("blk.0.attn_q.weight", 2 * c.n_head * c.head_dim, kEmbd);
    matrix("blk.0.attn_k.weight", c.n_head_kv * c.head_dim, kEmbd);
    matrix("blk.0.attn_v.weight", c.n_head_kv * c.head_dim, kEmbd);
    matrix("blk.0.attn_output.weight", kEmbd, c.n_head * c.head_dim);
    norm("blk.0.attn_q_norm.weight", c.head_dim);
    norm("blk.0.attn_k_norm.weight", c.head_dim);
  } else {
    const int64_t v_width = c.ssm_n_head_v * c.ssm_head_dim;
    const int64_t channels = 2 * c.ssm_n_head_k * c.ssm_head_dim + v_width;
    matrix("blk.0.attn_qkv.weight", channels, kEmbd);
    matrix("blk.0.attn_gate.weight", v_width, kEmbd);
    add("blk.0.ssm_conv1d.weight", {channels, kConv}, randn(rng, channels * kConv, 0.5));
    add("blk.0.ssm_dt.bias", {c.ssm_n_head_v}, randn(rng, c.ssm_n_head_v, 0.5));
    std::vector<float> ssm_a = randn(rng, c.ssm_n_head_v, 1.0);
    for (float& x : ssm_a) x = -std::exp(x);
    add("blk.0.ssm_a", {c.ssm_n_head_v}, ssm_a);
    matrix("blk.0.ssm_beta.weight", c.ssm_n_head_v, kEmbd);
    matrix("blk.0.ssm_alpha.weight", c.ssm_n_head_v, kEmbd);
    norm("blk.0.ssm_norm.weight", c.ssm_head_dim);
    matrix("blk.0.ssm_out.weight", kEmbd, v_width);
  }
  matrix("blk.0.ffn_gate.weight", kFf, kEmbd);
  matrix("blk.0.ffn_up.weight", kFf, kEmbd);
  matrix("blk.0.ffn_down.weight", kEmbd, kFf);
  if (with_mtp) {
    norm("blk.1.attn_norm.weight", kEmbd);
    norm("blk.1.post_attention_norm.weight", kEmbd);
    matrix("blk.1.attn_q.weight", 2 * c.n_head * c.head_dim, kEmbd);
    matrix("blk.1.attn_k.weight", c.n_head_kv * c.head_dim, kEmbd);
    matrix("blk.1.attn_v.weight", c.n_head_kv * c.head_dim, kEmbd);
    matrix("blk.1.attn_output.weight", kEmbd, c.n_head * c.head_dim);
    norm("blk.1.attn_q_norm.weight", c.head_dim);
    norm("blk.1.attn_k_norm.weight", c.head_dim);
    matrix("blk.1.ffn_gate.weight", kFf, kEmbd);
    matrix("blk.1.ffn_up.weight", kFf, kEmbd);
    matrix("blk.1.ffn_down.weight", kEmbd, kFf);
    matrix("blk.1.nextn.eh_proj.weight", kEmbd, 2 * kEmbd);
    norm("blk.1.nextn.enorm.weight", kEmbd);
    norm("blk.1.nextn.hnorm.weight", kEmbd);
    norm("blk.1.nextn.shared_head_norm.weight", kEmbd);
  }
  norm("output_norm.weight", kEmbd);
  add("output.weight", {kVocab, kEmbd}, randn(rng, kVocab * kEmbd, 2.0 / std::sqrt(static_cast<double>(kEmbd))));
  EXPECT_TRUE(writer.write(path).is_ok());
  return built;
}

using Vec = std::vector<double>;

Vec matvec(const Tensors& w, const std::string& name, const Vec& x) {
  const Vec& m = w.at(name);
  const size_t cols = x.size();
  Vec y(m.size() / cols, 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    for (size_t i = 0; i < cols; ++i) y[r] += m[r * cols + i] * x[i];
  }
  return y;
}

Vec rms_norm(const Vec& x, size_t offset, size_t n, const Vec* weight) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + kEps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[offset + i] * scale * (weight ? (*weight)[i] : 1.0);
  return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }

// Gated attention of layer `prefix` for the token at position t; keys/values collect the layer's rows.
Vec gated_attention(const Config& c, const Tensors& w, const std::string& prefix, const Vec& h, int64_t t,
                    std::vector<Vec>& keys, std::vector<Vec>& values) {
  const Vec qg = matvec(w, prefix + "attn_q.weight", h);
  Vec k = matvec(w, prefix + "attn_k.weight", h);
  const Vec v = matvec(w, prefix + "attn_v.weight", h);
  const int64_t D = c.head_dim;
  Vec q(c.n_head * D), gate(c.n_head * D);
  for (int64_t hh = 0; hh < c.n_head; ++hh) {
    for (int64_t d = 0; d < D; ++d) {
      q[hh * D + d] = qg[hh * 2 * D + d];
      gate[hh * D + d] = qg[hh * 2 * D + D + d];
    }
  }
  auto norm_rope = [&](Vec& vec, int64_t n_heads, const Vec& weight) {
    for (int64_t hh = 0; hh < n_heads; ++hh) {
      Vec normed = rms_norm(vec, hh * D, D, &weight);
      for (int64_t i = 0; i < c.n_rot / 2; ++i) {
        const double theta = t * std::pow(kRopeBase, -2.0 * i / c.n_rot);
        const double x0 = normed[i], x1 = normed[i + c.n_rot / 2];
        normed[i] = x0 * std::cos(theta) - x1 * std::sin(theta);
        normed[i + c.n_rot / 2] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
      std::copy(normed.begin(), normed.end(), vec.begin() + hh * D);
    }
  };
  norm_rope(q, c.n_head, w.at(prefix + "attn_q_norm.weight"));
  norm_rope(k, c.n_head_kv, w.at(prefix + "attn_k_norm.weight"));
  keys.push_back(k);
  values.push_back(v);
  Vec out(c.n_head * D, 0.0);
  for (int64_t hh = 0; hh < c.n_head; ++hh) {
    const int64_t kvh = hh / (c.n_head / c.n_head_kv);
    Vec scores(t + 1);
    double max = -1e300;
    for (int64_t p = 0; p <= t; ++p) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += q[hh * D + d] * keys[p][kvh * D + d];
      scores[p] = s / std::sqrt(static_cast<double>(D));
      max = std::max(max, scores[p]);
    }
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - max));
    for (int64_t p = 0; p <= t; ++p) {
      for (int64_t d = 0; d < D; ++d) out[hh * D + d] += scores[p] / sum * values[p][kvh * D + d];
    }
    for (int64_t d = 0; d < D; ++d) out[hh * D + d] *= sigmoid(gate[hh * D + d]);
  }
  return matvec(w, prefix + "attn_output.weight", out);
}

Vec swiglu_ffn(const Tensors& w, const std::string& prefix, const Vec& f) {
  Vec g = matvec(w, prefix + "ffn_gate.weight", f);
  const Vec u = matvec(w, prefix + "ffn_up.weight", f);
  for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  return matvec(w, prefix + "ffn_down.weight", g);
}

// Logits at every position of one sequence, float64; `hidden` receives the output-normed hidden rows.
std::vector<Vec> reference(const Config& c, const Tensors& w, const std::vector<int32_t>& tokens,
                           std::vector<Vec>* hidden = nullptr) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t S = c.ssm_head_dim, Hk = c.ssm_n_head_k, Hv = c.ssm_n_head_v;
  const int64_t channels = 2 * Hk * S + Hv * S;
  std::vector<Vec> conv_inputs;                 // qkv rows of every token so far
  std::vector<Vec> state(Hv, Vec(S * S, 0.0));  // S_h[i][j] at i * S + j (key i, value j)
  std::vector<Vec> keys, values;                // attention: per position
  std::vector<Vec> logits;
  for (int64_t t = 0; t < n; ++t) {
    Vec x(w.at("token_embd.weight").begin() + tokens[t] * kEmbd,
          w.at("token_embd.weight").begin() + (tokens[t] + 1) * kEmbd);
    const Vec h = rms_norm(x, 0, kEmbd, &w.at("blk.0.attn_norm.weight"));
    Vec mixed;
    if (c.attention) {
      mixed = gated_attention(c, w, "blk.0.", h, t, keys, values);
    } else {
      conv_inputs.push_back(matvec(w, "blk.0.attn_qkv.weight", h));
      const Vec z = matvec(w, "blk.0.attn_gate.weight", h);
      const Vec beta_logits = matvec(w, "blk.0.ssm_beta.weight", h);
      const Vec alpha = matvec(w, "blk.0.ssm_alpha.weight", h);
      Vec conv(channels, 0.0);
      const Vec& taps = w.at("blk.0.ssm_conv1d.weight");
      for (int64_t ch = 0; ch < channels; ++ch) {
        for (int64_t i = 0; i < kConv; ++i) {
          const int64_t src = t - (kConv - 1) + i;  // tap kConv-1 is the current token; earlier ones start at 0
          if (src >= 0) conv[ch] += taps[ch * kConv + i] * conv_inputs[src][ch];
        }
        conv[ch] = silu(conv[ch]);
      }
      Vec y(Hv * S);
      for (int64_t hv = 0; hv < Hv; ++hv) {
        const int64_t hk = hv % Hk;  // qwen35 stores V heads tiled
        Vec q(S), k(S);
        auto l2 = [&](Vec& vec, size_t offset) {  // x / max(||x||, eps)
          double ss = 0;
          for (int64_t i = 0; i < S; ++i) ss += conv[offset + i] * conv[offset + i];
          const double inv = 1.0 / std::max(std::sqrt(ss), kEps);
          for (int64_t i = 0; i < S; ++i) vec[i] = conv[offset + i] * inv;
        };
        l2(q, hk * S);
        l2(k, Hk * S + hk * S);
        const double beta = sigmoid(beta_logits[hv]);
        const double a = alpha[hv] + w.at("blk.0.ssm_dt.bias")[hv];
        const double softplus = a > 20 ? a : std::log1p(std::exp(a));
        const double decay = std::exp(softplus * w.at("blk.0.ssm_a")[hv]);
        Vec& st = state[hv];
        for (double& s : st) s *= decay;
        Vec o(S, 0.0);
        for (int64_t j = 0; j < S; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < S; ++i) sk += st[i * S + j] * k[i];
          const double u = beta * (conv[2 * Hk * S + hv * S + j] - sk);
          for (int64_t i = 0; i < S; ++i) st[i * S + j] += k[i] * u;
        }
        for (int64_t j = 0; j < S; ++j) {
          for (int64_t i = 0; i < S; ++i) o[j] += st[i * S + j] * q[i];
          o[j] /= std::sqrt(static_cast<double>(S));
        }
        const Vec normed = rms_norm(o, 0, S, &w.at("blk.0.ssm_norm.weight"));
        for (int64_t j = 0; j < S; ++j) y[hv * S + j] = normed[j] * silu(z[hv * S + j]);
      }
      mixed = matvec(w, "blk.0.ssm_out.weight", y);
    }
    for (int64_t i = 0; i < kEmbd; ++i) x[i] += mixed[i];
    const Vec d = swiglu_ffn(w, "blk.0.", rms_norm(x, 0, kEmbd, &w.at("blk.0.post_attention_norm.weight")));
    for (int64_t i = 0; i < kEmbd; ++i) x[i] += d[i];
    const Vec out = rms_norm(x, 0, kEmbd, &w.at("output_norm.weight"));
    if (hidden != nullptr) hidden->push_back(out);
    logits.push_back(matvec(w, "output.weight", out));
  }
  return logits;
}

// The MTP block (blk.1) over rows (token[i], hidden[i]) at positions 0.., float64; `hidden_out` receives each
// row's head-normed hidden.
std::vector<Vec> reference_mtp(const Config& c, const Tensors& w, const std::vector<int32_t>& tokens,
                               const std::vector<Vec>& hidden_in, std::vector<Vec>& hidden_out) {
  std::vector<Vec> keys, values, logits;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const Vec e(w.at("token_embd.weight").begin() + tokens[t] * kEmbd,
                w.at("token_embd.weight").begin() + (tokens[t] + 1) * kEmbd);
    Vec eh = rms_norm(e, 0, kEmbd, &w.at("blk.1.nextn.enorm.weight"));
    const Vec hn = rms_norm(hidden_in[t], 0, kEmbd, &w.at("blk.1.nextn.hnorm.weight"));
    eh.insert(eh.end(), hn.begin(), hn.end());
    Vec x = matvec(w, "blk.1.nextn.eh_proj.weight", eh);
    const Vec h = rms_norm(x, 0, kEmbd, &w.at("blk.1.attn_norm.weight"));
    const Vec mixed = gated_attention(c, w, "blk.1.", h, static_cast<int64_t>(t), keys, values);
    for (int64_t i = 0; i < kEmbd; ++i) x[i] += mixed[i];
    const Vec d = swiglu_ffn(w, "blk.1.", rms_norm(x, 0, kEmbd, &w.at("blk.1.post_attention_norm.weight")));
    for (int64_t i = 0; i < kEmbd; ++i) x[i] += d[i];
    hidden_out.push_back(rms_norm(x, 0, kEmbd, &w.at("blk.1.nextn.shared_head_norm.weight")));
    logits.push_back(matvec(w, "output.weight", hidden_out.back()));
  }
  return logits;
}

class Qwen35LayerReference : public ::testing::TestWithParam<Config> {};

TEST_P(Qwen35LayerReference, PrefillAndDecodeMatchFloat64Math) {
  const Config& c = GetParam();
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::string("rewind_layer_") + c.name + std::to_string(::getpid()) + ".gguf"))
                               .string();
  const Built built = build_model(c, path);
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  for (int n_prompt : {1, 2, 63, 200}) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n_prompt + 3; ++i) tokens.push_back((i * 97 + n_prompt * 13 + 5) % kVocab);
    const std::vector<Vec> expected = reference(c, built.w, tokens);
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
      // float32 end to end against float64: errors grow with the sequence through the recurrent state.
      EXPECT_LT(max_error, 5e-4 * std::max(1.0, max_abs))
          << c.name << " prompt " << n_prompt << " position " << position;
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

// The MTP block fed the trunk's hidden rows, logits and its own hidden output (what a chained step reads)
// against the float64 forward of the block.
TEST(Qwen35MtpReference, BlockMatchesFloat64Math) {
  const Config c{"mtp", false, 2, 4, 32, 4, 2, 64, 16};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rewind_mtp_" + std::to_string(::getpid()) + ".gguf")).string();
  const Built built = build_model(c, path, /*with_mtp=*/true);
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  model::ForwardContext ctx(**model, pool, 64);
  state::ModelState state((*model)->kv_specs(), (*model)->recurrent_specs(), 1, 64);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 21; ++i) tokens.push_back((i * 53 + 7) % kVocab);
  std::vector<Vec> trunk_hidden;
  reference(c, built.w, tokens, &trunk_hidden);

  model::Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(batch, state, logits).is_ok());
  std::vector<float> hidden(ctx.hidden_rows(), ctx.hidden_rows() + tokens.size() * kEmbd);

  // Row i predicts the token after next: it reads token i + 1 and the trunk's hidden at i.
  std::vector<int32_t> mtp_tokens(tokens.begin() + 1, tokens.end());
  std::vector<Vec> mtp_hidden_in(trunk_hidden.begin(), trunk_hidden.end() - 1);
  std::vector<Vec> expected_hidden;
  const std::vector<Vec> expected = reference_mtp(c, built.w, mtp_tokens, mtp_hidden_in, expected_hidden);
  batch.clear();
  for (size_t i = 0; i < mtp_tokens.size(); ++i) batch.add(mtp_tokens[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> mtp_logits, mtp_hidden;
  ASSERT_TRUE(ctx.forward_mtp(batch, hidden.data(), state, mtp_logits, mtp_hidden).is_ok());
  for (size_t i = 0; i < mtp_tokens.size(); ++i) {
    double max_error = 0, max_abs = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      max_error = std::max(max_error, std::abs(mtp_logits[i * kVocab + v] - expected[i][v]));
      max_abs = std::max(max_abs, std::abs(expected[i][v]));
    }
    EXPECT_LT(max_error, 5e-4 * std::max(1.0, max_abs)) << "mtp row " << i;
    for (int64_t j = 0; j < kEmbd; ++j) {
      EXPECT_NEAR(mtp_hidden[i * kEmbd + j], expected_hidden[i][j], 1e-3) << "mtp hidden row " << i;
    }
  }
  std::filesystem::remove(path);
}

TEST(Qwen35MtpReference, ModelsWithoutAnMtpBlockSaySo) {
  const Config c{"nomtp", false, 2, 4, 32, 4, 2, 64, 16};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rewind_nomtp_" + std::to_string(::getpid()) + ".gguf")).string();
  build_model(c, path);
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok());
  ThreadPool pool(1);
  model::ForwardContext ctx(**model, pool, 8);
  state::ModelState state((*model)->kv_specs(), (*model)->recurrent_specs(), 1, 8);
  model::Batch batch;
  batch.add(1, 0, 0, true);
  std::vector<float> hidden(kEmbd, 0.5f), logits, hidden_out;
  const Status status = ctx.forward_mtp(batch, hidden.data(), state, logits, hidden_out);
  EXPECT_NE(status.message().find("MTP"), std::string::npos) << status.message();
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(HeadConfigs, Qwen35LayerReference,
                         ::testing::Values(Config{"gdn_k2_v4_d32", false, 2, 4, 32, 4, 2, 64, 16},
                                           Config{"gdn_k1_v3_d64", false, 1, 3, 64, 4, 2, 64, 16},
                                           Config{"gdn_k2_v2_d128", false, 2, 2, 128, 4, 2, 64, 16},
                                           Config{"attn_q4_kv2_d64_rot16", true, 2, 4, 32, 4, 2, 64, 16},
                                           Config{"attn_q6_kv1_d32_rot32", true, 2, 4, 32, 6, 1, 32, 32},
                                           Config{"attn_q2_kv2_d128_rot64", true, 2, 4, 32, 2, 2, 128, 64}),
                         [](const ::testing::TestParamInfo<Config>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace rwd
