// qwen2 (Qwen2 / Qwen2.5 / Qwen2.5-Coder): llama's layer with NeoX-mode RoPE and a bias on each of the q, k
// and v projections; no q/k norms. Tied or untied output (the 0.5B and 1.5B Coder files ship an output
// matrix; a file without one ties it to token_embd as llama.cpp does).
#include "model/arch/architectures.h"
#include "model/dense_transformer.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::neox;
  hp.ffn_activation = FfnActivation::silu;
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_dense_weights(binder, hp, DenseTensorSet{.qkv_bias = true}, w);
}

}  // namespace

const ArchInfo& qwen2() {
  static const ArchInfo info{"qwen2", load_hparams, bind_weights, forward_pre_norm_layers, nullptr};
  return info;
}

}  // namespace rwd::model::arch
