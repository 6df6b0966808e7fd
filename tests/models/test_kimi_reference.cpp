// kimi-linear (Kimi Delta Attention layers with multi-head latent attention layers) against a float64 forward
// written here from the model definition (llama.cpp src/models/kimi-linear.cpp, the delta rule of
// ggml_gated_delta_net), with no code shared with src/model or the kernels. rewind runs MLA in the absorbed form
// (q_nope folded through attn_k_b into the latent row, attn_v_b applied after the softmax) and KDA through its
// gated delta kernel, so this is the check that both are the model and not merely self-consistent: the reference
// expands every head's key and value from the latent row, and runs the delta rule with a per-key-channel decay
// on an explicit [key][value] state. Checked around them: the three causal depthwise convolutions (taps
// contiguous per channel, no bias) and SiLU, the per-head L2 norm of q and k, beta, the low-rank decay and
// output-gate projections, the 1/sqrt(head_dim) q scale (seen only through the output norm's eps), the
// head-shared output RMSNorm and sigmoid gate, the kv latent's RMSNorm and MLA's 1/sqrt(nope + rope) score scale
// without RoPE, the dense SwiGLU FFN of every layer (leading_dense_block_count = block_count; experts are covered
// elsewhere) and the untied output matrix. Where the L2 norm's eps sits is not visible at these sizes.
// Random f32 weights in GGUFs built here; [KDA, MLA] and [MLA, KDA, KDA] with different head counts and sizes,
// 4 and 2 taps; prompts of 1, 2, 63 and 200 tokens, logits at every position of a prefill (then 3 decoded
// tokens) and of token-by-token decoding from an empty state.
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
constexpr int64_t kFf = 96;
constexpr double kEps = 1e-5;

using Vec = std::vector<double>;
using Tensors = std::map<std::string, Vec>;

