// qwen3next (Qwen3-Next): the Qwen3.5 family of qwen35_family.h as its first release — experts in every
// layer, V heads in grouped order (V head h reads K head h / (H_v / H_k), where qwen35 tiles them) and the
// beta / alpha logits in one ssm_ba projection, interleaved per K group.
#include "model/arch/architectures.h"
#include "model/pre_norm_layers.h"
#include "model/qwen35_family.h"

namespace rwd::model::arch {
namespace {

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  return load_qwen35_hparams(file, hp, Qwen35Variant::qwen3next);
}
Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_qwen35_weights(binder, hp, w, Qwen35Variant::qwen3next);
}

}  // namespace

const ArchInfo& qwen3next() {
  static const ArchInfo info{"qwen3next", load_hparams, bind_weights,
                             forward_pre_norm_layers, forward_qwen35_mtp, /*recurrent=*/true};
  return info;
}

}  // namespace rwd::model::arch
