// Loading a model that is wrong in one specific way fails with a message naming the file, the key or
// tensor, and the expected and found values — never a crash. Each case edits one thing of a valid
// generated model (rewritten through GgufWriter).
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "rewind/engine.h"
#include "synthetic/synthetic_model.h"

namespace rwd {
namespace {

struct Edit {
  std::string skip_key;                 // metadata key to drop
  std::string skip_tensor;              // tensor to drop
  std::function<void(gguf::GgufWriter&)> add;  // extra or replacing entries, added last
  std::string reshape_tensor;           // tensor to write with its rows halved
  std::string pad_tensor;               // tensor to write with an extra outermost dimension of size pad_outer
  int64_t pad_outer = 1;                // > 1 repeats the data that many times
};

class ModelLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rewind_load_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Copies a generated tiny model of `arch` applying `edit`, returns the load error message ("" when it loaded).
  std::string load_edited(const Edit& edit, const std::string& arch = "qwen3") {
    const std::string base = (dir_ / (arch + "-base.gguf")).string();
    if (!std::filesystem::exists(base)) {
      EXPECT_TRUE(make_synthetic_model({arch, "tiny", "f32", 5, base}).is_ok());
    }
    auto file = gguf::GgufFile::open(base);
    EXPECT_TRUE(file.is_ok());
    gguf::GgufWriter writer;
    for (const auto& [key, value] : (*file)->metadata()) {
      if (key == edit.skip_key) continue;
      copy_value(**file, writer, key, value);
    }
    if (edit.add) edit.add(writer);
    for (const gguf::TensorInfo& info : (*file)->tensors()) {
      if (info.tensor.name == edit.skip_tensor) continue;
      std::vector<int64_t> shape;
      for (int i = info.tensor.n_dims - 1; i >= 0; --i) shape.push_back(info.tensor.ne[i]);
      const auto* bytes = static_cast<const uint8_t*>(info.tensor.data);
      size_t n_bytes = info.n_bytes;
      if (info.tensor.name == edit.reshape_tensor) {
        shape[0] /= 2;
        n_bytes /= 2;
      }
      std::vector<uint8_t> data(bytes, bytes + n_bytes);
      if (info.tensor.name == edit.pad_tensor) {
        shape.insert(shape.begin(), edit.pad_outer);
        for (int64_t copy = 1; copy < edit.pad_outer; ++copy) data.insert(data.end(), bytes, bytes + n_bytes);
      }
      writer.add_tensor(info.tensor.name, info.tensor.dtype, shape, std::move(data));
    }
    const std::string path = (dir_ / "edited.gguf").string();
    EXPECT_TRUE(writer.write(path).is_ok());
    auto model = model::Model::load(path);
    return model.is_ok() ? "" : model.status().message();
  }

  static void copy_value(const gguf::GgufFile& file, gguf::GgufWriter& writer, const std::string& key,
                         const gguf::Value& value) {
    switch (value.type) {
      case gguf::ValueType::string: writer.set_string(key, file.get_string(key).value()); break;
      case gguf::ValueType::float32: writer.set_f32(key, file.get_f32(key).value()); break;
      case gguf::ValueType::boolean: writer.set_bool(key, file.get_bool(key).value()); break;
      case gguf::ValueType::array:
        if (value.element_type == gguf::ValueType::string) {
          writer.set_string_array(key, file.get_string_array(key).value());
        } else {
          const std::vector<int64_t> values = file.get_i64_array(key).value();
          std::vector<int32_t> ints(values.begin(), values.end());
          writer.set_i32_array(key, ints);
        }
        break;
      default: writer.set_u32(key, file.get_u32(key).value()); break;
    }
  }

