// Internal: the per-ISA entry points behind conv1d, gated_delta, l2_norm and gated_rms_norm, declared so that
// the public functions can dispatch on has_avx2_fma() and the kernel tests can run each path directly. Not a
// public API: model code calls the functions in conv1d.h, gated_delta.h, l2_norm.h and gated_rms_norm.h.
// The *_avx2 functions are defined in *_avx2.cpp files and may only be called when has_avx2_fma() is true.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/gated_delta.h"
#include "kernels/cpu/gated_rms_norm.h"

namespace rwd {
class ThreadPool;
}

namespace rwd::kernels::cpu::detail {

void causal_conv1d_scalar(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                          const float* bias, float* window, float* out);
void causal_conv1d_avx2(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight, int64_t d_conv,
                        const float* bias, float* window, float* out);
using CausalConv1dFn = void (*)(const float* x, int64_t n_tokens, int64_t n_channels, const float* weight,
                                int64_t d_conv, const float* bias, float* window, float* out);
// causal_conv1d and causal_conv1d_tree (conv1d.h) with a chosen path: their argument checks, then fn.
void causal_conv1d_with(CausalConv1dFn fn, const float* x, int64_t n_tokens, int64_t n_channels, const float* weight,
                        int64_t d_conv, const float* bias, float* window, float* out);
void causal_conv1d_tree_with(CausalConv1dFn fn, const float* x, int64_t n_tokens, const int32_t* parents,
                             int64_t n_channels, const float* weight, int64_t d_conv, const float* bias,
                             const float* window, float* scratch, float* out);

// Leaves window holding the last d_conv - 1 rows of concat(window, x); both paths finish with it.
void shift_conv_window(const float* x, int64_t n_tokens, int64_t n_channels, int64_t d_conv, float* window);

void l2_norm_scalar(const float* x, float* y, int64_t n_rows, int64_t n, float eps);
void l2_norm_avx2(const float* x, float* y, int64_t n_rows, int64_t n, float eps);

void gated_rms_norm_scalar(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                           float eps, GateActivation activation);
void gated_rms_norm_avx2(const float* x, const float* z, const float* weight, float* y, int64_t n_rows, int64_t n,
                         float eps, GateActivation activation);

// One gated_delta_rule() call. Value rows (index j of the state, one head's [head_k_dim] slice each) evolve
// independently of each other, so the work splits into (head, row range) items whose results do not depend on
// the split: each path runs every row through all the tokens with the same arithmetic.
struct GatedDeltaArgs {
  const float* q;
  const float* k;
  const float* v;
  const float* g;
  const float* beta;
  int64_t n_tokens;
  float* state;
  float* out;
  float* u_out;  // may be null
  GatedDeltaParams params;
  // One token whose updated rows nothing reads (a leaf of a token tree): the rows are read, never written, so
  // a leaf beside its siblings needs no copy of its parent's rows. Its outputs and records are as without it.
  bool discard_rows = false;
};

// Rows [row_begin, row_end) of value head `head`, all tokens; `rows` holds those rows (row_begin first), in the
// state or in a working copy. A path's forward and its record apply share one state-update routine, so replay
// is bit-exact within a path; the scalar and AVX2 paths round differently.
using GatedDeltaRowsFn = void (*)(const GatedDeltaArgs& args, int64_t head, int64_t row_begin, int64_t row_end,
                                  float* rows);
void gated_delta_rows_scalar(const GatedDeltaArgs& args, int64_t head, int64_t row_begin, int64_t row_end,
                             float* rows);
void gated_delta_rows_avx2(const GatedDeltaArgs& args, int64_t head, int64_t row_begin, int64_t row_end,
                           float* rows);

// One record on n_rows consecutive rows of a head: rows[j] = decay ∘ rows[j] + k u[j], the path's update.
using ApplyRecordRowsFn = void (*)(float* rows, int64_t n_rows, const float* k, const float* u, const float* decay,
                                   const GatedDeltaParams& params);
void apply_record_rows_scalar(float* rows, int64_t n_rows, const float* k, const float* u, const float* decay,
                              const GatedDeltaParams& params);
void apply_record_rows_avx2(float* rows, int64_t n_rows, const float* k, const float* u, const float* decay,
                            const GatedDeltaParams& params);

// gated_delta_rule() / gated_delta_rule_io() / gated_delta_rules() with a chosen path; the public functions
// pass the one has_avx2_fma() selects.
void gated_delta_rule_with(GatedDeltaRowsFn rows_fn, const GatedDeltaArgs& args, ThreadPool* pool);
void gated_delta_rule_with(GatedDeltaRowsFn rows_fn, ApplyRecordRowsFn apply_fn, const GatedDeltaArgs& args,
                           const GatedDeltaStateIo& io, ThreadPool* pool);
void gated_delta_rules_with(GatedDeltaRowsFn rows_fn, ApplyRecordRowsFn apply_fn,
                            std::span<const GatedDeltaCall> calls, const GatedDeltaParams& params, ThreadPool* pool);

void gated_delta_decay_scalar(const float* g, float* decay, int64_t n);
void gated_delta_decay_avx2(const float* g, float* decay, int64_t n);
void apply_gated_delta_record_scalar(float* head_state, const float* k, const float* u, const float* decay,
                                     const GatedDeltaParams& params);
void apply_gated_delta_record_avx2(float* head_state, const float* k, const float* u, const float* decay,
                                   const GatedDeltaParams& params);

}  // namespace rwd::kernels::cpu::detail
