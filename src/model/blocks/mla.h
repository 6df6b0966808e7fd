// Multi-head latent attention as kimi-linear runs it (no RoPE, no q compression), in llama.cpp's absorbed form
// so the cache holds one row per position: [RMSNorm(kv_lora latent) | k_pe] (kv_lora + rope floats, shared by
// every head). Per head, q = [q_nope | q_pe]; q_nope is carried into the latent space by attn_k_b, so
// scores are [attn_k_b q_nope | q_pe] · row, scaled by 1/sqrt(nope + rope); the attended latent (the rows'
// first kv_lora floats are the values) goes through attn_v_b to the head's value, then attn_output.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void mla(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// attention.key_length_mla, value_length_mla, kv_lora_rank and rope.dimension_count (the k_pe width).
Status load_mla_hparams(const gguf::GgufFile& file, HParams& hp);
Status bind_mla_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw);

}  // namespace rwd::model::blocks
