// Reference gated delta rule (Gated DeltaNet; Kimi Delta Attention with a per-channel decay): token by token,
// each head's state held in float64 for the whole call and rounded to float once at the end. Also the
// definitions of GatedDeltaParams and KeyHeadMapping that kernels/cpu/gated_delta.h re-exports. The executable
// spec for kernels/cpu/gated_delta; single-threaded and not meant to be fast.
#pragma once

#include <cstdint>

#include "ops/gated_delta.h"

namespace rwd::kernels::ref {

using KeyHeadMapping = ops::KeyHeadMapping;

using GatedDeltaParams = ops::GatedDeltaParams;

// The key head that value head head_v reads under params.mapping.
int64_t key_head_of(int64_t head_v, const GatedDeltaParams& params);

// Per token t and value head h, with S_h[i][j] = state[h][j][i] (i: key index, j: value index):
//   S' = exp(g) ∘ S         (one decay per head, or per key channel i: row i of S scaled by exp(g_i))
//   u  = beta * (v - S'ᵀ k)  (beta * v without subtract_prediction)
//   S  = S' + k uᵀ,  out = scale * Sᵀ q
// Shapes as kernels/cpu/gated_delta.h: q, k [n_tokens, n_head_k, head_k_dim]; v, out, u_out
// [n_tokens, n_head_v, head_v_dim]; g [n_tokens, n_head_v(, head_k_dim)]; beta [n_tokens, n_head_v];
// state [n_head_v, head_v_dim, head_k_dim] updated in place. u_out may be null.
void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                      int64_t n_tokens, float* state, float* out, float* u_out, const GatedDeltaParams& params);

// One head: S = decay ∘ S + k uᵀ in float64, each element rounded once. head_state [head_v_dim, head_k_dim];
// decay: 1 value, or head_k_dim values when params.per_channel_decay.
void apply_gated_delta_record(float* head_state, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params);

}  // namespace rwd::kernels::ref
