// qwen3: like llama with RMSNorm on every q and k head before NeoX-mode RoPE, and an explicit head size
// (attention.key_length) that need not be n_embd / n_head.
#include "model/arch/architectures.h"
#include "model/dense_transformer.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::neox;
  hp.ffn_activation = FfnActivation::silu;
  hp.qk_norm = true;
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_dense_weights(binder, hp, DenseTensorSet{.qk_norm = true}, w);
}

}  // namespace

const ArchInfo& qwen3() {
  static const ArchInfo info{"qwen3", load_hparams, bind_weights, forward_pre_norm_layers, nullptr};
  return info;
}

}  // namespace rwd::model::arch
