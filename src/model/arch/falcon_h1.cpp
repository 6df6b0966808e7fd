// falcon-h1 (TII Falcon-H1): every layer runs GQA attention (NeoX RoPE, no q/k norms) and a Mamba2 mixer side
// by side on the same attn_norm input, x += attention + mamba2, then x += SwiGLU(ffn_norm(x)). The converter
// bakes the µP multipliers into the weights, so none is applied here. The FFN norm is written as
// "blk.N.ffn_norm" with no ".weight" (the name llama.cpp loads); the suffixed name is accepted too.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch/architectures.h"
#include "model/blocks/mamba2.h"
#include "model/dense_transformer.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

using gguf::ArchKey;
using gguf::TensorKind;
using gguf::TensorSuffix;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  if (hp.n_ff <= 0) return Status::errorf("{} is missing", gguf::arch_key(hp.arch, ArchKey::feed_forward_length));
  REWIND_RETURN_IF_ERROR(blocks::load_mamba2_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::neox;
  for (LayerParams& layer : hp.layers) layer.kind = LayerKind::attention_mamba2;
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
    // Optional in llama.cpp but absent from the released checkpoints: refused rather than ignored.
    for (const std::string& unsupported :
         {name(TensorKind::attn_q, TensorSuffix::bias), name(TensorKind::attn_k, TensorSuffix::bias),
          name(TensorKind::attn_v, TensorSuffix::bias), name(TensorKind::attn_output, TensorSuffix::bias),
          name(TensorKind::ffn_gate, TensorSuffix::bias), name(TensorKind::ffn_up, TensorSuffix::bias),
          name(TensorKind::ffn_down, TensorSuffix::bias), name(TensorKind::attn_qkv), name(TensorKind::rope_freqs)}) {
      if (binder.has(unsupported)) return binder.refuse("tensor '{}' is not supported for falcon-h1", unsupported);
    }
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(name(TensorKind::attn_norm), n_embd));
    REWIND_RETURN_IF_ERROR(bind_attention_projections(binder, hp, il, lw));
    REWIND_RETURN_IF_ERROR(blocks::bind_mamba2_weights(binder, hp, il, {false, false}, lw));
    const std::string ffn_norm = name(TensorKind::ffn_norm, TensorSuffix::none);
    if (!binder.has(ffn_norm) && !binder.has(name(TensorKind::ffn_norm))) {
      return binder.refuse("tensor '{}' (or '{}') is missing", ffn_norm, name(TensorKind::ffn_norm));
    }
    REWIND_ASSIGN_OR_RETURN(lw.ffn_norm,
                            binder.vector(binder.has(ffn_norm) ? ffn_norm : name(TensorKind::ffn_norm), n_embd));
    REWIND_RETURN_IF_ERROR(bind_ffn_weights(binder, hp, il, lw));
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& falcon_h1() {
  static const ArchInfo info{"falcon-h1", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
