// The MoE router (compute::Backend::route_experts on the CPU backend) against a float64 reference written here from llama.cpp's build_moe_ffn:
// softmax and sigmoid scores, a selection bias that only picks the experts, renormalisation with its clamp,
// the weight scale, ties; then load_moe_hparams on small files (kimi-linear and qwen35moe keys, bad values)
// and bind_moe_weights through a generated qwen35moe with one shared-expert tensor removed.
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <unistd.h>

#include "compute/cpu_backend.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/blocks/moe.h"
#include "model/model.h"
#include "synthetic/synthetic_model.h"

namespace rwd {
namespace {

using model::ExpertGating;
using ops::RouterParams;

struct Reference {
  std::vector<int32_t> experts;
  std::vector<double> weights;
  double margin = INFINITY;  // biased score of the last chosen minus that of the first not chosen
};

// llama.cpp's order: scores, + bias for the choice only, top k (ties to the lower id), unbiased scores of the
// chosen, / max(sum, 2^-14) when norm, * scale unless 0 or 1.
Reference reference_route(const std::vector<float>& logits, int64_t n_used, bool sigmoid, const float* bias, bool norm,
                          double scale) {
  const size_t n = logits.size();
  std::vector<double> probs(n);
  if (sigmoid) {
    for (size_t e = 0; e < n; ++e) probs[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  } else {
    const double max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (size_t e = 0; e < n; ++e) sum += probs[e] = std::exp(logits[e] - max_logit);
    for (double& p : probs) p /= sum;
  }
  std::vector<double> selection = probs;
  if (bias != nullptr) {
    for (size_t e = 0; e < n; ++e) selection[e] += bias[e];
  }
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return selection[a] > selection[b]; });
  Reference ref;
  ref.experts.assign(ids.begin(), ids.begin() + n_used);
  if (static_cast<size_t>(n_used) < n) ref.margin = selection[ids[n_used - 1]] - selection[ids[n_used]];
  double sum = 0.0;
  for (int32_t e : ref.experts) {
    ref.weights.push_back(probs[e]);
    sum += probs[e];
  }
  if (norm) {
    sum = std::max(sum, 6.103515625e-5);
    for (double& w : ref.weights) w /= sum;
  }
  if (scale != 0.0 && scale != 1.0) {
    for (double& w : ref.weights) w *= scale;
  }
  return ref;
}

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, int64_t n_used, const RouterParams& params) {
  Routed routed{std::vector<int32_t>(n_used, -1), std::vector<float>(n_used, NAN)};
  // Working rows left over from a larger routing, as the engine's are: they must not leak into the result.
  const std::unique_ptr<compute::Backend> backend = compute::make_cpu_backend(nullptr);
  std::vector<float> larger(logits.size() + 7, 1e30f);
  std::vector<int32_t> larger_experts(larger.size());
  std::vector<float> larger_weights(larger.size());
  backend->route_experts({larger.data(), 1, static_cast<int64_t>(larger.size())},
                         {ExpertGating::sigmoid, nullptr, false, 1.0f}, static_cast<int64_t>(larger.size()),
                         larger_experts, larger_weights);
  backend->route_experts({logits.data(), 1, static_cast<int64_t>(logits.size())}, params, n_used, routed.experts,
                         routed.weights);
  return routed;
}

void expect_matches(const Routed& got, const Reference& ref, const char* what) {
  ASSERT_EQ(got.experts, ref.experts) << what;
  for (size_t j = 0; j < ref.weights.size(); ++j) {
    EXPECT_NEAR(got.weights[j], ref.weights[j], 2e-6 * std::max(1.0, std::abs(ref.weights[j])))
        << what << ", slot " << j << ", expert " << ref.experts[j];
  }
}

std::set<int32_t> as_set(const std::vector<int32_t>& experts) { return {experts.begin(), experts.end()}; }

struct RandomCase {
  int64_t n_expert;
  int64_t n_used;
  bool sigmoid;
  bool with_bias;
  float bias_stddev;
  bool norm;
  float scale;
};