struct Case {
  std::string name;
  std::vector<int32_t> kv_heads;  // per layer: 0 = KDA, 1 = MLA (attention.head_count_kv)
  int64_t heads;                  // attention.head_count: MLA query heads and KDA heads
  int64_t head_dim;               // kda.head_dim
  int64_t taps;                   // ssm.conv_kernel
  int64_t kv_lora;                // attention.kv_lora_rank
  int64_t rope;                   // rope.dimension_count: the k_pe width (no rotation)
  int64_t nope;                   // attention.key_length_mla - rope
  int64_t v_head;                 // attention.value_length_mla
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

int64_t n_layer(const Case& c) { return static_cast<int64_t>(c.kv_heads.size()); }
int64_t kda_width(const Case& c) { return c.heads * c.head_dim; }
int64_t qk_dim(const Case& c) { return c.nope + c.rope; }

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
  auto normal = [&](const std::string& name, std::vector<int64_t> shape, double scale) {
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<float> values(size_of(shape));
    for (float& v : values) v = static_cast<float>(dist(rng));
    put(name, shape, values);
  };
  auto uniform = [&](const std::string& name, std::vector<int64_t> shape, double lo, double hi) {
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<float> values(size_of(shape));
    for (float& v : values) v = static_cast<float>(dist(rng));
    put(name, shape, values);
  };
  // Shapes are outermost first; the last dimension is the input a matrix multiplies.
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
    normal(name, shape, 1.0 / std::sqrt(static_cast<double>(shape.back())));
  };
  auto norm = [&](const std::string& name, int64_t n) { uniform(name, {n}, 0.8, 1.2); };

  const std::string a = "kimi-linear";
  const int64_t width = kda_width(c);
  writer.set_string("general.architecture", a);
  writer.set_u32(a + ".embedding_length", kEmbd);
  writer.set_u32(a + ".block_count", static_cast<uint32_t>(n_layer(c)));
  writer.set_u32(a + ".feed_forward_length", kFf);
  writer.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.heads));
  writer.set_i32_array(a + ".attention.head_count_kv", c.kv_heads);
  writer.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(kEps));
  writer.set_u32(a + ".attention.key_length_mla", static_cast<uint32_t>(qk_dim(c)));
  writer.set_u32(a + ".attention.value_length_mla", static_cast<uint32_t>(c.v_head));
  writer.set_u32(a + ".attention.kv_lora_rank", static_cast<uint32_t>(c.kv_lora));
  writer.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rope));
  // What the converter writes for the MLA cache row and the (unused) plain head size.
  writer.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.kv_lora + c.rope));
  writer.set_u32(a + ".attention.value_length", static_cast<uint32_t>(kEmbd / c.heads));
  writer.set_u32(a + ".ssm.conv_kernel", static_cast<uint32_t>(c.taps));
  writer.set_u32(a + ".kda.head_dim", static_cast<uint32_t>(c.head_dim));
  writer.set_u32(a + ".vocab_size", kVocab);
  // Every layer's FFN is dense; the expert keys are still required by the loader.
  writer.set_u32(a + ".leading_dense_block_count", static_cast<uint32_t>(n_layer(c)));
  writer.set_u32(a + ".expert_count", 4);
  writer.set_u32(a + ".expert_used_count", 2);
  writer.set_u32(a + ".expert_feed_forward_length", 16);
  writer.set_u32(a + ".expert_shared_count", 1);
  writer.set_u32(a + ".expert_gating_func", 2);
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "qwen2");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(kVocab, 3));
  writer.set_string_array("tokenizer.ggml.merges", {});

  normal("token_embd.weight", {kVocab, kEmbd}, 0.3);
  norm("output_norm.weight", kEmbd);
  matrix("output.weight", {kVocab, kEmbd});
  for (int il = 0; il < n_layer(c); ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    norm(p + "attn_norm.weight", kEmbd);
    if (c.kv_heads[il] == 0) {
      matrix(p + "attn_q.weight", {width, kEmbd});
      matrix(p + "attn_k.weight", {width, kEmbd});
      matrix(p + "attn_v.weight", {width, kEmbd});
      // ggml {K, 1, H·S, 1}, as the converter writes them: channel c's taps are w[c·K .. c·K + K).
      for (const char* x : {"q", "k", "v"}) normal(p + "ssm_conv1d_" + x + ".weight", {1, width, 1, c.taps}, 0.5);
      matrix(p + "ssm_f_a.weight", {c.head_dim, kEmbd});
      matrix(p + "ssm_f_b.weight", {width, c.head_dim});
      // With these, the per-channel decays exp(A·softplus(f + dt_bias)) range from ~0 to ~0.99 (checked below).
      uniform(p + "ssm_dt.bias", {width}, -4.0, -1.0);
      uniform(p + "ssm_a", {1, 1, c.heads, 1}, -16.0, -1.0);  // ggml {1, H, 1, 1}: A = -exp(A_log)
      matrix(p + "ssm_beta.weight", {c.heads, kEmbd});
      matrix(p + "ssm_g_a.weight", {c.head_dim, kEmbd});
      matrix(p + "ssm_g_b.weight", {width, c.head_dim});
      norm(p + "ssm_norm.weight", c.head_dim);
      matrix(p + "attn_output.weight", {kEmbd, width});
    } else {
      matrix(p + "attn_q.weight", {c.heads * qk_dim(c), kEmbd});
      matrix(p + "attn_kv_a_mqa.weight", {c.kv_lora + c.rope, kEmbd});
      norm(p + "attn_kv_a_norm.weight", c.kv_lora);
      matrix(p + "attn_k_b.weight", {c.heads, c.kv_lora, c.nope});  // ggml {nope, kv_lora, H}
      matrix(p + "attn_v_b.weight", {c.heads, c.v_head, c.kv_lora});  // ggml {kv_lora, v_head, H}
      matrix(p + "attn_output.weight", {kEmbd, c.heads * c.v_head});
    }
    norm(p + "ffn_norm.weight", kEmbd);
    matrix(p + "ffn_gate.weight", {kFf, kEmbd});
    matrix(p + "ffn_up.weight", {kFf, kEmbd});
    matrix(p + "ffn_down.weight", {kEmbd, kFf});
  }
  EXPECT_TRUE(writer.write(path).is_ok());
  return w;
}

