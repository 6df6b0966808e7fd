// The Mamba2 mixer of `mamba2` and `granitehybrid` (Granite-4.0-H) against a float64 forward written here from
// the model definition (docs/research/hybrids-2.md §1.3, §2, §4), with no code shared with src/model or the
// kernels. rewind runs the scan as a gated delta rule, so this is the check that the mapping (B as key, dt·x as
// value, exp(dt·A) as decay, head h reading group h / (H/G)) and everything around it (conv window and bias,
// D skip, SiLU(z) gate, per-group norm; granite's scales, NoPE or RoPE attention, FFN) is Mamba2 and not
// merely self-consistent. Random f32 weights in GGUFs built here; 1, 2 and 4 groups, 2 to 4 taps, prompts of
// 1, 2, 63 and 200 tokens, logits at every position of a prefill (then 3 decoded tokens) and of token-by-token
// decoding from an empty state.
// links: rewind_runtime
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "models/reference_logits.h"

namespace rwd {
namespace {

constexpr int64_t kEmbd = 64;
constexpr int64_t kVocab = 200;
constexpr double kEps = 1e-5;
// Mamba2 mixer: H heads of P channels, state N per channel; D = H·P.
constexpr int64_t kSsmHeads = 4;
constexpr int64_t kSsmHeadDim = 8;
constexpr int64_t kState = 16;
constexpr int64_t kInner = kSsmHeads * kSsmHeadDim;
// granitehybrid only: attention and FFN.
constexpr int64_t kFf = 96;
constexpr int64_t kHeads = 4;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = kEmbd / kHeads;
constexpr double kRopeBase = 10000.0;  // the loader's default; the key is not written
constexpr double kEmbdScale = 1.7, kResidualScale = 0.6, kLogitScale = 1.3, kAttnScale = 0.2;

using Vec = std::vector<double>;
using Tensors = std::map<std::string, Vec>;

struct Case {
  std::string name;
  bool granite;                   // granitehybrid, else mamba2
  std::vector<int32_t> kv_heads;  // per layer: 0 = Mamba2, else attention (granite only)
  int64_t taps;                   // ssm.conv_kernel
  int64_t groups;                 // ssm.group_count
  bool rope = false;              // granite: rope.scaling.finetuned
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

int64_t n_layer(const Case& c) { return static_cast<int64_t>(c.kv_heads.size()); }
int64_t conv_channels(const Case& c) { return kInner + 2 * c.groups * kState; }

Tensors build_model(const Case& c, const std::string& path) {
  std::seed_seq seed(c.name.begin(), c.name.end());
  std::mt19937_64 rng(seed);
  gguf::GgufWriter writer;
  Tensors w;
  auto put = [&](const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.add_tensor(name, tensor::DType::f32, shape, std::move(bytes));
    w[name] = Vec(values.begin(), values.end());
  };
  auto size_of = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return static_cast<size_t>(n);
  };
  auto normal = [&](const std::string& name, std::vector<int64_t> shape, double scale, double offset) {
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<float> values(size_of(shape));
    for (float& v : values) v = static_cast<float>(offset + dist(rng));
    put(name, shape, values);
  };
  auto uniform = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<float> values(size_of(shape));
    for (float& v : values) v = static_cast<float>(dist(rng));
    put(name, shape, values);
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    normal(name, {rows, cols}, 1.0 / std::sqrt(static_cast<double>(cols)), 0.0);
  };
  const std::string a = c.granite ? "granitehybrid" : "mamba2";
  writer.set_string("general.architecture", a);
  writer.set_u32(a + ".embedding_length", kEmbd);
  writer.set_u32(a + ".block_count", static_cast<uint32_t>(n_layer(c)));
  writer.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(kEps));
  writer.set_u32(a + ".ssm.conv_kernel", static_cast<uint32_t>(c.taps));
  writer.set_u32(a + ".ssm.inner_size", kInner);
  writer.set_u32(a + ".ssm.state_size", kState);
  writer.set_u32(a + ".ssm.time_step_rank", kSsmHeads);
  writer.set_u32(a + ".ssm.group_count", static_cast<uint32_t>(c.groups));
  if (c.granite) {
    writer.set_u32(a + ".feed_forward_length", kFf);
    writer.set_u32(a + ".attention.head_count", kHeads);
    writer.set_i32_array(a + ".attention.head_count_kv", c.kv_heads);
    writer.set_f32(a + ".embedding_scale", static_cast<float>(kEmbdScale));
    writer.set_f32(a + ".residual_scale", static_cast<float>(kResidualScale));
    writer.set_f32(a + ".logit_scale", static_cast<float>(kLogitScale));
    writer.set_f32(a + ".attention.scale", static_cast<float>(kAttnScale));
    writer.set_bool(a + ".rope.scaling.finetuned", c.rope);
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "qwen2");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(kVocab, 3));
  writer.set_string_array("tokenizer.ggml.merges", {});
  normal("token_embd.weight", {kVocab, kEmbd}, 0.3, 0.0);
  normal("output_norm.weight", {kEmbd}, 0.1, 1.0);
  matrix("output.weight", kVocab, kEmbd);
  const int64_t gn = c.groups * kState;
  for (int il = 0; il < n_layer(c); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    normal(p + "attn_norm.weight", {kEmbd}, 0.1, 1.0);
    if (c.kv_heads[il] == 0) {
      matrix(p + "ssm_in.weight", 2 * kInner + 2 * gn + kSsmHeads, kEmbd);
      normal(p + "ssm_conv1d.weight", {conv_channels(c), c.taps}, 0.5, 0.0);
      // Optional for granitehybrid: its first Mamba2 layer has one, later ones do not.
      if (!c.granite || il == 0) normal(p + "ssm_conv1d.bias", {conv_channels(c)}, 0.3, 0.0);
      // With these, the decays exp(softplus(dt + dt_bias)·A) range from ~0 to ~0.99 (checked below).
      uniform(p + "ssm_dt.bias", {kSsmHeads}, -4.0, -1.0);
      uniform(p + "ssm_a", {kSsmHeads, 1}, -16.0, -1.0);
      normal(p + "ssm_d", {kSsmHeads, 1}, 0.3, 1.0);
      normal(p + "ssm_norm.weight", {c.groups, kInner / c.groups}, 0.3, 1.0);
      matrix(p + "ssm_out.weight", kEmbd, kInner);
    } else {
      matrix(p + "attn_q.weight", kHeads * kHeadDim, kEmbd);
      matrix(p + "attn_k.weight", kKvHeads * kHeadDim, kEmbd);
      matrix(p + "attn_v.weight", kKvHeads * kHeadDim, kEmbd);
      matrix(p + "attn_output.weight", kEmbd, kHeads * kHeadDim);
    }
    if (c.granite) {
      normal(p + "ffn_norm.weight", {kEmbd}, 0.1, 1.0);
      matrix(p + "ffn_gate.weight", kFf, kEmbd);
      matrix(p + "ffn_up.weight", kFf, kEmbd);
      matrix(p + "ffn_down.weight", kEmbd, kFf);
    }
  }
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

