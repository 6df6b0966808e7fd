// kimi-linear (Moonshot Kimi Linear): Kimi Delta Attention layers with multi-head latent attention layers where
// the per-layer attention.head_count_kv is non-zero; attention.head_count is also the KDA head count. Each
// layer is x += mixer(attn_norm(x)); x += FFN(ffn_norm(x)), the FFN dense (SwiGLU of feed_forward_length) in
// the first leading_dense_block_count layers and a mixture of sigmoid-routed experts with a selection bias and
// an ungated shared expert in the others. MLA has no RoPE. The output matrix is never tied.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch/architectures.h"
#include "model/blocks/kimi_delta_attention.h"
#include "model/blocks/mla.h"
#include "model/blocks/moe.h"
#include "model/dense_transformer.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  // Not load_dense_hparams: the attention key/value lengths are the MLA cache row's, not a head size.
  REWIND_RETURN_IF_ERROR(load_trunk_hparams(file, hp));
  REWIND_ASSIGN_OR_RETURN(hp.n_head, read_count(file, hp, ArchKey::attention_head_count, 1024));
  REWIND_RETURN_IF_ERROR(load_layer_pattern(file, hp, LayerKind::kimi_delta));
  for (LayerParams& layer : hp.layers) {
    if (layer.kind == LayerKind::attention) layer.kind = LayerKind::mla;
  }
  REWIND_RETURN_IF_ERROR(blocks::load_mla_hparams(file, hp));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_head_dim, read_count(file, hp, ArchKey::kda_head_dim, ops::kGatedDeltaMaxHeadDim));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_d_conv, read_count(file, hp, ArchKey::ssm_conv_kernel, 16));
  if (hp.ssm_d_conv < 2) return Status::errorf("{} is 1, expected 2 .. 16", gguf::arch_key(hp.arch, ArchKey::ssm_conv_kernel));
  hp.ssm_n_head_k = hp.ssm_n_head_v = hp.n_head;
  if (file.has(gguf::arch_key(hp.arch, ArchKey::feed_forward_length))) {
    REWIND_ASSIGN_OR_RETURN(hp.n_ff, read_count(file, hp, ArchKey::feed_forward_length, 1 << 20));
  }
  REWIND_RETURN_IF_ERROR(blocks::load_moe_hparams(file, hp));
  if (hp.n_layer_dense_lead > 0 && hp.n_ff <= 0) {
    return Status::errorf("{} is missing (the leading dense layers need it)",
                          gguf::arch_key(hp.arch, ArchKey::feed_forward_length));
  }
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  const int64_t n_embd = hp.n_embd;
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::output_norm, false, w));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    if (hp.layers[il].kind == LayerKind::kimi_delta) {
      REWIND_RETURN_IF_ERROR(blocks::bind_kimi_delta_attention_weights(binder, hp, il, lw));
    } else {
      REWIND_RETURN_IF_ERROR(blocks::bind_mla_weights(binder, hp, il, lw));
    }
    REWIND_ASSIGN_OR_RETURN(lw.ffn_norm, binder.vector(name(TensorKind::ffn_norm), n_embd));
    if (il < hp.n_layer_dense_lead) {
      REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
    } else {
      // llama.cpp's kimi graph adds the shared expert ungated and always uses the selection bias.
      constexpr blocks::MoeTensorRules kKimiTensors{blocks::TensorPresence::optional, blocks::TensorPresence::unused,
                                                    blocks::TensorPresence::required};
      REWIND_RETURN_IF_ERROR(blocks::bind_moe_weights(binder, hp, il, lw, kKimiTensors));
    }
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& kimi_linear() {
  static const ArchInfo info{"kimi-linear", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