// y = M x for the row-major M = w[name], read from element `offset` on (for one head of a stacked tensor).
Vec matvec(const Tensors& w, const std::string& name, const Vec& x, size_t rows = 0, size_t offset = 0) {
  const Vec& m = w.at(name);
  if (rows == 0) rows = m.size() / x.size();
  Vec y(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < x.size(); ++i) y[r] += m[offset + r * x.size() + i] * x[i];
  }
  return y;
}

// RMSNorm of x[offset, offset + n) times weight[0, n).
Vec rms_norm(const Vec& x, size_t offset, size_t n, const Vec& weight) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + kEps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[offset + i] * scale * weight[i];
  return y;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// What the random model exercised, so a passing comparison is not a vacuous one.
struct Coverage {
  double min_decay = 1, max_decay = 0;  // exp(g) over every KDA channel and token
  double max_channel_spread = 0;        // per head and token: max - min of exp(g) over its channels, largest seen
  double predicted_abs = 0, value_abs = 0;  // Σ|Sᵀk| and Σ|v|: the delta rule's correction must matter
  double peak = 0;  // MLA: the largest softmax weight times the number of positions it spreads over (1 if uniform)
};

class Reference {
 public:
  Reference(const Case& c, const Tensors& w)
      : c_(c), w_(w), rows_(n_layer(c)), state_(n_layer(c)), keys_(n_layer(c)), values_(n_layer(c)) {
    for (int64_t il = 0; il < n_layer(c); ++il) {
      rows_[il].resize(3);
      state_[il].assign(c.heads * c.head_dim * c.head_dim, 0.0);
    }
  }

  Vec next(int32_t token) {
    const int64_t t = t_++;
    const Vec& embd = w_.at("token_embd.weight");
    Vec x(embd.begin() + token * kEmbd, embd.begin() + (token + 1) * kEmbd);
    for (int il = 0; il < n_layer(c_); ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const Vec u = rms_norm(x, 0, kEmbd, w_.at(p + "attn_norm.weight"));
      const Vec m = c_.kv_heads[il] == 0 ? kda(il, p, u, t) : mla(il, p, u, t);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += m[i];
      const Vec f = rms_norm(x, 0, kEmbd, w_.at(p + "ffn_norm.weight"));
      Vec g = matvec(w_, p + "ffn_gate.weight", f);
      const Vec up = matvec(w_, p + "ffn_up.weight", f);
      for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * up[i];
      const Vec d = matvec(w_, p + "ffn_down.weight", g);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += d[i];
    }
    return matvec(w_, "output.weight", rms_norm(x, 0, kEmbd, w_.at("output_norm.weight")));
  }

  const Coverage& coverage() const { return coverage_; }

