// lfm2 (LiquidAI LFM2): gated short-convolution layers mixed with GQA attention layers (q/k head norms, NeoX
// RoPE); attention.head_count_kv is per layer and 0 marks a convolution layer. Each layer is
// x += mixer(attn_norm(x)); x += SwiGLU(ffn_norm(x)); the final norm is stored as token_embd_norm.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "kernels/cpu/rms_norm.h"
#include "model/arch/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/buffers.h"
#include "model/blocks/ffn.h"
#include "model/blocks/short_conv.h"
#include "model/dense_transformer.h"
#include "model/forward_context.h"
#include "model/model.h"

namespace rwd::model::arch {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = kernels::cpu::RopeMode::neox;
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

void forward_layers(const Model& model, ForwardContext& ctx) {
  const HParams& hp = model.hparams();
  const Weights& w = model.weights();
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n = n_tokens * hp.n_embd;
  float* x = ctx.hidden();                                // [n_tokens, n_embd]
  float* normed = ctx.buffer(blocks::kBufferNormed, n);   // [n_tokens, n_embd]
  float* mixed = ctx.buffer(blocks::kBufferMixerOut, n);  // [n_tokens, n_embd]
  float* ffn_out = ctx.buffer(blocks::kBufferFfnOut, n);  // [n_tokens, n_embd]
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& lw = w.layers[il];
    kernels::cpu::rms_norm(x, lw.attn_norm.f32(), normed, n_tokens, hp.n_embd, hp.rms_eps);
    if (hp.layers[il].kind == LayerKind::short_conv) {
      blocks::short_conv(model, ctx, il, normed, mixed);
    } else {
      blocks::attention(model, ctx, il, normed, mixed);
    }
    blocks::add_residual(x, mixed, n);
    kernels::cpu::rms_norm(x, lw.ffn_norm.f32(), normed, n_tokens, hp.n_embd, hp.rms_eps);
    blocks::ffn(model, ctx, il, normed, ffn_out);
    blocks::add_residual(x, ffn_out, n);
  }
  kernels::cpu::rms_norm(x, w.output_norm.f32(), x, n_tokens, hp.n_embd, hp.rms_eps);
}

}  // namespace

const ArchInfo& lfm2() {
  static const ArchInfo info{"lfm2", load_hparams, bind_weights, forward_layers, nullptr};
  return info;
}

}  // namespace rwd::model::arch
