// The gated delta rule (Gated DeltaNet; Kimi Delta Attention with a per-channel decay), run token by token
// over one sequence's recurrent state, in the operation order of DESIGN §5 so that replaying a record is
// bit-identical to what the forward did:
//   S' = decay(t) ∘ S                     decay = exp(g): one scalar per head, or one per key channel (KDA)
//   u  = beta(t) * (v(t) - S'ᵀ k(t))      the correction; written to `u_out` as the token's record
//                                         (Mamba2, params.subtract_prediction false: u = beta(t) * v(t))
//   S  = S' + k(t) u(t)ᵀ                  apply_gated_delta_record() does exactly these two lines
//   o(t) = Sᵀ q(t) * scale
// q and k are expected L2-normalised by the caller. State layout is value-major, as llama.cpp stores it:
// state[h][j][i] = S_h[i][j] (i: key index, j: value index), [n_head_v, head_v_dim, head_k_dim].
// The types are ops/gated_delta.h's.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/ref/gated_delta.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu {

using KeyHeadMapping = ref::KeyHeadMapping;
using GatedDeltaParams = ref::GatedDeltaParams;

inline constexpr int64_t kGatedDeltaMaxHeadDim = ops::kGatedDeltaMaxHeadDim;

// q, k:   [n_tokens, n_head_k, head_k_dim]
// v:      [n_tokens, n_head_v, head_v_dim]
// g:      [n_tokens, n_head_v] log-decay (<= 0), or [n_tokens, n_head_v, head_k_dim] when per_channel_decay
// beta:   [n_tokens, n_head_v]
// state:  [n_head_v, head_v_dim, head_k_dim], updated in place
// out:    [n_tokens, n_head_v, head_v_dim]
// u_out:  [n_tokens, n_head_v, head_v_dim] or null; the corrections, for the record log
// out and u_out must not alias the inputs or the state. Heads (and, when there are fewer than two per thread,
// ranges of value rows within a head) are split over the pool's threads (pool may be null); the result never
// depends on the thread count. Each token's arithmetic is the
// same whatever n_tokens is, so one call over T tokens equals any split of them into consecutive calls.
void gated_delta_rule(const float* q, const float* k, const float* v, const float* g, const float* beta,
                      int64_t n_tokens, float* state, float* out, float* u_out, const GatedDeltaParams& params,
                      ThreadPool* pool);

// decay[i] = exp(g[i]) for n values, computed exactly as gated_delta_rule computes a token's decay (the result
// for one value does not depend on n or on its neighbours). Records must carry decays made by this function:
// another exp (std::exp, a float64 exp) can differ in the last bit and break bit-exact replay.
void gated_delta_decay(const float* g, float* decay, int64_t n);

using GatedDeltaRecords = ops::GatedDeltaRecords;

// Each thread keeps one copy of a head's rows per branching node on a tree's current path (O(depth) copies,
// never one per node).
using GatedDeltaStateIo = ops::GatedDeltaStateIo;

// gated_delta_rule with records applied first and, optionally, the state left untouched by the tokens.
// u_out is required when read_only (the records are then the only trace the tokens leave).
void gated_delta_rule_io(const float* q, const float* k, const float* v, const float* g, const float* beta,
                         int64_t n_tokens, float* state, const GatedDeltaStateIo& io, float* out, float* u_out,
                         const GatedDeltaParams& params, ThreadPool* pool);

// One gated_delta_rule_io() call as a member of a gated_delta_rules() round (the arrays as documented above).
using GatedDeltaCall = ops::GatedDeltaCall;

// Several gated_delta_rule_io() calls of one layer (every slot of a step, DESIGN §5) in one pool round, so a
// step pays one fork-join per layer instead of one per slot, and few heads per slot still fill the threads.
// Calls on the same state must be adjacent; they run in their order on each (head, rows) slice, which is all
// they share, so the result is bit-identical to making the calls one after another, whatever the thread count.
void gated_delta_rules(std::span<const GatedDeltaCall> calls, const GatedDeltaParams& params, ThreadPool* pool);

// Applies one token's record to one head's state: S = decay ∘ S + k uᵀ, with exactly the arithmetic the
// forward uses. head_state: [head_v_dim, head_k_dim]; k: [head_k_dim]; u: [head_v_dim];
// decay: gated_delta_decay(g), 1 value (scalar) or head_k_dim values (per channel).
void apply_gated_delta_record(float* head_state, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params);

}  // namespace rwd::kernels::cpu