// Random logits (never all zero) and biases, redrawn while the k-th and (k+1)-th biased scores are so close
// that float rounding could legitimately pick either; then the routing must equal the reference.
void check_random(const RandomCase& c, int n_trials, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit_dist(0.0f, 2.0f);
  std::normal_distribution<float> bias_dist(0.0f, c.bias_stddev);
  std::vector<float> logits(c.n_expert);
  std::vector<float> bias(c.n_expert);
  for (int trial = 0; trial < n_trials; ++trial) {
    Reference ref;
    do {
      for (float& l : logits) l = logit_dist(rng);
      for (float& b : bias) b = bias_dist(rng);
      ref = reference_route(logits, c.n_used, c.sigmoid, c.with_bias ? bias.data() : nullptr, c.norm, c.scale);
    } while (ref.margin < 1e-4 || std::all_of(logits.begin(), logits.end(), [](float l) { return l == 0.0f; }));
    const RouterParams params{c.sigmoid ? ExpertGating::sigmoid : ExpertGating::softmax,
                              c.with_bias ? bias.data() : nullptr, c.norm, c.scale};
    const Routed got = route(logits, c.n_used, params);
    expect_matches(got, ref, ("trial " + std::to_string(trial)).c_str());
    if (c.norm) {
      const double sum = std::accumulate(got.weights.begin(), got.weights.end(), 0.0);
      EXPECT_NEAR(sum, (c.scale == 0.0f ? 1.0 : c.scale), 1e-5 * std::max(1.0f, c.scale));
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(MoeRouting, SoftmaxRenormalisedAsQwen35Moe) {
  for (const auto& [n_expert, n_used] : {std::pair<int64_t, int64_t>{4, 1}, {8, 2}, {64, 4}, {256, 8}, {512, 10}}) {
    SCOPED_TRACE(::testing::Message() << n_expert << " experts, top " << n_used);
    check_random({n_expert, n_used, false, false, 0.0f, true, 1.0f}, 200, 11 + static_cast<uint32_t>(n_expert));
  }
}

TEST(MoeRouting, SoftmaxWithoutNormIsTheSoftmaxOfTheChosen) {
  check_random({64, 4, false, false, 0.0f, false, 1.0f}, 200, 3);
}

TEST(MoeRouting, SigmoidBiasNormScaleAsKimiLinear) {
  // Kimi-Linear-48B-A3B: 256 experts, 8 used, sigmoid, e_score_correction_bias, renormalise, x 2.446.
  check_random({256, 8, true, true, 0.5f, true, 2.446f}, 300, 5);
  check_random({16, 3, true, true, 2.0f, true, 2.446f}, 300, 6);
}

TEST(MoeRouting, SigmoidWithoutNorm) {
  check_random({64, 6, true, false, 0.0f, false, 1.0f}, 200, 7);
  check_random({64, 6, true, true, 0.3f, false, 1.0f}, 200, 8);
  check_random({64, 6, true, true, 0.3f, false, 2.446f}, 200, 9);
}

TEST(MoeRouting, ScaleZeroOrOneLeavesTheWeights) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> logits(32);
  for (float& l : logits) l = dist(rng);
  for (const bool sigmoid : {false, true}) {
    const ExpertGating gating = sigmoid ? ExpertGating::sigmoid : ExpertGating::softmax;
    const Routed one = route(logits, 4, {gating, nullptr, true, 1.0f});
    const Routed zero = route(logits, 4, {gating, nullptr, true, 0.0f});
    EXPECT_EQ(one.experts, zero.experts);
    EXPECT_EQ(one.weights, zero.weights);
    expect_matches(one, reference_route(logits, 4, sigmoid, nullptr, true, 1.0), "scale 1");
  }
}

TEST(MoeRouting, BiasChoosesButTheWeightsAreUnbiased) {
  // Unbiased top 2: experts 0 and 1. The bias lifts 5 and 7 above them (sigmoid(1) + 1 > sigmoid(0.7) + 0.9 >
  // sigmoid(2)).
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f, 0.3f, -0.5f, 1.0f, -2.0f, 0.7f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.9f};
  auto sigmoid = [](double l) { return 1.0 / (1.0 + std::exp(-l)); };
  const Routed unbiased = route(logits, 2, {ExpertGating::sigmoid, nullptr, false, 1.0f});
  ASSERT_EQ(unbiased.experts, (std::vector<int32_t>{0, 1}));
  const Routed biased = route(logits, 2, {ExpertGating::sigmoid, bias.data(), false, 1.0f});
  EXPECT_EQ(biased.experts, (std::vector<int32_t>{5, 7}));
  EXPECT_NE(as_set(biased.experts), as_set(unbiased.experts));
  EXPECT_NEAR(biased.weights[0], sigmoid(1.0), 1e-7);
  EXPECT_NEAR(biased.weights[1], sigmoid(0.7), 1e-7);

  const Routed normed = route(logits, 2, {ExpertGating::sigmoid, bias.data(), true, 2.446f});
  EXPECT_EQ(normed.experts, (std::vector<int32_t>{5, 7}));
  const double sum = sigmoid(1.0) + sigmoid(0.7);
  EXPECT_NEAR(normed.weights[0], 2.446 * sigmoid(1.0) / sum, 2e-6);
  EXPECT_NEAR(normed.weights[1], 2.446 * sigmoid(0.7) / sum, 2e-6);

  // Softmax scores with a bias: the same rule.
  const Routed softmax = route(logits, 2, {ExpertGating::softmax, bias.data(), true, 1.0f});
  expect_matches(softmax, reference_route(logits, 2, false, bias.data(), true, 1.0), "softmax + bias");
  EXPECT_EQ(as_set(softmax.experts), (std::set<int32_t>{5, 7}));

  // Random large biases: the chosen set differs from the unbiased top-k in most trials, always as the reference.
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> random_logits(64);
  std::vector<float> random_bias(64);
  int n_changed = 0;
  for (int trial = 0; trial < 100; ++trial) {
    Reference ref;
    Reference ref_unbiased;
    do {
      for (float& l : random_logits) l = 2.0f * dist(rng);
      for (float& b : random_bias) b = dist(rng);
      ref = reference_route(random_logits, 6, true, random_bias.data(), true, 2.446);
      ref_unbiased = reference_route(random_logits, 6, true, nullptr, true, 2.446);
    } while (ref.margin < 1e-4 || ref_unbiased.margin < 1e-4);
    const Routed got = route(random_logits, 6, {ExpertGating::sigmoid, random_bias.data(), true, 2.446f});
    expect_matches(got, ref, "random bias");
    const Routed got_unbiased = route(random_logits, 6, {ExpertGating::sigmoid, nullptr, true, 2.446f});
    expect_matches(got_unbiased, ref_unbiased, "random, no bias");
    n_changed += as_set(got.experts) != as_set(got_unbiased.experts);
  }
  EXPECT_GT(n_changed, 50);
}

TEST(MoeRouting, TiesGoToTheLowerId) {
  // All equal (not zero): the first k experts, equal weights.
  const std::vector<float> flat(16, 0.7f);
  for (const ExpertGating gating : {ExpertGating::softmax, ExpertGating::sigmoid}) {
    const Routed routed = route(flat, 4, {gating, nullptr, true, 1.0f});
    EXPECT_EQ(routed.experts, (std::vector<int32_t>{0, 1, 2, 3}));
    for (float w : routed.weights) EXPECT_FLOAT_EQ(w, 0.25f);
  }
  // A tie across the cut: 1, 2 and 4 share the top score; 1 and 2 are taken, in id order.
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  const Routed routed = route(logits, 2, {ExpertGating::softmax, nullptr, true, 1.0f});
  EXPECT_EQ(routed.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(routed.weights[0], 0.5f);
  EXPECT_FLOAT_EQ(routed.weights[1], 0.5f);
  // Equal biased scores from equal logits and biases: ties again by id, even behind higher unbiased scores.
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 5.0f, 5.0f};
  const std::vector<float> same = {2.0f, 2.0f, 2.0f, -1.0f, -1.0f};
  const Routed tied = route(same, 3, {ExpertGating::sigmoid, bias.data(), false, 1.0f});
  EXPECT_EQ(tied.experts, (std::vector<int32_t>{3, 4, 0}));
  EXPECT_NEAR(tied.weights[0], 1.0 / (1.0 + std::exp(1.0)), 1e-7);
  EXPECT_NEAR(tied.weights[2], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
}

TEST(MoeRouting, NormClampsATinySum) {
  // Sigmoid scores near 2e-9: their sum is below 2^-14, so llama.cpp divides by 2^-14 instead.
  std::vector<float> logits(8);
  for (size_t e = 0; e < logits.size(); ++e) logits[e] = -20.0f - 0.25f * static_cast<float>(e);
  const Routed routed = route(logits, 2, {ExpertGating::sigmoid, nullptr, true, 1.0f});
  const Reference ref = reference_route(logits, 2, true, nullptr, true, 1.0);
  ASSERT_EQ(routed.experts, ref.experts);
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_NEAR(routed.weights[j], ref.weights[j], 1e-5 * ref.weights[j]);
    EXPECT_NEAR(routed.weights[j], 1.0 / (1.0 + std::exp(-static_cast<double>(logits[j]))) / 6.103515625e-5,
                1e-5 * ref.weights[j]);
  }
  EXPECT_LT(routed.weights[0] + routed.weights[1], 1e-3f);
}

// load_moe_hparams on a file with only the keys below.
class MoeHParams : public ::testing::Test {
 protected:
  Status load(const std::string& arch, const std::function<void(gguf::GgufWriter&)>& keys, model::HParams& hp) {
    file_.reset();
    gguf::GgufWriter writer;
    writer.set_string("general.architecture", arch);
    keys(writer);
    bytes_ = writer.to_bytes();
    auto file = gguf::GgufFile::from_bytes(std::span<const uint8_t>(bytes_), "moe.gguf");
    if (!file.is_ok()) return file.status();
    file_ = std::move(file).value();
    hp.arch = arch;
    return model::blocks::load_moe_hparams(*file_, hp);
  }
  static void kimi_keys(gguf::GgufWriter& w) {
    w.set_u32("kimi-linear.expert_count", 256);
    w.set_u32("kimi-linear.expert_used_count", 8);
    w.set_u32("kimi-linear.expert_feed_forward_length", 1024);
    w.set_u32("kimi-linear.expert_shared_count", 1);
    w.set_u32("kimi-linear.leading_dense_block_count", 1);
    w.set_f32("kimi-linear.expert_weights_scale", 2.446f);
    w.set_u32("kimi-linear.expert_gating_func", 2);
  }
  static model::HParams kimi_hparams() {
    model::HParams hp;
    hp.n_layer = 27;
    hp.n_ff = 9216;
    return hp;
  }
  std::vector<uint8_t> bytes_;
  std::unique_ptr<gguf::GgufFile> file_;
};

TEST_F(MoeHParams, KimiLinear) {
  model::HParams hp = kimi_hparams();
  const Status status = load("kimi-linear", kimi_keys, hp);
  ASSERT_TRUE(status.is_ok()) << status.message();
  EXPECT_EQ(hp.n_expert, 256);
  EXPECT_EQ(hp.n_expert_used, 8);
  EXPECT_EQ(hp.n_ff_exp, 1024);
  EXPECT_EQ(hp.n_ff_shexp, 1024);  // expert_feed_forward_length * expert_shared_count, not n_ff
  EXPECT_EQ(hp.expert_gating, ExpertGating::sigmoid);
  EXPECT_TRUE(hp.expert_weights_norm);  // not written; llama.cpp's kimi-linear graph passes true
  EXPECT_FLOAT_EQ(hp.expert_weights_scale, 2.446f);
  EXPECT_EQ(hp.n_layer_dense_lead, 1);

  hp = kimi_hparams();
  ASSERT_TRUE(load("kimi-linear",
                   [](gguf::GgufWriter& w) {
                     kimi_keys(w);
                     w.set_u32("kimi-linear.expert_shared_count", 2);
                     w.set_bool("kimi-linear.expert_weights_norm", false);
                   },
                   hp)
                  .is_ok());
  EXPECT_EQ(hp.n_ff_shexp, 2048);
  EXPECT_FALSE(hp.expert_weights_norm);
}

TEST_F(MoeHParams, Qwen35MoeDefaultsAreUnchanged) {
  model::HParams hp;
  hp.n_layer = 4;
  hp.n_ff = 96;
  const Status status = load("qwen35moe",
                             [](gguf::GgufWriter& w) {
                               w.set_u32("qwen35moe.expert_count", 8);
                               w.set_u32("qwen35moe.expert_used_count", 2);
                               w.set_u32("qwen35moe.expert_feed_forward_length", 32);
                               w.set_u32("qwen35moe.expert_shared_feed_forward_length", 48);
                             },
                             hp);
  ASSERT_TRUE(status.is_ok()) << status.message();
  EXPECT_EQ(hp.n_ff_exp, 32);
  EXPECT_EQ(hp.n_ff_shexp, 48);
  EXPECT_EQ(hp.expert_gating, ExpertGating::softmax);
  EXPECT_TRUE(hp.expert_weights_norm);
  EXPECT_EQ(hp.expert_weights_scale, 1.0f);
  EXPECT_EQ(hp.n_layer_dense_lead, 0);
}

TEST_F(MoeHParams, BadValuesNameTheKey) {
  struct Case {
    std::function<void(gguf::GgufWriter&)> edit;
    std::vector<std::string> expected;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.expert_gating_func", 3); },
       {"kimi-linear.expert_gating_func", "3"}},
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.expert_gating_func", 0); },
       {"kimi-linear.expert_gating_func", "0"}},
      {[](gguf::GgufWriter& w) { w.set_string("kimi-linear.expert_gating_func", "sigmoid"); },
       {"kimi-linear.expert_gating_func"}},
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.leading_dense_block_count", 28); },
       {"kimi-linear.leading_dense_block_count", "28"}},
      {[](gguf::GgufWriter& w) { w.set_string("kimi-linear.expert_weights_scale", "2.446"); },
       {"kimi-linear.expert_weights_scale"}},
      {[](gguf::GgufWriter& w) { w.set_f32("kimi-linear.expert_weights_scale", NAN); },
       {"kimi-linear.expert_weights_scale"}},
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.expert_weights_norm", 1); },
       {"kimi-linear.expert_weights_norm"}},
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.expert_shared_count", 100000); },
       {"kimi-linear.expert_shared_count", "100000"}},
      {[](gguf::GgufWriter& w) { w.set_u32("kimi-linear.expert_used_count", 300); },
       {"kimi-linear.expert_used_count", "300"}},
  };
  for (const Case& c : cases) {
    model::HParams hp = kimi_hparams();
    const Status status = load("kimi-linear",
                               [&](gguf::GgufWriter& w) {
                                 kimi_keys(w);
                                 c.edit(w);
                               },
                               hp);
    ASSERT_FALSE(status.is_ok()) << c.expected[0];
    for (const std::string& part : c.expected) {
      EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
    }
  }
}

