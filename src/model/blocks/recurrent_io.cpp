#include "model/blocks/recurrent_io.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/cpu/conv1d.h"
#include "model/blocks/buffers.h"

namespace rwd::model::blocks {
namespace {

using Mode = state::SpanState::Mode;
using Records = state::SpanState::Records;

// The state a snapshot-mode token starts from: the snapshot of the token it follows (the one before it, or its
// parent in a tree), or the checkpoint for a token that follows the state before the transaction.
float* snapshot_source(state::ModelState& state, const RecurrentRun& run, int64_t t) {
  const int64_t source = run.state.txn_index + (run.parents != nullptr ? run.parents[t] : t - 1);
  return source < 0 ? state.recurrent().slot_data(run.span.slot) : state.snapshot(run.span.slot, source);
}

// The log index of a run's first record.
int64_t first_log_record(const state::SpanState& io) { return io.n_ahead; }

}  // namespace

void run_conv(ForwardContext& ctx, int rl, const RecurrentRun& run, const float* x, int64_t n_channels,
              const float* weight, int64_t d_conv, const float* bias, float* out) {
  state::ModelState& state = ctx.state();
  const int slot = run.span.slot;
  const int64_t n = run.span.end - run.span.begin;
  const state::SpanState& io = run.state;
  const int64_t window_floats = (d_conv - 1) * n_channels;
  REWIND_CHECK(run.parents == nullptr || io.mode == Mode::replay || io.mode == Mode::snapshot,
               "slot {}: a token tree under a mode that runs chains only", slot);
  float* window = state.recurrent().conv_window(rl, slot);
  if (io.backup_first) {
    std::copy_n(window, window_floats, state.backup(slot) + state.recurrent().conv_offset(rl));
    state.count_written(slot, static_cast<size_t>(window_floats) * sizeof(float), true);
  }
  if (io.n_fold > 0) {
    kernels::cpu::advance_conv_window(state.records(rl, slot).conv_in, io.n_fold, n_channels, d_conv, window);
  }
  switch (io.mode) {
    case Mode::in_place:
      kernels::cpu::causal_conv1d(x, n, n_channels, weight, d_conv, bias, window, out);
      break;
    case Mode::replay: {
      float* scratch = state.conv_scratch();
      std::copy_n(window, window_floats, scratch);
      kernels::cpu::advance_conv_window(state.records(rl, slot).conv_in, io.n_ahead,
                                        n_channels, d_conv, scratch);
      if (run.parents != nullptr) {
        kernels::cpu::causal_conv1d_tree(x, n, run.parents, n_channels, weight, d_conv, bias, scratch,
                                         ctx.buffer(kBufferTreeWindow, window_floats), out);
      } else {
        kernels::cpu::causal_conv1d(x, n, n_channels, weight, d_conv, bias, scratch, out);
      }
      break;
    }
    case Mode::working_copy: {
      float* copy = state.working_copy(slot) + state.recurrent().conv_offset(rl);
      if (io.copy_first) std::copy_n(window, window_floats, copy);
      kernels::cpu::causal_conv1d(x, n, n_channels, weight, d_conv, bias, copy, out);
      break;
    }
    case Mode::snapshot: {
      const int64_t offset = state.recurrent().conv_offset(rl);
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = io.txn_index + t;
        float* target = state.snapshot(slot, i) + offset;
        std::copy_n(snapshot_source(state, run, t) + offset, window_floats, target);
        kernels::cpu::causal_conv1d(x + t * n_channels, 1, n_channels, weight, d_conv, bias, target,
                                    out + t * n_channels);
      }
      state.count_written(slot, static_cast<size_t>(n * window_floats) * sizeof(float), true);
      break;
    }
  }
  switch (io.records) {
    case Records::none:
      return;
    case Records::log:
      std::copy_n(x, n * n_channels, state.records(rl, slot).conv_in + first_log_record(io) * n_channels);
      state.count_written(slot, static_cast<size_t>(n * n_channels) * sizeof(float), false);
      return;
    case Records::ring:
      state.push_conv_records(rl, slot, x, n);
      return;
  }
}