// RMSNorm of x[offset, offset + n) times weight[w_offset, w_offset + n).
Vec rms_norm(const Vec& x, size_t offset, size_t n, const Vec& weight, size_t w_offset = 0) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + kEps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[offset + i] * scale * weight[w_offset + i];
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// What the random model exercised, so a passing comparison is not a vacuous one.
struct Coverage {
  double min_decay = 1, max_decay = 0;  // exp(Δ·A) over every head and token
  double scan_abs = 0, skip_abs = 0;    // Σ|Sᵀ C| and Σ|x·D|: the scan must matter beside the skip
};

class Reference {
 public:
  Reference(const Case& c, const Tensors& w) : c_(c), w_(w), rows_(n_layer(c)), keys_(n_layer(c)), values_(n_layer(c)) {
    for (int64_t il = 0; il < n_layer(c); ++il) state_.emplace_back(kSsmHeads * kSsmHeadDim * kState, 0.0);
  }

  Vec next(int32_t token) {
    const int64_t t = t_++;
    const Vec& embd = w_.at("token_embd.weight");
    Vec x(embd.begin() + token * kEmbd, embd.begin() + (token + 1) * kEmbd);
    const double s = c_.granite ? kResidualScale : 1.0;
    if (c_.granite) {
      for (double& v : x) v *= kEmbdScale;
    }
    for (int il = 0; il < n_layer(c_); ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const Vec u = rms_norm(x, 0, kEmbd, w_.at(p + "attn_norm.weight"));
      const Vec m = c_.kv_heads[il] == 0 ? mamba2(il, p, u, t) : attention(il, p, u, t);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += s * m[i];
      if (c_.granite) {
        const Vec f = rms_norm(x, 0, kEmbd, w_.at(p + "ffn_norm.weight"));
        Vec g = matvec(w_, p + "ffn_gate.weight", f);
        const Vec up = matvec(w_, p + "ffn_up.weight", f);
        for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * up[i];
        const Vec d = matvec(w_, p + "ffn_down.weight", g);
        for (int64_t i = 0; i < kEmbd; ++i) x[i] += s * d[i];
      }
    }
    Vec logits = matvec(w_, "output.weight", rms_norm(x, 0, kEmbd, w_.at("output_norm.weight")));
    if (c_.granite) {
      for (double& v : logits) v /= kLogitScale;
    }
    return logits;
  }

