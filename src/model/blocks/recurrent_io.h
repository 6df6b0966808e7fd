// How a recurrent block's conv and delta rule meet the slot's state under the rollback policy (DESIGN §5):
// in place on the checkpoint (plain tokens; pending records of a lazy commit are folded in first), on a copy
// that leaves per-token records (replay), or writing one full snapshot per token (snapshot). With a rewind
// depth every token also leaves its records: a transaction's in the log, plain tokens' in the rewind ring.
// Every recurrent block (Gated DeltaNet, short conv, and later KDA and Mamba2) goes through these, so a new
// block gets every policy, and rewinding, by calling them.
#pragma once

#include <cstdint>

#include "model/forward_context.h"

namespace rwd::model::blocks {

// The causal conv of one run: x and out are the run's rows, [run length, n_channels].
void run_conv(ForwardContext& ctx, int rl, const RecurrentRun& run, const float* x, int64_t n_channels,
              const float* weight, int64_t d_conv, const float* bias, float* out);

// The gated delta rule of every run of the forward, in one pool round where the runs' modes allow (plain tokens
// and replay: every slot of a decode step or a verify): q, k [n_tokens, n_head_k, dk]; v, out [n_tokens,
// n_head_v, dv]; g [n_tokens, n_head_v] (or [.., dk] per channel), beta [n_tokens, n_head_v], for the whole batch.
void run_delta_rules(ForwardContext& ctx, int rl, const float* q, const float* k, const float* v, const float* g,
                     const float* beta, float* out, const ops::GatedDeltaParams& params);

}  // namespace rwd::model::blocks
