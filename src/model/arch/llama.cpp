// llama (SmolLM2, Llama 2/3 without rope frequency factors): pre-norm attention with GQA and normal-mode
// RoPE (llama.cpp's converter permutes q/k rows for it), SwiGLU FFN, tied or untied output.
#include "model/arch/architectures.h"
#include "model/dense_transformer.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::normal;
  hp.ffn_activation = FfnActivation::silu;
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_dense_weights(binder, hp, DenseTensorSet{}, w);
}

}  // namespace

const ArchInfo& llama() {
  static const ArchInfo info{"llama", load_hparams, bind_weights, forward_pre_norm_layers, nullptr};
  return info;
}

}  // namespace rwd::model::arch