  const Coverage& coverage() const { return coverage_; }

 private:
  Vec mamba2(int il, const std::string& p, const Vec& u, int64_t t) {
    const int64_t gn = c_.groups * kState;
    const int64_t channels = conv_channels(c_);
    const Vec proj = matvec(w_, p + "ssm_in.weight", u);  // z (D) | x (D) | B (GN) | C (GN) | dt (H)
    rows_[il].emplace_back(proj.begin() + kInner, proj.begin() + kInner + channels);
    const Vec& conv_w = w_.at(p + "ssm_conv1d.weight");
    const auto bias = w_.find(p + "ssm_conv1d.bias");
    Vec conv(channels, 0.0);
    for (int64_t ch = 0; ch < channels; ++ch) {
      for (int64_t i = 0; i < c_.taps; ++i) {  // tap taps - 1 is the current token; zeros before the first
        const int64_t src = t - (c_.taps - 1) + i;
        if (src >= 0) conv[ch] += conv_w[ch * c_.taps + i] * rows_[il][src][ch];
      }
      if (bias != w_.end()) conv[ch] += bias->second[ch];
      conv[ch] = silu(conv[ch]);
    }
    const double* xs = conv.data();                // [H][P]
    const double* b = conv.data() + kInner;        // [G][N]
    const double* cc = conv.data() + kInner + gn;  // [G][N]
    const double* dt = proj.data() + 2 * kInner + 2 * gn;
    Vec& state = state_[il];  // [H][P][N]
    Vec y(kInner, 0.0);
    for (int64_t h = 0; h < kSsmHeads; ++h) {
      const int64_t g = h / (kSsmHeads / c_.groups);
      const double delta = softplus(dt[h] + w_.at(p + "ssm_dt.bias")[h]);
      const double decay = std::exp(delta * w_.at(p + "ssm_a")[h]);
      coverage_.min_decay = std::min(coverage_.min_decay, decay);
      coverage_.max_decay = std::max(coverage_.max_decay, decay);
      for (int64_t q = 0; q < kSsmHeadDim; ++q) {
        const int64_t i = h * kSsmHeadDim + q;
        double* row = state.data() + i * kState;
        for (int64_t n = 0; n < kState; ++n) {
          row[n] = row[n] * decay + b[g * kState + n] * xs[i] * delta;
          y[i] += row[n] * cc[g * kState + n];
        }
        const double skip = xs[i] * w_.at(p + "ssm_d")[h];
        coverage_.scan_abs += std::abs(y[i]);
        coverage_.skip_abs += std::abs(skip);
        y[i] = (y[i] + skip) * silu(proj[i]);
      }
    }
    const int64_t width = kInner / c_.groups;
    Vec normed(kInner);
    for (int64_t g = 0; g < c_.groups; ++g) {
      const Vec chunk = rms_norm(y, g * width, width, w_.at(p + "ssm_norm.weight"), g * width);
      std::copy(chunk.begin(), chunk.end(), normed.begin() + g * width);
    }
    return matvec(w_, p + "ssm_out.weight", normed);
  }