 private:
  // Kimi Delta Attention: per head h a state S[i][j] (key channel i, value channel j).
  Vec kda(int il, const std::string& p, const Vec& u, int64_t t) {
    const int64_t dim = c_.head_dim;
    const int64_t width = kda_width(c_);
    // q, k, v: projection, causal depthwise convolution (tap K-1 is the current token, zeros before the
    // first), SiLU.
    Vec qkv[3];
    const char* names[3] = {"q", "k", "v"};
    for (int s = 0; s < 3; ++s) {
      rows_[il][s].push_back(matvec(w_, p + "attn_" + names[s] + ".weight", u));
      const Vec& conv_w = w_.at(p + "ssm_conv1d_" + names[s] + ".weight");
      qkv[s].assign(width, 0.0);
      for (int64_t ch = 0; ch < width; ++ch) {
        for (int64_t i = 0; i < c_.taps; ++i) {
          const int64_t src = t - (c_.taps - 1) + i;
          if (src >= 0) qkv[s][ch] += conv_w[ch * c_.taps + i] * rows_[il][s][src][ch];
        }
        qkv[s][ch] = silu(qkv[s][ch]);
      }
    }
    Vec& q = qkv[0];
    Vec& k = qkv[1];
    const Vec& v = qkv[2];
    // Per-head L2 norm, x / sqrt(Σx² + eps) (llama.cpp build_gdn_l2_norm: rms_norm with eps/n, times 1/sqrt(n)).
    for (Vec* vec : {&q, &k}) {
      for (int64_t h = 0; h < c_.heads; ++h) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += (*vec)[h * dim + i] * (*vec)[h * dim + i];
        const double scale = 1.0 / std::sqrt(ss + kEps);
        for (int64_t i = 0; i < dim; ++i) (*vec)[h * dim + i] *= scale;
      }
    }
    // Per-channel log-decay g = A_h · softplus(f_b(f_a(u)) + dt_bias); beta = sigmoid(b(u)).
    const Vec f = matvec(w_, p + "ssm_f_b.weight", matvec(w_, p + "ssm_f_a.weight", u));
    const Vec& dt_bias = w_.at(p + "ssm_dt.bias");
    const Vec& a = w_.at(p + "ssm_a");
    const Vec beta_logit = matvec(w_, p + "ssm_beta.weight", u);
    const Vec gate = matvec(w_, p + "ssm_g_b.weight", matvec(w_, p + "ssm_g_a.weight", u));
    const double q_scale = 1.0 / std::sqrt(static_cast<double>(dim));
    Vec out(width);
    for (int64_t h = 0; h < c_.heads; ++h) {
      double* s = state_[il].data() + h * dim * dim;  // [i][j]
      const double beta = sigmoid(beta_logit[h]);
      double lo = 1, hi = 0;
      for (int64_t i = 0; i < dim; ++i) {
        const double decay = std::exp(a[h] * softplus(f[h * dim + i] + dt_bias[h * dim + i]));
        lo = std::min(lo, decay);
        hi = std::max(hi, decay);
        for (int64_t j = 0; j < dim; ++j) s[i * dim + j] *= decay;
      }
      coverage_.min_decay = std::min(coverage_.min_decay, lo);
      coverage_.max_decay = std::max(coverage_.max_decay, hi);
      coverage_.max_channel_spread = std::max(coverage_.max_channel_spread, hi - lo);
      Vec delta(dim);
      for (int64_t j = 0; j < dim; ++j) {
        double predicted = 0;  // (Sᵀk)[j]
        for (int64_t i = 0; i < dim; ++i) predicted += s[i * dim + j] * k[h * dim + i];
        coverage_.predicted_abs += std::abs(predicted);
        coverage_.value_abs += std::abs(v[h * dim + j]);
        delta[j] = beta * (v[h * dim + j] - predicted);
      }
      for (int64_t i = 0; i < dim; ++i) {
        for (int64_t j = 0; j < dim; ++j) s[i * dim + j] += k[h * dim + i] * delta[j];
      }
      for (int64_t j = 0; j < dim; ++j) {
        double o = 0;  // (Sᵀq)[j]
        for (int64_t i = 0; i < dim; ++i) o += s[i * dim + j] * q[h * dim + i];
        out[h * dim + j] = o * q_scale;
      }
      // RMSNorm over the head (one weight for every head), times sigmoid of the low-rank gate.
      const Vec normed = rms_norm(out, h * dim, dim, w_.at(p + "ssm_norm.weight"));
      for (int64_t j = 0; j < dim; ++j) out[h * dim + j] = normed[j] * sigmoid(gate[h * dim + j]);
    }
    return matvec(w_, p + "attn_output.weight", out);
  }

  // Multi-head latent attention in its plain form: every head's key [k_nope_h | k_pe] and value are expanded
  // from the normed latent row; no RoPE.
  Vec mla(int il, const std::string& p, const Vec& u, int64_t t) {
    const int64_t qk = qk_dim(c_);
    const Vec q = matvec(w_, p + "attn_q.weight", u);  // [H][nope | rope]
    const Vec latent = matvec(w_, p + "attn_kv_a_mqa.weight", u);  // kv (kv_lora) | k_pe (rope)
    const Vec kv = rms_norm(latent, 0, c_.kv_lora, w_.at(p + "attn_kv_a_norm.weight"));
    Vec key(c_.heads * qk), value(c_.heads * c_.v_head);
    for (int64_t h = 0; h < c_.heads; ++h) {
      // k_nope_h[d] = Σ_r K_b[h][r][d] kv[r]: attn_k_b is [H][kv_lora][nope], so transpose head h's slice.
      const Vec& kb = w_.at(p + "attn_k_b.weight");
      for (int64_t d = 0; d < c_.nope; ++d) {
        double sum = 0;
        for (int64_t r = 0; r < c_.kv_lora; ++r) sum += kb[(h * c_.kv_lora + r) * c_.nope + d] * kv[r];
        key[h * qk + d] = sum;
      }
      for (int64_t d = 0; d < c_.rope; ++d) key[h * qk + c_.nope + d] = latent[c_.kv_lora + d];
      // value_h[e] = Σ_r V_b[h][e][r] kv[r]: attn_v_b is [H][v_head][kv_lora].
      const Vec vh = matvec(w_, p + "attn_v_b.weight", kv, c_.v_head, h * c_.v_head * c_.kv_lora);
      std::copy(vh.begin(), vh.end(), value.begin() + h * c_.v_head);
    }
    keys_[il].push_back(key);
    values_[il].push_back(value);
    const double scale = 1.0 / std::sqrt(static_cast<double>(qk));
    Vec mixed(c_.heads * c_.v_head, 0.0);
    for (int64_t h = 0; h < c_.heads; ++h) {
      Vec scores(t + 1);
      double max = -1e300, sum = 0;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < qk; ++d) dot += q[h * qk + d] * keys_[il][j][h * qk + d];
        scores[j] = dot * scale;
        max = std::max(max, scores[j]);
      }
      for (double& sc : scores) sum += (sc = std::exp(sc - max));
      for (int64_t j = 0; j <= t; ++j) {
        coverage_.peak = std::max(coverage_.peak, scores[j] / sum * static_cast<double>(t + 1));
        for (int64_t e = 0; e < c_.v_head; ++e) {
          mixed[h * c_.v_head + e] += scores[j] / sum * values_[il][j][h * c_.v_head + e];
        }
      }
    }
    return matvec(w_, p + "attn_output.weight", mixed);
  }

  const Case& c_;
  const Tensors& w_;
  int64_t t_ = 0;
  std::vector<std::vector<std::vector<Vec>>> rows_;  // per layer, per q/k/v: the pre-conv projection of every token
  std::vector<Vec> state_;                           // per layer: [H][key][value]
  std::vector<std::vector<Vec>> keys_, values_;      // per layer, per position: [H][nope | rope], [H][v_head]
  Coverage coverage_;
};

