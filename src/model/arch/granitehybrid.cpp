// granitehybrid (IBM Granite-4.0-H, Bamba): Mamba2 layers with attention layers where the per-layer
// attention.head_count_kv is non-zero. Each layer is x += s * mixer(attn_norm(x)); x += s * SwiGLU(ffn_norm(x))
// with s = residual_scale; embeddings are multiplied by embedding_scale and logits divided by logit_scale
// (all optional, 1 when absent). Attention is GQA without q/k norms, with RoPE only when
// rope.scaling.finetuned is true (the loader's default; Granite-4.0-H writes false: no positions at all),
// and scaled by attention.scale when given. With expert_count > 0 (Granite-4.0-H-Tiny/Small) every FFN is a
// mixture of softmax-routed experts of feed_forward_length, renormalised, plus an ungated shared expert of
// expert_shared_feed_forward_length when that is non-zero.
#include <cmath>

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

Result<float> read_positive_scale(const gguf::GgufFile& file, const HParams& hp, ArchKey which, float fallback) {
  const std::string key = gguf::arch_key(hp.arch, which);
  REWIND_ASSIGN_OR_RETURN(float value, file.get_f32_or(key, fallback));
  if (!(value > 0.0f) || !std::isfinite(value)) return Status::errorf("{} is {}, expected a positive number", key, value);
  return value;
}

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  if (hp.n_ff <= 0) return Status::errorf("{} is missing", gguf::arch_key(hp.arch, ArchKey::feed_forward_length));
  REWIND_RETURN_IF_ERROR(load_layer_pattern(file, hp, LayerKind::mamba2));
  REWIND_RETURN_IF_ERROR(blocks::load_mamba2_hparams(file, hp));
  REWIND_ASSIGN_OR_RETURN(uint32_t n_expert, file.get_u32_or(gguf::arch_key(hp.arch, ArchKey::expert_count), 0));
  if (n_expert > 0) {
    REWIND_RETURN_IF_ERROR(blocks::load_moe_hparams(file, hp));
    // As llama.cpp's granite graph: the experts are feed_forward_length wide and routed by softmax whatever
    // the gating key says; the shared expert exists only when its width is given.
    hp.n_ff_exp = hp.n_ff;
    hp.expert_gating = ExpertGating::softmax;
    const std::string shared_key = gguf::arch_key(hp.arch, ArchKey::expert_shared_feed_forward_length);
    REWIND_ASSIGN_OR_RETURN(uint32_t n_ff_shexp, file.get_u32_or(shared_key, 0));
    if (n_ff_shexp > (1u << 20)) return Status::errorf("{} is {}, expected at most 1048576", shared_key, n_ff_shexp);
    hp.n_ff_shexp = n_ff_shexp;
  }
  REWIND_ASSIGN_OR_RETURN(hp.use_rope, file.get_bool_or(gguf::arch_key(hp.arch, ArchKey::rope_scaling_finetuned), true));
  REWIND_ASSIGN_OR_RETURN(hp.embd_scale, read_positive_scale(file, hp, ArchKey::embedding_scale, 1.0f));
  REWIND_ASSIGN_OR_RETURN(hp.residual_scale, read_positive_scale(file, hp, ArchKey::residual_scale, 1.0f));
  REWIND_ASSIGN_OR_RETURN(hp.logit_scale, read_positive_scale(file, hp, ArchKey::logit_scale, 1.0f));
  if (file.has(gguf::arch_key(hp.arch, ArchKey::attention_scale))) {
    REWIND_ASSIGN_OR_RETURN(hp.attn_scale, read_positive_scale(file, hp, ArchKey::attention_scale, 1.0f));
  }
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  const int64_t n_embd = hp.n_embd;
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::output_norm, true, w));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    // The converter writes biases only for checkpoints that have them; none of the released ones do, so a
    // bias is refused rather than ignored.
    for (TensorKind kind : {TensorKind::attn_q, TensorKind::attn_k, TensorKind::attn_v, TensorKind::attn_output,
                            TensorKind::ffn_gate, TensorKind::ffn_up, TensorKind::ffn_down}) {
      const std::string bias = gguf::tensor_name(kind, il, gguf::TensorSuffix::bias);
      if (binder.has(bias)) return binder.refuse("tensor '{}': biases are not supported for granitehybrid", bias);
    }
    if (hp.layers[il].kind == LayerKind::mamba2) {
      REWIND_RETURN_IF_ERROR(blocks::bind_mamba2_weights(binder, hp, il, {false, true}, lw));
    } else {
      if (binder.has(name(TensorKind::attn_qkv))) {
        return binder.refuse("tensor '{}' (fused q/k/v) is not supported; convert with separate attn_q, attn_k and "
                              "attn_v", name(TensorKind::attn_qkv));
      }
      REWIND_RETURN_IF_ERROR(bind_attention_projections(binder, hp, il, lw));
    }
    REWIND_ASSIGN_OR_RETURN(lw.ffn_norm, binder.vector(name(TensorKind::ffn_norm), n_embd));
    if (hp.n_expert > 0) {
      const blocks::MoeTensorRules rules{hp.n_ff_shexp > 0 ? blocks::TensorPresence::required
                                                           : blocks::TensorPresence::unused,
                                         blocks::TensorPresence::unused, blocks::TensorPresence::unused};
      REWIND_RETURN_IF_ERROR(blocks::bind_moe_weights(binder, hp, il, lw, rules));
      continue;
    }
    REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& granitehybrid() {
  static const ArchInfo info{"granitehybrid", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
