// Mamba2 mixer (mamba2, granitehybrid, falcon-h1): one in-projection to z, x, B, C and dt; a causal depthwise
// conv (with optional bias) and SiLU over the x, B, C channels with the slot's window; per head h,
// dt = softplus(dt + dt_bias), and the selective scan S = exp(dt A) S + B (dt x)ᵀ, y = Sᵀ C + D x, where head h
// reads B/C group h / (H / G); then y * SiLU(z), RMSNorm over each group's D / G channels, out-projection.
// The scan is the gated delta rule without the correction (ops/gated_delta.h), so the slot's state,
// its records (conv column, B, dt x, decay) and every rollback policy are those of the delta-rule layers.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void mamba2(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// The five ssm.* keys (conv_kernel, inner_size, state_size, time_step_rank = heads, group_count), checked
// against each other.
Status load_mamba2_hparams(const gguf::GgufFile& file, HParams& hp);

struct Mamba2TensorRules {
  bool conv_bias_required = true;  // mamba2: yes; the hybrids: optional
  bool norm_required = true;       // falcon-h1: optional
};
Status bind_mamba2_weights(WeightBinder& binder, const HParams& hp, int il, const Mamba2TensorRules& rules,
                           LayerWeights& lw);

}  // namespace rwd::model::blocks