void run_delta_rule(ForwardContext& ctx, int rl, const RecurrentRun& run, const float* q, const float* k,
                    const float* v, const float* g, const float* beta, float* out,
                    const kernels::cpu::GatedDeltaParams& params) {
  state::ModelState& state = ctx.state();
  const int slot = run.span.slot;
  const int64_t n = run.span.end - run.span.begin;
  const state::SpanState& io = run.state;
  const state::RecurrentSpec& spec = state.recurrent().spec(rl);
  const int64_t u_floats = spec.record_u_floats();
  const int64_t decay_floats = spec.record_decay_floats();
  float* checkpoint = state.recurrent().ssm_state(rl, slot);
  REWIND_CHECK(run.parents == nullptr || io.mode == Mode::replay || io.mode == Mode::snapshot,
               "slot {}: a token tree under a mode that runs chains only", slot);
  if (io.backup_first) {
    std::copy_n(checkpoint, spec.ssm_floats(), state.backup(slot) + state.recurrent().ssm_offset(rl));
    state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), true);
  }
  kernels::cpu::GatedDeltaStateIo kernel_io;
  if (io.n_fold > 0 || io.mode == Mode::replay) {
    const state::LayerRecords log = state.records(rl, slot);
    // Both start the log: pending records are folded by the first forward after a commit, before it writes
    // any (n_fold > 0 means n_ahead == 0), and each (head, rows) slice is folded before it is overwritten.
    kernel_io.fold = {log.k, log.u, log.decay, io.n_fold};
    kernel_io.ahead = {log.k, log.u, log.decay, io.n_ahead};
  }
  // Where the kernel writes the tokens' corrections: the log, or for the ring a per-forward scratch, since the
  // ring's oldest entries (which the new ones may overwrite) are folded into the lagging checkpoint only after.
  float* u_out = nullptr;
  if (io.records == Records::log) u_out = state.records(rl, slot).u + first_log_record(io) * u_floats;
  if (io.records == Records::ring) u_out = ctx.buffer(kBufferRecordU, n * u_floats);
  switch (io.mode) {
    case Mode::in_place:
      kernels::cpu::gated_delta_rule_io(q, k, v, g, beta, n, checkpoint, kernel_io, out, u_out, params, &ctx.pool());
      break;
    case Mode::replay: {
      kernel_io.read_only = true;
      kernel_io.parents = run.parents;
      kernels::cpu::gated_delta_rule_io(q, k, v, g, beta, n, checkpoint, kernel_io, out, u_out, params, &ctx.pool());
      if (io.n_fold > 0) state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
      break;
    }
    case Mode::working_copy: {
      float* copy = state.working_copy(slot) + state.recurrent().ssm_offset(rl);
      REWIND_CHECK(io.n_fold == 0 || io.copy_first, "slot {}: records to fold in the middle of a transaction", slot);
      if (io.copy_first) {
        if (io.n_fold > 0) {
          kernels::cpu::GatedDeltaStateIo fold_only;
          fold_only.fold = kernel_io.fold;
          kernels::cpu::gated_delta_rule_io(nullptr, nullptr, nullptr, nullptr, nullptr, 0, checkpoint, fold_only,
                                            nullptr, nullptr, params, &ctx.pool());
          state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
        }
        std::copy_n(checkpoint, spec.ssm_floats(), copy);
        state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
      }
      kernels::cpu::gated_delta_rule_io(q, k, v, g, beta, n, copy, {}, out, u_out, params, &ctx.pool());
      break;
    }
    case Mode::snapshot: {
      const int64_t offset = state.recurrent().ssm_offset(rl);
      const int64_t n_head_k = params.n_head_k;
      const int64_t g_floats = params.n_head_v * (params.per_channel_decay ? params.head_k_dim : 1);  // per token
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = io.txn_index + t;
        float* target = state.snapshot(slot, i) + offset;
        std::copy_n(snapshot_source(state, run, t) + offset, spec.ssm_floats(), target);
        kernels::cpu::gated_delta_rule(q + t * n_head_k * params.head_k_dim, k + t * n_head_k * params.head_k_dim,
                                       v + t * params.n_head_v * params.head_v_dim, g + t * g_floats,
                                       beta + t * params.n_head_v, 1, target, out + t * params.n_head_v * params.head_v_dim,
                                       u_out != nullptr ? u_out + t * u_floats : nullptr, params, &ctx.pool());
      }
      state.count_written(slot, static_cast<size_t>(n * spec.ssm_floats()) * sizeof(float), true);
      break;
    }
  }
  switch (io.records) {
    case Records::none:
      return;
    case Records::log: {
      const state::LayerRecords log = state.records(rl, slot);
      const int64_t at = first_log_record(io);
      std::copy_n(k, n * spec.record_k_floats(), log.k + at * spec.record_k_floats());
      kernels::cpu::gated_delta_decay(g, log.decay + at * decay_floats, n * decay_floats);
      state.count_written(
          slot, static_cast<size_t>(n * (spec.record_k_floats() + u_floats + decay_floats)) * sizeof(float), false);
      return;
    }
    case Records::ring: {
      float* decay = ctx.buffer(kBufferRecordDecay, n * decay_floats);
      kernels::cpu::gated_delta_decay(g, decay, n * decay_floats);
      state.push_delta_records(rl, slot, k, u_out, decay, n, &ctx.pool());
      return;
    }
  }
}

}  // namespace rwd::model::blocks
