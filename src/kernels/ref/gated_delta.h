// Reference gated delta rule (Gated DeltaNet; Kimi Delta Attention with a per-channel decay): token by token,
// each head's state held in float64 for the whole call and rounded to float once at the end. Also the
// definitions of GatedDeltaParams and KeyHeadMapping that kernels/cpu/gated_delta.h re-exports. The executable
// spec for kernels/cpu/gated_delta; single-threaded and not meant to be fast.
#pragma once

#include <cstdint>

namespace rwd::kernels::ref {

enum class KeyHeadMapping {
  modulo,  // value head h reads key head h % n_head_k (qwen35: V heads stored tiled)
  divide,  // value head h reads key head h / (n_head_v / n_head_k) (qwen3next: grouped)
};

struct GatedDeltaParams {
  int64_t n_head_k = 0;
  int64_t n_head_v = 0;            // multiple of n_head_k
  int64_t head_k_dim = 0;
  int64_t head_v_dim = 0;
  bool per_channel_decay = false;  // KDA: g has head_k_dim values per head
  KeyHeadMapping mapping = KeyHeadMapping::modulo;
  float scale = 1.0f;              // applied to o (1/sqrt(head_k_dim) for GDN)
  // false: Mamba2's selective scan, u = beta * v with no S'ᵀk subtracted (k = B, v = x, beta = dt, q = C);
  // the state update, and so the records and their replay, are the same as the delta rule's.
  bool subtract_prediction = true;
};

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
