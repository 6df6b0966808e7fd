// qwen35moe (Qwen3.5 MoE): the Qwen3.5 family of qwen35_family.h with routed experts (softmax router,
// top-k, renormalised weights) and a sigmoid-gated shared expert in every layer.
#include "model/arch/architectures.h"
#include "model/pre_norm_layers.h"
#include "model/qwen35_family.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  return load_qwen35_hparams(file, hp, Qwen35Variant::qwen35moe);
}
Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_qwen35_weights(binder, hp, w, Qwen35Variant::qwen35moe);
}

}  // namespace

const ArchInfo& qwen35moe() {
  static const ArchInfo info{"qwen35moe", load_hparams, bind_weights,
                             forward_pre_norm_layers, forward_qwen35_mtp, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
