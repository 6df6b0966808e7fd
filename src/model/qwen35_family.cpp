#include "model/qwen35_family.h"

#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/blocks/buffers.h"
#include "model/blocks/gated_delta_net.h"
#include "model/blocks/moe.h"
#include "model/dense_transformer.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;

constexpr int64_t kMaxSsmSize = 65536;

}  // namespace

Status load_qwen35_hparams(const gguf::GgufFile& file, HParams& hp, Qwen35Variant variant) {
  const bool moe = variant != Qwen35Variant::qwen35;
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  if (moe) {
    REWIND_RETURN_IF_ERROR(blocks::load_moe_hparams(file, hp));
  } else if (hp.n_ff <= 0) {
    return Status::errorf("{} is missing", gguf::arch_key(hp.arch, ArchKey::feed_forward_length));
  }
  hp.rope_mode = ops::RopeMode::neox;
  hp.qk_norm = true;
  REWIND_ASSIGN_OR_RETURN(uint32_t n_nextn, file.get_u32_or(gguf::arch_key(hp.arch, ArchKey::nextn_predict_layers), 0));
  if (n_nextn >= hp.n_layer) {
    return Status::errorf("{} is {} but block_count is only {}", gguf::arch_key(hp.arch, ArchKey::nextn_predict_layers),
                          n_nextn, hp.n_layer);
  }
  hp.n_nextn = n_nextn;
  hp.n_layer -= hp.n_nextn;

  REWIND_ASSIGN_OR_RETURN(hp.ssm_d_conv, read_count(file, hp, ArchKey::ssm_conv_kernel, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_head_dim, read_count(file, hp, ArchKey::ssm_state_size, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_n_head_k, read_count(file, hp, ArchKey::ssm_group_count, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(hp.ssm_n_head_v, read_count(file, hp, ArchKey::ssm_time_step_rank, kMaxSsmSize));
  REWIND_ASSIGN_OR_RETURN(int64_t d_inner, read_count(file, hp, ArchKey::ssm_inner_size, kMaxSsmSize));
  if (hp.ssm_n_head_v % hp.ssm_n_head_k != 0) {
    return Status::errorf("{} = {} is not a multiple of {} = {}", gguf::arch_key(hp.arch, ArchKey::ssm_time_step_rank),
                          hp.ssm_n_head_v, gguf::arch_key(hp.arch, ArchKey::ssm_group_count), hp.ssm_n_head_k);
  }
  if (d_inner != hp.ssm_n_head_v * hp.ssm_head_dim) {
    return Status::errorf("{} = {}, expected time_step_rank * state_size = {}",
                          gguf::arch_key(hp.arch, ArchKey::ssm_inner_size), d_inner, hp.ssm_n_head_v * hp.ssm_head_dim);
  }
  // llama.cpp's converter writes the pattern per layer (MTP blocks included, as attention) beside the interval;
  // the list wins where both are present, as in llama.cpp.
  const std::string list_key = gguf::arch_key(hp.arch, ArchKey::attention_recurrent_layers);
  if (file.has(list_key)) {
    REWIND_ASSIGN_OR_RETURN(std::vector<bool> recurrent, file.get_bool_array(list_key));
    if (static_cast<int64_t>(recurrent.size()) != hp.n_layer + hp.n_nextn) {
      return Status::errorf("{} has {} entries, expected one per layer including MTP layers ({})", list_key,
                            recurrent.size(), hp.n_layer + hp.n_nextn);
    }
    for (int64_t il = 0; il < hp.n_layer + hp.n_nextn; ++il) {
      if (recurrent[il] && il >= hp.n_layer) {
        return Status::errorf("{}[{}] marks MTP layer {} recurrent; MTP blocks are attention layers", list_key, il, il);
      }
      hp.layers[il].kind = recurrent[il] ? LayerKind::gated_delta : LayerKind::gated_attention;
    }
  } else {
    REWIND_ASSIGN_OR_RETURN(uint32_t interval,
                            file.get_u32_or(gguf::arch_key(hp.arch, ArchKey::full_attention_interval), 4));
    if (interval == 0) return Status::errorf("{} is 0", gguf::arch_key(hp.arch, ArchKey::full_attention_interval));
    for (int64_t il = 0; il < hp.n_layer + hp.n_nextn; ++il) {
      const bool attention = il >= hp.n_layer || (il + 1) % interval == 0;  // MTP blocks are attention
      hp.layers[il].kind = attention ? LayerKind::gated_attention : LayerKind::gated_delta;
    }
  }
  hp.ssm_key_head_mapping = variant == Qwen35Variant::qwen3next ? ops::KeyHeadMapping::divide
                                                                 : ops::KeyHeadMapping::modulo;
  return Status::ok();
}

Status bind_qwen35_weights(WeightBinder& binder, const HParams& hp, Weights& w, Qwen35Variant variant) {
  const bool moe = variant != Qwen35Variant::qwen35;
  const int64_t n_embd = hp.n_embd;
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::output_norm, true, w));
  const int64_t q_width = hp.n_head * hp.head_dim;
  const int64_t kv_width = hp.n_head_kv * hp.head_dim;
  const int64_t qk_width = hp.ssm_n_head_k * hp.ssm_head_dim;
  const int64_t v_width = hp.ssm_n_head_v * hp.ssm_head_dim;
  w.layers.resize(static_cast<size_t>(hp.n_layer + hp.n_nextn));
  for (int il = 0; il < hp.n_layer + hp.n_nextn; ++il) {
    LayerWeights& lw = w.layers[il];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    REWIND_ASSIGN_OR_RETURN(lw.attn_post_norm, binder.vector(name(TensorKind::attn_post_norm), n_embd));
    if (hp.layers[il].kind == LayerKind::gated_delta) {
      const int64_t n_channels = 2 * qk_width + v_width;
      if (!binder.has(name(TensorKind::attn_qkv)) && binder.has(name(TensorKind::ssm_in))) {
        return Status::errorf("tensor '{}' (the legacy fused qkvz projection) is not supported; convert the model "
                              "with a current llama.cpp converter, which writes '{}' and '{}'",
                              name(TensorKind::ssm_in), name(TensorKind::attn_qkv), name(TensorKind::attn_gate));
      }
      REWIND_ASSIGN_OR_RETURN(lw.attn_qkv, binder.matrix(name(TensorKind::attn_qkv), {n_channels, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_gate, binder.matrix(name(TensorKind::attn_gate), {v_width, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.ssm_conv1d, binder.floats(name(TensorKind::ssm_conv1d), {n_channels, hp.ssm_d_conv}));
      REWIND_ASSIGN_OR_RETURN(lw.ssm_dt, binder.vector(gguf::tensor_name(TensorKind::ssm_dt, il, gguf::TensorSuffix::bias),
                                                       hp.ssm_n_head_v));
      REWIND_ASSIGN_OR_RETURN(lw.ssm_a, binder.vector(gguf::tensor_name(TensorKind::ssm_a, il, gguf::TensorSuffix::none),
                                                      hp.ssm_n_head_v));
      if (variant == Qwen35Variant::qwen3next) {
        REWIND_ASSIGN_OR_RETURN(lw.ssm_ba, binder.matrix(name(TensorKind::ssm_ba), {2 * hp.ssm_n_head_v, n_embd}));
      } else {
        REWIND_ASSIGN_OR_RETURN(lw.ssm_beta, binder.matrix(name(TensorKind::ssm_beta), {hp.ssm_n_head_v, n_embd}));
        REWIND_ASSIGN_OR_RETURN(lw.ssm_alpha, binder.matrix(name(TensorKind::ssm_alpha), {hp.ssm_n_head_v, n_embd}));
      }
      REWIND_ASSIGN_OR_RETURN(lw.ssm_norm, binder.vector(name(TensorKind::ssm_norm), hp.ssm_head_dim));
      REWIND_ASSIGN_OR_RETURN(lw.ssm_out, binder.matrix(name(TensorKind::ssm_out), {n_embd, v_width}));
    } else {
      REWIND_ASSIGN_OR_RETURN(lw.attn_q, binder.matrix(name(TensorKind::attn_q), {2 * q_width, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_k, binder.matrix(name(TensorKind::attn_k), {kv_width, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_v, binder.matrix(name(TensorKind::attn_v), {kv_width, n_embd}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_output, binder.matrix(name(TensorKind::attn_output), {n_embd, q_width}));
      REWIND_ASSIGN_OR_RETURN(lw.attn_q_norm, binder.vector(name(TensorKind::attn_q_norm), hp.head_dim));
      REWIND_ASSIGN_OR_RETURN(lw.attn_k_norm, binder.vector(name(TensorKind::attn_k_norm), hp.head_dim));
    }
    if (moe) {
      REWIND_RETURN_IF_ERROR(blocks::bind_moe_weights(binder, hp, il, lw, blocks::kQwen35MoeTensors));
    } else {
      REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
    }
  }
  w.nextn.resize(static_cast<size_t>(hp.n_nextn));
  for (int j = 0; j < hp.n_nextn; ++j) {
    const int il = static_cast<int>(hp.n_layer) + j;
    NextnWeights& nw = w.nextn[j];
    auto name = [il](TensorKind kind) { return gguf::tensor_name(kind, il); };
    REWIND_ASSIGN_OR_RETURN(nw.eh_proj, binder.matrix(name(TensorKind::nextn_eh_proj), {n_embd, 2 * n_embd}));
    REWIND_ASSIGN_OR_RETURN(nw.enorm, binder.vector(name(TensorKind::nextn_enorm), n_embd));
    REWIND_ASSIGN_OR_RETURN(nw.hnorm, binder.vector(name(TensorKind::nextn_hnorm), n_embd));
    nw.shared_head_norm = w.output_norm;
    if (binder.has(name(TensorKind::nextn_shared_head_norm))) {
      REWIND_ASSIGN_OR_RETURN(nw.shared_head_norm, binder.vector(name(TensorKind::nextn_shared_head_norm), n_embd));
    }
    nw.embed_tokens = w.token_embd;
    if (binder.has(name(TensorKind::nextn_embed_tokens))) {
      REWIND_ASSIGN_OR_RETURN(nw.embed_tokens, binder.embeddings(name(TensorKind::nextn_embed_tokens), {hp.n_vocab, n_embd}));
    }
    nw.shared_head_head = w.output;
    if (binder.has(name(TensorKind::nextn_shared_head_head))) {
      REWIND_ASSIGN_OR_RETURN(nw.shared_head_head,
                              binder.matrix(name(TensorKind::nextn_shared_head_head), {hp.n_vocab, n_embd}));
    }
  }
  return Status::ok();
}

void forward_qwen35_mtp(const Model& model, ForwardContext& ctx, const float* hidden_in) {
  const HParams& hp = model.hparams();
  const int il = static_cast<int>(hp.n_layer);  // the first MTP block; chains reuse it
  const NextnWeights& nw = model.weights().nextn[0];
  const int64_t n_tokens = ctx.n_tokens();
  const int64_t n_embd = hp.n_embd;
  compute::Backend& backend = ctx.backend();
  const compute::Rows x{ctx.hidden(), n_tokens, n_embd};  // token embeddings
  const compute::Rows eh{ctx.buffer(blocks::kBufferConvIn, 2 * n_tokens * n_embd), n_tokens, 2 * n_embd};
  backend.rms_norm(x, nw.enorm.f32(), eh.columns(0, n_embd), hp.rms_eps);
  backend.rms_norm({hidden_in, n_tokens, n_embd}, nw.hnorm.f32(), eh.columns(n_embd, n_embd), hp.rms_eps);
  backend.matmul(nw.eh_proj, eh, x);
  // The block is a trunk layer (gated attention, then the FFN or experts after the post-attention norm).
  pre_norm_layer(model, ctx, il, pre_norm_buffers(model, ctx));
  backend.rms_norm(x, nw.shared_head_norm.f32(), x, hp.rms_eps);
}

}  // namespace rwd::model
