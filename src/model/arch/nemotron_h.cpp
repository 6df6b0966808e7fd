// nemotron_h (NVIDIA Nemotron-H, Nemotron-Nano-9B-v2) and nemotron_h_moe (Nemotron-3-Nano-30B-A3B): each layer
// is one of a Mamba2 mixer, NoPE GQA attention or an MLP, x += block(attn_norm(x)), with no second norm. The
// per-layer head_count_kv and feed_forward_length arrays give the kind as llama.cpp reads them: both 0 is Mamba2,
// head_count_kv alone attention, feed_forward_length alone an MLP, ungated down(relu(up x)²). With experts
// (expert_count > 0, the _moe files) each MLP is instead sigmoid-routed relu² experts chosen with a selection
// bias, plus a relu² shared expert. The norm epsilon is layer_norm_epsilon unless the file also has
// layer_norm_rms_epsilon; attention always scales by 1/sqrt(key_length) (llama.cpp reads no attention.scale for
// it). Not supported, and refused by name: latent expert projections (Nemotron 3 Super) and MTP blocks.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch/architectures.h"
#include "model/blocks/mamba2.h"
#include "model/blocks/moe.h"
#include "model/dense_transformer.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;
using gguf::TensorSuffix;

// After load_layer_pattern has marked the attention layers: a layer with a feed_forward_length is an MLP layer.
// llama.cpp reads a missing key as 0 for every layer and a single number as that number for every layer.
Status load_mlp_layers(const gguf::GgufFile& file, HParams& hp) {
  const std::string ff_key = gguf::arch_key(hp.arch, ArchKey::feed_forward_length);
  const gguf::Value* value = file.find(ff_key);
  std::vector<int64_t> n_ff(static_cast<size_t>(hp.n_layer), 0);
  if (value != nullptr && value->type == gguf::ValueType::array) {
    REWIND_ASSIGN_OR_RETURN(n_ff, file.get_i64_array(ff_key));
    if (static_cast<int64_t>(n_ff.size()) != hp.n_layer) {
      return Status::errorf("{} has {} entries, expected one per layer ({})", ff_key, n_ff.size(), hp.n_layer);
    }
  } else if (value != nullptr) {
    REWIND_ASSIGN_OR_RETURN(uint64_t n, file.get_u64(ff_key));
    if (n > (1u << 24)) return Status::errorf("{} is {}, expected at most 16777216", ff_key, n);
    n_ff.assign(n_ff.size(), static_cast<int64_t>(n));
  }
  hp.n_ff = 0;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const int64_t n = n_ff[il];
    if (n == 0) continue;
    if (n < 0 || n > (1 << 24) || (hp.n_ff != 0 && n != hp.n_ff)) {
      return Status::errorf("{}[{}] is {}; MLP layers must share one width in 1 .. 16777216", ff_key, il, n);
    }
    if (hp.layers[il].kind == LayerKind::attention) {
      return Status::errorf("{}[{}] is {} and {}[{}] is {}; a layer is attention or MLP, not both", ff_key, il, n,
                            gguf::arch_key(hp.arch, ArchKey::attention_head_count_kv), il, hp.n_head_kv);
    }
    hp.n_ff = n;
    hp.layers[il].kind = LayerKind::ffn;
  }
  return Status::ok();
}

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp, NormEpsKey::rms_or_layer_norm));
  REWIND_RETURN_IF_ERROR(load_layer_pattern(file, hp, LayerKind::mamba2));
  REWIND_RETURN_IF_ERROR(load_mlp_layers(file, hp));
  REWIND_RETURN_IF_ERROR(blocks::load_mamba2_hparams(file, hp));
  hp.use_rope = false;
  hp.ffn_activation = FfnActivation::relu_sqr;
  for (ArchKey unsupported : {ArchKey::nextn_predict_layers, ArchKey::moe_latent_size}) {
    const std::string key = gguf::arch_key(hp.arch, unsupported);
    REWIND_ASSIGN_OR_RETURN(uint32_t value, file.get_u32_or(key, 0));
    if (value != 0) return Status::errorf("{} is {}; rewind supports only 0 for {}", key, value, hp.arch);
  }
  REWIND_ASSIGN_OR_RETURN(uint32_t n_expert, file.get_u32_or(gguf::arch_key(hp.arch, ArchKey::expert_count), 0));
  if (n_expert == 0) return Status::ok();
  REWIND_RETURN_IF_ERROR(blocks::load_moe_hparams(file, hp));
  // As llama.cpp's graph: sigmoid routing whatever the gating key says, and no renormalisation unless the file
  // asks for it (the loader's default is false here, unlike the other MoE families).
  hp.expert_gating = ExpertGating::sigmoid;
  REWIND_ASSIGN_OR_RETURN(hp.expert_weights_norm,
                          file.get_bool_or(gguf::arch_key(hp.arch, ArchKey::expert_weights_norm), false));
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  const int64_t n_embd = hp.n_embd;
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::output_norm, true, w));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind, TensorSuffix suffix = TensorSuffix::weight) {
      return gguf::tensor_name(kind, il, suffix);
    };
    // Optional in llama.cpp but absent from the released checkpoints (attention_bias and mlp_bias false): refused
    // rather than ignored.
    for (const std::string& unsupported :
         {name(TensorKind::attn_q, TensorSuffix::bias), name(TensorKind::attn_k, TensorSuffix::bias),
          name(TensorKind::attn_v, TensorSuffix::bias), name(TensorKind::attn_output, TensorSuffix::bias),
          name(TensorKind::ffn_up, TensorSuffix::bias), name(TensorKind::ffn_down, TensorSuffix::bias),
          name(TensorKind::attn_qkv), name(TensorKind::ffn_latent_down), name(TensorKind::ffn_latent_up)}) {
      if (binder.has(unsupported)) return binder.refuse("tensor '{}' is not supported for {}", unsupported, hp.arch);
    }
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    if (hp.layers[il].kind == LayerKind::mamba2) {
      REWIND_RETURN_IF_ERROR(blocks::bind_mamba2_weights(binder, hp, il, {false, true}, lw));
    } else if (hp.layers[il].kind == LayerKind::attention) {
      REWIND_RETURN_IF_ERROR(bind_attention_projections(binder, hp, il, lw));
    } else if (hp.n_expert > 0) {
      const blocks::MoeTensorRules rules{blocks::TensorPresence::required, blocks::TensorPresence::unused,
                                         blocks::TensorPresence::required};
      REWIND_RETURN_IF_ERROR(blocks::bind_moe_weights(binder, hp, il, lw, rules));
    } else {
      REWIND_ASSIGN_OR_RETURN(lw.ffn_up, binder.matrix(name(TensorKind::ffn_up), {hp.n_ff, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.ffn_down, binder.matrix(name(TensorKind::ffn_down), {n_embd, hp.n_ff}));
    }
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& nemotron_h() {
  static const ArchInfo info{"nemotron_h", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

const ArchInfo& nemotron_h_moe() {
  static const ArchInfo info{"nemotron_h_moe", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