  // GQA softmax attention without q/k norms; RoPE (consecutive pairs) only when c_.rope.
  Vec attention(int il, const std::string& p, const Vec& u, int64_t t) {
    Vec q = matvec(w_, p + "attn_q.weight", u);
    Vec k = matvec(w_, p + "attn_k.weight", u);
    auto rope = [&](Vec& v) {
      for (size_t head = 0; head < v.size() / kHeadDim; ++head) {
        for (int64_t i = 0; i < kHeadDim / 2; ++i) {
          const double theta = static_cast<double>(t) * std::pow(kRopeBase, -2.0 * i / kHeadDim);
          double& x0 = v[head * kHeadDim + 2 * i];
          double& x1 = v[head * kHeadDim + 2 * i + 1];
          const double r0 = x0 * std::cos(theta) - x1 * std::sin(theta);
          const double r1 = x0 * std::sin(theta) + x1 * std::cos(theta);
          x0 = r0;
          x1 = r1;
        }
      }
    };
    if (c_.rope) {
      rope(q);
      rope(k);
    }
    keys_[il].push_back(k);
    values_[il].push_back(matvec(w_, p + "attn_v.weight", u));
    Vec mixed(kHeads * kHeadDim, 0.0);
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t kvh = h / (kHeads / kKvHeads);
      Vec scores(t + 1);
      double max = -1e300, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < kHeadDim; ++d) dot += q[h * kHeadDim + d] * keys_[il][j][kvh * kHeadDim + d];
        scores[j] = dot * kAttnScale;
        max = std::max(max, scores[j]);
      }
      for (double& sc : scores) sum += (sc = std::exp(sc - max));
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t d = 0; d < kHeadDim; ++d) {
          mixed[h * kHeadDim + d] += scores[j] / sum * values_[il][j][kvh * kHeadDim + d];
        }
      }
    }
    return matvec(w_, p + "attn_output.weight", mixed);
  }

  const Case& c_;
  const Tensors& w_;
  int64_t t_ = 0;
  std::vector<std::vector<Vec>> rows_;  // per layer: the pre-conv x | B | C column of every token
  std::vector<Vec> state_;              // per layer: S, [H][P][N]
  std::vector<std::vector<Vec>> keys_, values_;
  Coverage coverage_;
};

class Mamba2Reference : public ::testing::TestWithParam<Case> {};

TEST_P(Mamba2Reference, PrefillAndDecodeMatchFloat64Math) {
  const Case& c = GetParam();
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rewind_m2ref_" + c.name + "_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  const Tensors w = build_model(c, path);
  auto model = model::Model::load(path);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  ThreadPool pool(2);
  for (int n_prompt : {1, 2, 63, 200}) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n_prompt + 3; ++i) tokens.push_back((i * 61 + n_prompt * 7 + 1) % kVocab);
    Reference reference(c, w);
    std::vector<Vec> expected;
    for (int32_t token : tokens) expected.push_back(reference.next(token));
    if (n_prompt == 200) {
      EXPECT_LT(reference.coverage().min_decay, 0.2);
      EXPECT_GT(reference.coverage().max_decay, 0.8);
      EXPECT_GT(reference.coverage().scan_abs, 0.1 * reference.coverage().skip_abs);  // 0.17 .. 0.37 here
    }
    // Logits are ~1-5; rewind's float32 forward lands within 1.4e-6 of the row's largest logit here. 1e-4 of it
    // is 70 times that, and a wrong group, tap, bias, D, gate, norm slice or scale misses it by far.
    test::expect_logits_match_reference(**model, pool, tokens, n_prompt, expected, 1e-4, c.name);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(
    Models, Mamba2Reference,
    ::testing::Values(Case{"mamba2_g2_k4", false, {0, 0}, 4, 2}, Case{"mamba2_g2_k2", false, {0, 0}, 2, 2},
                      Case{"mamba2_g1_k4", false, {0, 0}, 4, 1}, Case{"mamba2_g4_k3", false, {0, 0}, 3, 4},
                      Case{"granite_nope", true, {0, static_cast<int32_t>(kKvHeads), 0}, 4, 2, false},
                      Case{"granite_rope", true, {0, static_cast<int32_t>(kKvHeads), 0}, 4, 2, true}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

}  // namespace
}  // namespace rwd
