// gemma3: embeddings scaled by sqrt(n_embd); q/k head norms; sandwich norms (post-attention and post-FFN);
// GeGLU (tanh GELU); NeoX RoPE. Five of every six layers use a sliding window with rope base 10000, the
// sixth attends globally with the file's rope base and scaling. Norm weights are stored as 1 + w by the
// converter, so they multiply directly.
#include <cmath>

#include "gguf/keys.h"
#include "model/arch/architectures.h"
#include "model/dense_transformer.h"
#include "model/pre_norm_layers.h"

namespace rwd::model::arch {
namespace {

constexpr int kSlidingWindowPattern = 6;
constexpr float kSlidingRopeBase = 10000.0f;

Status load_hparams(const gguf::GgufFile& file, HParams& hp) {
  REWIND_RETURN_IF_ERROR(load_dense_hparams(file, hp));
  hp.rope_mode = ops::RopeMode::neox;
  hp.ffn_activation = FfnActivation::gelu_tanh;
  hp.qk_norm = true;
  hp.post_norms = true;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  REWIND_ASSIGN_OR_RETURN(uint32_t n_swa, file.get_u32(gguf::arch_key(hp.arch, gguf::ArchKey::attention_sliding_window)));
  hp.n_swa = n_swa;
  if (hp.n_swa <= 0) return Status::errorf("{} is {}, expected > 0", gguf::arch_key(hp.arch, gguf::ArchKey::attention_sliding_window), hp.n_swa);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    LayerParams& layer = hp.layers[il];
    layer.sliding_window = il % kSlidingWindowPattern < kSlidingWindowPattern - 1;
    if (layer.sliding_window) {
      layer.rope_freq_base = kSlidingRopeBase;
      layer.rope_freq_scale = 1.0f;
    }
  }
  // The 27B model (62 layers) scales queries by n_embd / n_head instead of the head size.
  const bool is_27b = hp.n_layer == 62;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? hp.n_embd / hp.n_head : hp.head_dim));
  REWIND_ASSIGN_OR_RETURN(hp.final_logit_softcap, file.get_f32_or(gguf::arch_key(hp.arch, gguf::ArchKey::final_logit_softcapping), 0.0f));
  return Status::ok();
}

Status bind_weights(WeightBinder& binder, const HParams& hp, Weights& w) {
  return bind_dense_weights(binder, hp, DenseTensorSet{.qk_norm = true, .post_norms = true}, w);
}

}  // namespace

const ArchInfo& gemma3() {
  static const ArchInfo info{"gemma3", load_hparams, bind_weights, forward_pre_norm_layers, nullptr};
  return info;
}

}  // namespace rwd::model::arch
