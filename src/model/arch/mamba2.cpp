// mamba2 (pure Mamba2): every layer is x += Mamba2(attn_norm(x)), no FFN, no attention; the final norm is
// output_norm and the output matrix may be tied to token_embd. The converter writes no attention keys (or
// head_count 0), so only the trunk and ssm.* keys are read.
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/arch/architectures.h"
#include "model/blocks/mamba2.h"
#include "model/dense_transformer.h"
#include "model/model.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

using gguf::TensorKind;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_trunk_hparams(file, hp));
  REWIND_RETURN_IF_ERROR(blocks::load_mamba2_hparams(file, hp));
  for (LayerParams& layer : hp.layers) layer.kind = LayerKind::mamba2;
  // No attention: these only keep the KV-cache sizing well defined (there are no KV layers).
  hp.n_head = hp.n_head_kv = 1;
  hp.head_dim = hp.n_rot = hp.n_embd;
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  REWIND_RETURN_IF_ERROR(bind_embeddings_and_head(binder, hp, TensorKind::output_norm, true, w));
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[il];
    REWIND_ASSIGN_OR_RETURN(lw.attn_norm, binder.vector(gguf::tensor_name(TensorKind::attn_norm, il), hp.n_embd));
    REWIND_RETURN_IF_ERROR(blocks::bind_mamba2_weights(binder, hp, il, {true, true}, lw));
  }
  return Status::ok();
}

}  // namespace

const ArchInfo& mamba2() {
  static const ArchInfo info{"mamba2", load_hparams, bind_weights,
                             forward_pre_norm_layers, nullptr, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