class KimiReference : public ::testing::TestWithParam<Case> {};

TEST_P(KimiReference, PrefillAndDecodeMatchFloat64Math) {
  const Case& c = GetParam();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rewind_kimiref_" + c.name + "_" + std::to_string(::getpid()) + ".gguf"))
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
      const Coverage& cov = reference.coverage();
      EXPECT_LT(cov.min_decay, 0.2);
      EXPECT_GT(cov.max_decay, 0.8);
      // Within one head and token the channels' decays differ, so a per-head decay is not the same model.
      EXPECT_GT(cov.max_channel_spread, 0.5);
      EXPECT_GT(cov.predicted_abs, 0.05 * cov.value_abs);  // 0.12 and 0.16 here
      EXPECT_GT(cov.peak, 4.0);  // far from uniform attention: 81 and 61 here
    }
    // rewind's float32 forward lands within 7e-6 of max(1, the row's largest logit) here; 1e-4 of it is 15 times
    // that, and a per-head or per-value-channel decay, a missing kv norm, a SiLU gate, reversed taps or a
    // 1/sqrt(nope) score scale misses it by far.
    test::expect_logits_match_reference(**model, pool, tokens, n_prompt, expected, 1e-4, c.name);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(
    Models, KimiReference,
    ::testing::Values(Case{"kda_mla", {0, 1}, 4, 16, 4, 32, 8, 16, 16},
                      Case{"mla_kda_kda", {1, 0, 0}, 2, 24, 2, 24, 4, 12, 20}),
    [](const ::testing::TestParamInfo<Case>& param) { return param.param.name; });

}  // namespace
}  // namespace rwd
