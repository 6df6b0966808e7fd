// The Qwen3.5 family (qwen35 dense, qwen35moe, and qwen3next, its predecessor): three Gated DeltaNet layers for every gated-attention layer
// (layer il is attention when (il + 1) % full_attention_interval == 0), pre-norm mixers, post_attention_norm
// before the FFN (SwiGLU, or routed experts plus a gated shared expert), untied or tied output. V heads are
// stored tiled, so V head h reads K head h % n_head_k. The nextn_predict_layers MTP blocks after the trunk
// are not part of the trunk forward.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/hparams.h"
#include "model/weight_binder.h"
#include "model/weights.h"

namespace rwd::model {

class Model;
class ForwardContext;

enum class Qwen35Variant {
  qwen35,     // dense FFN, V heads tiled, separate beta / alpha projections
  qwen35moe,  // as qwen35 with experts
  qwen3next,  // experts; V heads grouped (head h reads K head h / (H_v / H_k)); beta and alpha in one ssm_ba
};

Status load_qwen35_hparams(const gguf::GgufFile& file, HParams& hp, Qwen35Variant variant);
Status bind_qwen35_weights(WeightBinder& binder, const HParams& hp, Weights& w, Qwen35Variant variant);
// The MTP block over ctx.batch(): embeddings of the batch's tokens (already in ctx.hidden()) and the hidden
// states hidden_in [n_tokens, n_embd] (the trunk's output-normed hidden, or the previous MTP step's);
// leaves the block's head-normed hidden in ctx.hidden().
void forward_qwen35_mtp(const Model& model, ForwardContext& ctx, const float* hidden_in);

}  // namespace rwd::model
