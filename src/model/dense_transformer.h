// Shared loading for the dense transformer families (llama, qwen2, qwen3, gemma3): the metadata they have in
// common and the per-layer tensors they share. Each arch file adds what is its own.
#pragma once

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "gguf/keys.h"
#include "gguf/tensor_names.h"
#include "model/hparams.h"
#include "model/weight_binder.h"
#include "model/weights.h"

namespace rwd::model {

struct DenseTensorSet {
  bool qk_norm = false;
  bool post_norms = false;
  bool qkv_bias = false;
};

// Where the RMSNorm epsilon is read: attention.layer_norm_rms_epsilon (required), or, as llama.cpp's
// nemotron_h loader, attention.layer_norm_epsilon (required) unless the rms key is also present.
enum class NormEpsKey { rms, rms_or_layer_norm };

// Reads <arch>.embedding_length, block_count, rms epsilon, context_length and the vocabulary size: what
// every architecture has, attention or not (mamba2). The layers are left as attention layers.
Status load_trunk_hparams(const gguf::GgufFile& file, HParams& hp, NormEpsKey eps_key = NormEpsKey::rms);

// load_trunk_hparams, then <arch>.attention.head_count(_kv), key_length, feed_forward_length,
// rms epsilon, rope base/scale/dimension count, context_length and the vocabulary size.
Status load_dense_hparams(const gguf::GgufFile& file, HParams& hp, NormEpsKey eps_key = NormEpsKey::rms);

// The layer pattern of the hybrids that write <arch>.attention.head_count_kv per layer (lfm2, granitehybrid,
// kimi-linear, nemotron_h): 0 marks a `recurrent` layer, any other count an attention layer; the attention
// layers must share one count, which becomes hp.n_head_kv.
Status load_layer_pattern(const gguf::GgufFile& file, HParams& hp, LayerKind recurrent);

// The pieces every architecture binds the same way. token_embd, the final norm (output_norm, or LFM2's
// token_embd_norm) and output, tied to token_embd when the file has none and the architecture allows it.
Status bind_embeddings_and_head(WeightBinder& binder, const HParams& hp, gguf::TensorKind final_norm, bool may_tie,
                                Weights& w);
// attn_q [n_head*head_dim], attn_k and attn_v [n_head_kv*head_dim], attn_output, over n_embd.
Status bind_attention_projections(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw);
// The SwiGLU FFN of n_ff: ffn_gate, ffn_up, ffn_down.
Status bind_ffn_weights(WeightBinder& binder, const HParams& hp, int il, LayerWeights& lw);
// A count key in 1 .. max (a missing key is an error naming it).
Result<int64_t> read_count(const gguf::GgufFile& file, const HParams& hp, gguf::ArchKey which, int64_t max);

// token_embd, output_norm, output (or tied to token_embd) and every layer's attention + FFN tensors.
Status bind_dense_weights(WeightBinder& binder, const HParams& hp, const DenseTensorSet& set, Weights& w);

}  // namespace rwd::model
