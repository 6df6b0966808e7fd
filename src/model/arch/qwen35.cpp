// qwen35 (Qwen3.5 with dense FFN layers): the Qwen3.5 family of qwen35_family.h.
#include "model/arch/architectures.h"
#include "model/pre_norm_layers.h"
#include "model/qwen35_family.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  return load_qwen35_hparams(file, hp, Qwen35Variant::qwen35);
}
Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_qwen35_weights(binder, hp, w, Qwen35Variant::qwen35);
}

}  // namespace

const ArchInfo& qwen35() {
  static const ArchInfo info{"qwen35", load_hparams, bind_weights,
                             forward_pre_norm_layers, forward_qwen35_mtp, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