  std::filesystem::path dir_;
};

// llama.cpp's converter writes qwen35's layer pattern as a per-layer list (MTP layers included); it must be
// read, and a list that cannot describe the model named.
TEST_F(ModelLoadErrors, Qwen35RecurrentLayerList) {
  const std::string key = "qwen35.attention.recurrent_layers";
  // The tiny model: 3 Gated DeltaNet layers, 1 attention layer, 1 MTP layer.
  EXPECT_EQ(load_edited({"", "", [&](gguf::GgufWriter& w) { w.set_bool_array(key, {true, true, true, false, false}); },
                         "", "", 1}, "qwen35"), "");
  const std::string wrong_length = load_edited(
      {"", "", [&](gguf::GgufWriter& w) { w.set_bool_array(key, {true, true, false}); }, "", "", 1}, "qwen35");
  EXPECT_NE(wrong_length.find(key), std::string::npos) << wrong_length;
  EXPECT_NE(wrong_length.find("3 entries"), std::string::npos) << wrong_length;
  const std::string recurrent_mtp = load_edited(
      {"", "", [&](gguf::GgufWriter& w) { w.set_bool_array(key, {true, true, true, false, true}); }, "", "", 1}, "qwen35");
  EXPECT_NE(recurrent_mtp.find("MTP layer 4"), std::string::npos) << recurrent_mtp;
  // A list that moves the attention layer: the tensors of layer 3 no longer fit a recurrent layer.
  const std::string moved = load_edited(
      {"", "", [&](gguf::GgufWriter& w) { w.set_bool_array(key, {true, true, false, true, false}); }, "", "", 1}, "qwen35");
  EXPECT_NE(moved, "") << "a pattern contradicting the tensors must not load";
}

TEST_F(ModelLoadErrors, UnmodifiedCopyLoads) { EXPECT_EQ(load_edited({}), ""); }

TEST_F(ModelLoadErrors, UnknownArchitectureIsNamed) {
  const std::string message = load_edited({"general.architecture", "", [](gguf::GgufWriter& w) {
                                             w.set_string("general.architecture", "mamba9");
                                           }, "", "", 1});
  EXPECT_NE(message.find("'mamba9'"), std::string::npos) << message;
  EXPECT_NE(message.find("qwen3"), std::string::npos) << "lists what is supported: " << message;
}

TEST_F(ModelLoadErrors, MissingKeyIsNamed) {
  const std::string message = load_edited({"qwen3.embedding_length", "", nullptr, "", "", 1});
  EXPECT_NE(message.find("qwen3.embedding_length"), std::string::npos) << message;
}

TEST_F(ModelLoadErrors, MissingTensorIsNamed) {
  const std::string message = load_edited({"", "blk.1.ffn_up.weight", nullptr, "", "", 1});
  EXPECT_NE(message.find("blk.1.ffn_up.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST_F(ModelLoadErrors, WrongShapeNamesExpectedAndFound) {
  const std::string message = load_edited({"", "", nullptr, "blk.0.attn_k.weight", "", 1});
  EXPECT_NE(message.find("blk.0.attn_k.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("[32, 128]"), std::string::npos) << "found shape: " << message;
  EXPECT_NE(message.find("[64, 128]"), std::string::npos) << "expected shape: " << message;
}

// llama.cpp's converter and llama-quantize disagree on whether outer dimensions of size 1 are written; both
// files must load, and an outer dimension that is not 1 must still be refused.
TEST_F(ModelLoadErrors, OuterDimensionsOfOneAreTolerated) {
  EXPECT_EQ(load_edited({"", "", nullptr, "", "blk.0.attn_norm.weight", 1}), "");
  EXPECT_EQ(load_edited({"", "", nullptr, "", "blk.0.attn_k.weight", 1}), "");
  const std::string message = load_edited({"", "", nullptr, "", "blk.0.attn_k.weight", 2});
  EXPECT_NE(message.find("blk.0.attn_k.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("expected [64, 128]"), std::string::npos) << message;
}

TEST_F(ModelLoadErrors, InconsistentHeadCountsAreRejected) {
  const std::string message = load_edited({"qwen3.attention.head_count_kv", "", [](gguf::GgufWriter& w) {
                                             w.set_u32("qwen3.attention.head_count_kv", 3);
                                           }, "", "", 1});
  EXPECT_NE(message.find("head_count_kv"), std::string::npos) << message;
}

TEST_F(ModelLoadErrors, WrongKeyTypeIsNamed) {
  const std::string message = load_edited({"qwen3.block_count", "", [](gguf::GgufWriter& w) {
                                             w.set_string("qwen3.block_count", "two");
                                           }, "", "", 1});
  EXPECT_NE(message.find("qwen3.block_count"), std::string::npos) << message;
}

// One f32 tensor of the given shape (outermost first), for edits that add a tensor the model must refuse.
std::function<void(gguf::GgufWriter&)> add_tensor(const std::string& name, std::vector<int64_t> shape) {
  return [name, shape](gguf::GgufWriter& w) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    w.add_tensor(name, tensor::DType::f32, shape, std::vector<uint8_t>(static_cast<size_t>(n) * sizeof(float), 0));
  };
}

TEST_F(ModelLoadErrors, HybridsOfIssue6LoadAndRefuseBadFilesByName) {
  for (const char* arch : {"mamba2", "granitehybrid", "falcon-h1", "kimi-linear"}) {
    EXPECT_EQ(load_edited({}, arch), "") << arch;
  }
  const auto expect_named = [](const std::string& message, const std::string& name) {
    EXPECT_NE(message.find(name), std::string::npos) << "expected '" << name << "' in: " << message;
    EXPECT_NE(message.find(".gguf: "), std::string::npos) << "names the file: " << message;
  };
  // Mamba2: inconsistent sizes, a missing skip vector, a wrong conv shape.
  expect_named(load_edited({"mamba2.ssm.inner_size", "", [](gguf::GgufWriter& w) {
                              w.set_u32("mamba2.ssm.inner_size", 250);
                            }, "", "", 1}, "mamba2"),
               "mamba2.ssm.inner_size");
  expect_named(load_edited({"mamba2.ssm.group_count", "", [](gguf::GgufWriter& w) {
                              w.set_u32("mamba2.ssm.group_count", 3);
                            }, "", "", 1}, "mamba2"),
               "mamba2.ssm.group_count");
  expect_named(load_edited({"", "blk.1.ssm_d", nullptr, "", "", 1}, "mamba2"), "blk.1.ssm_d");
  expect_named(load_edited({"", "", nullptr, "blk.0.ssm_conv1d.weight", "", 1}, "mamba2"), "blk.0.ssm_conv1d.weight");
  // Granite: a bias it would otherwise ignore; a per-layer KV head list of the wrong length.
  expect_named(load_edited({"", "", add_tensor("blk.2.attn_q.bias", {128}), "", "", 1}, "granitehybrid"),
               "blk.2.attn_q.bias");
  expect_named(load_edited({"granitehybrid.attention.head_count_kv", "", [](gguf::GgufWriter& w) {
                              w.set_i32_array("granitehybrid.attention.head_count_kv", {0, 2});
                            }, "", "", 1}, "granitehybrid"),
               "granitehybrid.attention.head_count_kv");
  // Falcon-H1: the FFN norm under either name, and nothing silently dropped.
  expect_named(load_edited({"", "blk.0.ffn_norm", nullptr, "", "", 1}, "falcon-h1"), "blk.0.ffn_norm");
  expect_named(load_edited({"", "", add_tensor("blk.1.rope_freqs.weight", {16}), "", "", 1}, "falcon-h1"),
               "blk.1.rope_freqs.weight");
  // Kimi Linear: q compression and unsplit KV projections (not supported) are refused by name, as is a bad conv.
  expect_named(load_edited({"", "", [](gguf::GgufWriter& w) { w.set_u32("kimi-linear.attention.q_lora_rank", 32); },
                            "", "", 1}, "kimi-linear"),
               "kimi-linear.attention.q_lora_rank");
  expect_named(load_edited({"", "", add_tensor("blk.2.attn_kv_b.weight", {128, 64}), "", "", 1}, "kimi-linear"),
               "blk.2.attn_kv_b.weight");
  expect_named(load_edited({"", "blk.1.exp_probs_b.bias", nullptr, "", "", 1}, "kimi-linear"), "blk.1.exp_probs_b.bias");
  expect_named(load_edited({"", "", nullptr, "blk.0.ssm_f_b.weight", "", 1}, "kimi-linear"), "blk.0.ssm_f_b.weight");
  expect_named(load_edited({"", "blk.1.ssm_conv1d_v.weight", nullptr, "", "", 1}, "kimi-linear"),
               "blk.1.ssm_conv1d_v.weight");
}

// nemotron_h tiny is "MM*-M-": Mamba2, Mamba2, attention, MLP, Mamba2, MLP.
TEST_F(ModelLoadErrors, NemotronHRefusesBadPatternsAndTensorsByName) {
  EXPECT_EQ(load_edited({}, "nemotron_h"), "");
  const auto expect_named = [](const std::string& message, const std::string& name) {
    EXPECT_NE(message.find(name), std::string::npos) << "expected '" << name << "' in: " << message;
    EXPECT_NE(message.find(".gguf: "), std::string::npos) << "names the file: " << message;
  };
  const std::string ff_key = "nemotron_h.feed_forward_length";
  const auto set_ff = [ff_key](std::vector<int32_t> values) {
    return [ff_key, values](gguf::GgufWriter& w) { w.set_i32_array(ff_key, values); };
  };
  // As llama.cpp's loader: layer_norm_epsilon is required even though the norms are RMS norms.
  expect_named(load_edited({"nemotron_h.attention.layer_norm_epsilon", "", nullptr, "", "", 1}, "nemotron_h"),
               "nemotron_h.attention.layer_norm_epsilon");
  expect_named(load_edited({ff_key, "", set_ff({0, 0, 0, 384}), "", "", 1}, "nemotron_h"), ff_key);
  // A layer with both a KV head count and an FFN width, and MLP layers of two widths.
  expect_named(load_edited({ff_key, "", set_ff({0, 0, 384, 384, 0, 384}), "", "", 1}, "nemotron_h"), ff_key);
  expect_named(load_edited({ff_key, "", set_ff({0, 0, 0, 384, 0, 256}), "", "", 1}, "nemotron_h"), ff_key);
  expect_named(load_edited({"", "blk.3.ffn_down.weight", nullptr, "", "", 1}, "nemotron_h"), "blk.3.ffn_down.weight");
  expect_named(load_edited({"", "", nullptr, "blk.5.ffn_up.weight", "", 1}, "nemotron_h"), "blk.5.ffn_up.weight");
  expect_named(load_edited({"", "", add_tensor("blk.3.ffn_up.bias", {384}), "", "", 1}, "nemotron_h"),
               "blk.3.ffn_up.bias");
  expect_named(load_edited({"", "blk.4.ssm_norm.weight", nullptr, "", "", 1}, "nemotron_h"), "blk.4.ssm_norm.weight");
  // The experts' variant: what it does not support (MTP blocks, latent experts) and a missing selection bias.
  EXPECT_EQ(load_edited({}, "nemotron_h_moe"), "");
  expect_named(load_edited({"", "", [](gguf::GgufWriter& w) { w.set_u32("nemotron_h_moe.nextn_predict_layers", 1); },
                            "", "", 1}, "nemotron_h_moe"),
               "nemotron_h_moe.nextn_predict_layers");
  expect_named(load_edited({"", "", add_tensor("blk.3.ffn_latent_down.weight", {64, 128}), "", "", 1},
                           "nemotron_h_moe"),
               "blk.3.ffn_latent_down.weight");
  expect_named(load_edited({"", "blk.5.exp_probs_b.bias", nullptr, "", "", 1}, "nemotron_h_moe"),
               "blk.5.exp_probs_b.bias");
  expect_named(load_edited({"", "blk.3.ffn_up_shexp.weight", nullptr, "", "", 1}, "nemotron_h_moe"),
               "blk.3.ffn_up_shexp.weight");
}

}  // namespace
}  // namespace rwd
