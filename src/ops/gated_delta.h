// The gated delta rule (Gated DeltaNet; Kimi Delta Attention with a per-channel decay; Mamba2's selective scan
// without the prediction subtracted): the parameter types every implementation shares. Per token t and value
// head h, with S_h[i][j] = state[h][j][i] (i: key index, j: value index; value-major, as llama.cpp stores it):
//   S' = decay(t) ∘ S                     decay = exp(g): one scalar per head, or one per key channel (KDA)
//   u  = beta(t) * (v(t) - S'ᵀ k(t))      the correction, the token's record (beta * v without the prediction)
//   S  = S' + k(t) u(t)ᵀ                  replaying a record does exactly these two lines
//   o(t) = Sᵀ q(t) * scale
// Contract (DESIGN §5): each token's arithmetic is the same whatever the number of tokens, calls, slots, tree
// nodes or threads, and replaying a token's record (k, u and the decay as the decay op made it) leaves the
// state bit-identical to having run the token.
#pragma once

#include <cstdint>

namespace rwd::ops {

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

// head_k_dim and head_v_dim may be any value in 1 .. kGatedDeltaMaxHeadDim.
inline constexpr int64_t kGatedDeltaMaxHeadDim = 512;

// Records of earlier tokens of the same sequence (the corrections u the rule wrote, with k and the decay op's
// exp(g)), applied to a head's rows before the call's own tokens, so the result equals having run those
// tokens first.
struct GatedDeltaRecords {
  const float* k = nullptr;      // [n, n_head_k, head_k_dim]
  const float* u = nullptr;      // [n, n_head_v, head_v_dim]
  const float* decay = nullptr;  // [n, n_head_v] or [n, n_head_v, head_k_dim] when per_channel_decay
  int64_t n = 0;
};

// How a call treats the state it is given (DESIGN §5, rollback by record replay). `fold` records are applied
// to the state and stay there (a commit made lazily: the rows are in cache anyway). With read_only, the
// call's tokens then run on a per-thread copy of each head's rows, after the `ahead` records (tokens of the
// open transaction that earlier calls ran) are applied to the copy; the state keeps only the fold. Without
// read_only, `ahead` must be empty and the tokens update the state in place.
// With `parents` (read_only only), the call's tokens are a tree in depth-first order: token t continues from
// token parents[t] (< t), or from the state after `ahead` when parents[t] is -1, and each token's out and u
// are those of running it after its path.
struct GatedDeltaStateIo {
  GatedDeltaRecords fold;
  GatedDeltaRecords ahead;
  bool read_only = false;
  const int32_t* parents = nullptr;
};

// One sequence's delta rule over n_tokens tokens:
// q, k:   [n_tokens, n_head_k, head_k_dim], L2-normalised by the caller
// v:      [n_tokens, n_head_v, head_v_dim]
// g:      [n_tokens, n_head_v] log-decay (<= 0), or [n_tokens, n_head_v, head_k_dim] when per_channel_decay
// beta:   [n_tokens, n_head_v]
// state:  [n_head_v, head_v_dim, head_k_dim], updated in place (but for io.read_only)
// out:    [n_tokens, n_head_v, head_v_dim]
// u_out:  [n_tokens, n_head_v, head_v_dim] or null (required with read_only); the corrections, the records
// out and u_out must not alias the inputs or the state.
struct GatedDeltaCall {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  int64_t n_tokens = 0;
  float* state = nullptr;
  GatedDeltaStateIo io;
  float* out = nullptr;
  float* u_out = nullptr;
};

}  // namespace rwd::ops
