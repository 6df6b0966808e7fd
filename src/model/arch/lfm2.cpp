// lfm2 (LiquidAI LFM2): gated short-convolution layers mixed with GQA attention layers (q/k head norms, NeoX
// RoPE); attention.head_count_kv is per layer and 0 marks a convolution layer. Each layer is
// x += mixer(attn_norm(x)); x += SwiGLU(ffn_norm(x)); the final norm is stored as token_embd_norm.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch/architectures.h"
#include "model/dense_transformer.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::neox;
  hp.qk_norm = true;
  const std::string l_cache_key = gguf::arch_key(hp.arch, ArchKey::shortconv_l_cache);
  REWIND_ASSIGN_OR_RETURN(uint32_t l_cache, file.get_u32(l_cache_key));
  if (l_cache < 2 || l_cache > 16) return Status::errorf("{} is {}, expected 2 .. 16", l_cache_key, l_cache);
  hp.n_shortconv_l_cache = l_cache;

  REWIND_RETURN_IF_ERROR(load_layer_pattern(file, hp, LayerKind::short_conv));
  REWIND_ASSIGN_OR_RETURN(uint32_t n_swa, file.get_u32_or(gguf::arch_key(hp.arch, ArchKey::attention_sliding_window), 0));
  hp.n_swa = n_swa;
  for (LayerParams& layer : hp.layers) layer.sliding_window = n_swa > 0 && layer.kind == LayerKind::attention;
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  if (hp.n_ff <= 0) return Status::errorf("{} is missing", gguf::arch_key(hp.arch, ArchKey::feed_forward_length));
  const int64_t n_embd = hp.n_embd;
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::token_embd_norm, true, w));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    if (hp.layers[il].kind == LayerKind::short_conv) {
      REWIND_ASSIGN_OR_RETURN(lw.shortconv_conv,
                              binder.floats(name(TensorKind::shortconv_conv), {n_embd, hp.n_shortconv_l_cache}));
      REWIND_ASSIGN_OR_RETURN(lw.shortconv_in_proj, binder.matrix(name(TensorKind::shortconv_in_proj), {3 * n_embd, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.shortconv_out_proj, binder.matrix(name(TensorKind::shortconv_out_proj), {n_embd, n_embd}));
    } else {
      REWIND_RETURN_IF_ERROR(bind_attention_projections(binder, hp, il, lw));
      REWIND_ASSIGN_OR_RETURN(lw.attn_q_norm, binder.vector(name(TensorKind::attn_q_norm), hp.head_dim));
      REWIND_ASSIGN_OR_RETURN(lw.attn_k_norm, binder.vector(name(TensorKind::attn_k_norm), hp.head_dim));
    }
    REWIND_ASSIGN_OR_RETURN(lw.ffn_norm, binder.vector(name(TensorKind::ffn_norm), n_embd));
    REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& lfm2() {
  static const ArchInfo info{"lfm2", load_hparams, bind_weights, forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