// bind_moe_weights through Model::load of a generated qwen35moe: its shared expert and gate stay required.
class MoeBinding : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rewind_moe_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    base_ = (dir_ / "base.gguf").string();
    ASSERT_TRUE(make_synthetic_model({"qwen35moe", "tiny", "f32", 3, base_}).is_ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The base model without `skip_tensor`; returns the load error ("" when it loaded).
  std::string load_without(const std::string& skip_tensor) {
    auto file = gguf::GgufFile::open(base_);
    EXPECT_TRUE(file.is_ok());
    gguf::GgufWriter writer;
    for (const auto& [key, value] : (*file)->metadata()) writer.set_value(key, value);
    for (const gguf::TensorInfo& info : (*file)->tensors()) {
      if (info.tensor.name == skip_tensor) continue;
      std::vector<int64_t> shape;
      for (int i = info.tensor.n_dims - 1; i >= 0; --i) shape.push_back(info.tensor.ne[i]);
      const auto* bytes = static_cast<const uint8_t*>(info.tensor.data);
      writer.add_tensor(info.tensor.name, info.tensor.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.n_bytes));
    }
    const std::string path = (dir_ / "edited.gguf").string();
    EXPECT_TRUE(writer.write(path).is_ok());
    auto model = model::Model::load(path);
    return model.is_ok() ? "" : model.status().message();
  }

  std::filesystem::path dir_;
  std::string base_;
};

TEST_F(MoeBinding, Qwen35MoeRequiresTheSharedExpertAndItsGate) {
  auto model = model::Model::load(base_);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const model::LayerWeights& lw = (*model)->weights().layers[0];
  EXPECT_TRUE(lw.ffn_gate_shexp.valid());
  EXPECT_TRUE(lw.ffn_gate_inp_shexp.valid());
  EXPECT_FALSE(lw.ffn_exp_probs_b.valid());
  EXPECT_EQ((*model)->hparams().expert_gating, ExpertGating::softmax);
  EXPECT_TRUE((*model)->hparams().expert_weights_norm);

  for (const char* tensor : {"blk.0.ffn_gate_inp_shexp.weight", "blk.1.ffn_gate_shexp.weight",
                             "blk.0.ffn_up_shexp.weight", "blk.2.ffn_down_shexp.weight"}) {
    const std::string message = load_without(tensor);
    EXPECT_NE(message.find(tensor), std::string::npos) << tensor << ": '" << message << "'";
  }
}

}  // namespace
}  // namespace rwd
