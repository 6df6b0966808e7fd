// Mixture-of-experts FFN as llama.cpp's build_moe_ffn (qwen35moe, kimi-linear): router scores by softmax or
// sigmoid, the top n_expert_used per token (optionally chosen on score + selection bias), their unbiased
// scores as weights, renormalised and scaled as the hparams say; SwiGLU experts (ungated relu² experts when
// hparams.ffn_activation is relu_sqr: nemotron_h_moe) computed only for the tokens routed to them (only those
// experts' rows are read), summed in routing order; plus an optional shared expert of the same activation,
// scaled by sigmoid(gate · x) when it has that gate. Dense lead layers (n_layer_dense_lead) are the caller's.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/forward_context.h"
#include "model/model.h"
#include "model/weight_binder.h"

namespace rwd::model::blocks {

// x: [n_tokens, n_embd] normed input; out: [n_tokens, n_embd].
void moe(const Model& model, ForwardContext& ctx, int il, const float* x, float* out);

// expert_count, expert_used_count (required); expert_feed_forward_length (default n_ff / n_expert_used);
// shared width: expert_shared_feed_forward_length, else expert_feed_forward_length * expert_shared_count,
// else n_ff; expert_gating_func (1 softmax, 2 sigmoid; default softmax); expert_weights_norm (default true);
// expert_weights_scale (default 1); leading_dense_block_count (default 0, < block_count).
Status load_moe_hparams(const gguf::GgufFile& file, HParams& hp);

// What an architecture's MoE layers hold besides the router and the routed experts.
enum class TensorPresence {
  unused,    // never bound, even when the file has it (the architecture's graph does not read it)
  optional,  // bound when the file has it
  required,  // missing is an error naming the tensor
};
struct MoeTensorRules {
  TensorPresence shared_expert;       // ffn_{gate,up,down}_shexp; present when ffn_up_shexp is
  TensorPresence shared_expert_gate;  // ffn_gate_inp_shexp [n_embd]; only with a shared expert
  TensorPresence selection_bias;      // exp_probs_b.bias [n_expert]
};
// qwen35moe and qwen3next: a shared expert with its sigmoid gate, no selection bias.
inline constexpr MoeTensorRules kQwen35MoeTensors{TensorPresence::required, TensorPresence::required,
                                                  TensorPresence::unused};

// Binds layer il's router, routed experts and what `rules` asks for; absent tensors stay invalid.
Status bind_moe_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw,
                        const MoeTensorRules& rules);

}  // namespace rwd::model::blocks
