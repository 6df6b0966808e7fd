#include "model/blocks/recurrent_io.h"

#include "base/check.h"
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

// n floats of state (windows, recurrent states, records) copied on the backend that holds them.
void copy_floats(compute::Backend& backend, const float* src, int64_t n, float* dst) {
  backend.copy(compute::ConstRows{src, 1, n}, {dst, 1, n});
}

}  // namespace

void run_conv(ForwardContext& ctx, int rl, const RecurrentRun& run, const float* x, int64_t n_channels,
              const float* weight, int64_t d_conv, const float* bias, float* out) {
  state::ModelState& state = ctx.state();
  compute::Backend& backend = ctx.backend();
  const int slot = run.span.slot;
  const int64_t n = run.span.end - run.span.begin;
  const compute::ConstRows x_rows{x, n, n_channels};
  const compute::Rows out_rows{out, n, n_channels};
  const state::SpanState& io = run.state;
  const int64_t window_floats = (d_conv - 1) * n_channels;
  REWIND_CHECK(run.parents == nullptr || io.mode == Mode::replay || io.mode == Mode::snapshot,
               "slot {}: a token tree under a mode that runs chains only", slot);
  float* window = state.recurrent().conv_window(rl, slot);
  if (io.backup_first) {
    copy_floats(backend, window, window_floats, state.backup(slot) + state.recurrent().conv_offset(rl));
    state.count_written(slot, static_cast<size_t>(window_floats) * sizeof(float), true);
  }
  if (io.n_fold > 0) {
    backend.advance_conv_window({state.records(rl, slot).conv_in, io.n_fold, n_channels}, d_conv, window);
  }
  switch (io.mode) {
    case Mode::in_place:
      backend.causal_conv1d(x_rows, weight, d_conv, bias, window, out_rows);
      break;
    case Mode::replay: {
      float* scratch = state.conv_scratch();
      copy_floats(backend, window, window_floats, scratch);
      if (io.n_ahead > 0) {
        backend.advance_conv_window({state.records(rl, slot).conv_in, io.n_ahead, n_channels}, d_conv, scratch);
      }
      if (run.parents != nullptr) {
        backend.causal_conv1d_tree(x_rows, run.parents, weight, d_conv, bias, scratch,
                                   ctx.buffer(kBufferTreeWindow, window_floats), out_rows);
      } else {
        backend.causal_conv1d(x_rows, weight, d_conv, bias, scratch, out_rows);
      }
      break;
    }
    case Mode::working_copy: {
      float* copy = state.working_copy(slot) + state.recurrent().conv_offset(rl);
      if (io.copy_first) copy_floats(backend, window, window_floats, copy);
      backend.causal_conv1d(x_rows, weight, d_conv, bias, copy, out_rows);
      break;
    }
    case Mode::snapshot: {
      const int64_t offset = state.recurrent().conv_offset(rl);
      for (int64_t t = 0; t < n; ++t) {
        const int64_t i = io.txn_index + t;
        float* target = state.snapshot(slot, i) + offset;
        copy_floats(backend, snapshot_source(state, run, t) + offset, window_floats, target);
        backend.causal_conv1d(x_rows.rows(t, 1), weight, d_conv, bias, target, out_rows.rows(t, 1));
      }
      state.count_written(slot, static_cast<size_t>(n * window_floats) * sizeof(float), true);
      break;
    }
  }
  switch (io.records) {
    case Records::none:
      return;
    case Records::log:
      backend.copy(x_rows, {state.records(rl, slot).conv_in + first_log_record(io) * n_channels, n, n_channels});
      state.count_written(slot, static_cast<size_t>(n * n_channels) * sizeof(float), false);
      return;
    case Records::ring:
      state.push_conv_records(rl, slot, x, n);
      return;
  }
}

namespace {

// A run's kernel call with its rows of the layer's delta-rule inputs and outputs (no state yet).
ops::GatedDeltaCall run_rows(const RecurrentRun& run, const float* q, const float* k, const float* v,
                                      const float* g, const float* beta, float* out,
                                      const ops::GatedDeltaParams& p) {
  const int64_t b = run.span.begin;
  const int64_t k_row = p.n_head_k * p.head_k_dim;
  const int64_t v_row = p.n_head_v * p.head_v_dim;
  const int64_t g_row = p.n_head_v * (p.per_channel_decay ? p.head_k_dim : 1);
  ops::GatedDeltaCall rows;
  rows.q = q + b * k_row;
  rows.k = k + b * k_row;
  rows.v = v + b * v_row;
  rows.g = g + b * g_row;
  rows.beta = beta + b * p.n_head_v;
  rows.n_tokens = run.span.end - b;
  rows.out = out + b * v_row;
  return rows;
}

// In place and replay leave the checkpoint to the kernel alone, so their calls can share a round; the working
// copy, snapshots and the checkpoint policy's backup copy whole states around the kernel.
bool joins_round(const state::SpanState& io) {
  return (io.mode == Mode::in_place || io.mode == Mode::replay) && !io.backup_first;
}

// Where the kernel writes a run's corrections: the log, or for the ring a per-forward scratch (at the run's
// rows), since the ring's oldest entries (which the new ones may overwrite) are folded into the lagging
// checkpoint only after.
float* delta_u_out(ForwardContext& ctx, int rl, const RecurrentRun& run) {
  state::ModelState& state = ctx.state();
  const int64_t u_floats = state.recurrent().spec(rl).record_u_floats();
  switch (run.state.records) {
    case Records::none:
      return nullptr;
    case Records::log:
      return state.records(rl, run.span.slot).u + first_log_record(run.state) * u_floats;
    case Records::ring:
      return ctx.buffer(kBufferRecordU, ctx.n_tokens() * u_floats) + run.span.begin * u_floats;
  }
  return nullptr;
}

// The kernel call of an in-place or replay run: its rows, its slot's checkpoint and the log's records.
ops::GatedDeltaCall delta_call(ForwardContext& ctx, int rl, const RecurrentRun& run,
                                        ops::GatedDeltaCall call) {
  state::ModelState& state = ctx.state();
  const state::SpanState& io = run.state;
  call.state = state.recurrent().ssm_state(rl, run.span.slot);
  if (io.n_fold > 0 || io.mode == Mode::replay) {
    const state::LayerRecords log = state.records(rl, run.span.slot);
    // Both start the log: pending records are folded by the first forward after a commit, before it writes
    // any (n_fold > 0 means n_ahead == 0), and each (head, rows) slice is folded before it is overwritten.
    call.io.fold = {log.k, log.u, log.decay, io.n_fold};
    call.io.ahead = {log.k, log.u, log.decay, io.n_ahead};
  }
  if (io.mode == Mode::replay) {
    call.io.read_only = true;
    call.io.parents = run.parents;
  }
  call.u_out = delta_u_out(ctx, rl, run);
  return call;
}

// A working-copy, snapshot or checkpoint-backup run, one kernel call (a snapshot: one per token) of its own.
void run_delta_rule_alone(ForwardContext& ctx, int rl, const RecurrentRun& run,
                          const ops::GatedDeltaCall& rows, const ops::GatedDeltaParams& params) {
  state::ModelState& state = ctx.state();
  const int slot = run.span.slot;
  const state::SpanState& io = run.state;
  const state::RecurrentSpec& spec = state.recurrent().spec(rl);
  float* checkpoint = state.recurrent().ssm_state(rl, slot);
  if (io.backup_first) {
    copy_floats(ctx.backend(), checkpoint, spec.ssm_floats(), state.backup(slot) + state.recurrent().ssm_offset(rl));
    state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), true);
  }
  float* u_out = delta_u_out(ctx, rl, run);
  switch (io.mode) {
    case Mode::in_place:
    case Mode::replay: {
      const ops::GatedDeltaCall call = delta_call(ctx, rl, run, rows);
      ctx.backend().gated_delta_rules({&call, 1}, params);
      break;
    }
    case Mode::working_copy: {
      float* copy = state.working_copy(slot) + state.recurrent().ssm_offset(rl);
      REWIND_CHECK(io.n_fold == 0 || io.copy_first, "slot {}: records to fold in the middle of a transaction", slot);
      if (io.copy_first) {
        if (io.n_fold > 0) {
          const state::LayerRecords log = state.records(rl, slot);
          ctx.backend().fold_delta_records(checkpoint, {log.k, log.u, log.decay, io.n_fold}, params);
          state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
        }
        copy_floats(ctx.backend(), checkpoint, spec.ssm_floats(), copy);
        state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
      }
      ops::GatedDeltaCall call = rows;
      call.state = copy;
      call.u_out = u_out;
      ctx.backend().gated_delta_rules({&call, 1}, params);
      break;
    }
    case Mode::snapshot: {
      const int64_t offset = state.recurrent().ssm_offset(rl);
      const int64_t k_floats = params.n_head_k * params.head_k_dim;
      const int64_t v_floats = params.n_head_v * params.head_v_dim;
      const int64_t g_floats = params.n_head_v * (params.per_channel_decay ? params.head_k_dim : 1);
      for (int64_t t = 0; t < rows.n_tokens; ++t) {
        float* target = state.snapshot(slot, io.txn_index + t) + offset;
        copy_floats(ctx.backend(), snapshot_source(state, run, t) + offset, spec.ssm_floats(), target);
        ops::GatedDeltaCall call;
        call.q = rows.q + t * k_floats;
        call.k = rows.k + t * k_floats;
        call.v = rows.v + t * v_floats;
        call.g = rows.g + t * g_floats;
        call.beta = rows.beta + t * params.n_head_v;
        call.n_tokens = 1;
        call.state = target;
        call.out = rows.out + t * v_floats;
        call.u_out = u_out != nullptr ? u_out + t * v_floats : nullptr;
        ctx.backend().gated_delta_rules({&call, 1}, params);
      }
      state.count_written(slot, static_cast<size_t>(rows.n_tokens * spec.ssm_floats()) * sizeof(float), true);
      break;
    }
  }
}

// What a run leaves after its kernel call: the fold's write, and its records (the log's k and decay beside the
// corrections the kernel wrote; the ring's whole records).
void finish_delta_rule(ForwardContext& ctx, int rl, const RecurrentRun& run, const ops::GatedDeltaCall& rows) {
  state::ModelState& state = ctx.state();
  const int slot = run.span.slot;
  const state::SpanState& io = run.state;
  const state::RecurrentSpec& spec = state.recurrent().spec(rl);
  const int64_t decay_floats = spec.record_decay_floats();
  const int64_t n = rows.n_tokens;
  if (io.mode == Mode::replay && io.n_fold > 0) {
    state.count_written(slot, static_cast<size_t>(spec.ssm_floats()) * sizeof(float), false);
  }
  switch (io.records) {
    case Records::none:
      return;
    case Records::log: {
      const state::LayerRecords log = state.records(rl, slot);
      const int64_t at = first_log_record(io);
      copy_floats(ctx.backend(), rows.k, n * spec.record_k_floats(), log.k + at * spec.record_k_floats());
      ctx.backend().gated_delta_decay(rows.g, log.decay + at * decay_floats, n * decay_floats);
      state.count_written(
          slot, static_cast<size_t>(n * (spec.record_k_floats() + spec.record_u_floats() + decay_floats)) * sizeof(float),
          false);
      return;
    }
    case Records::ring: {
      float* decay = ctx.buffer(kBufferRecordDecay, n * decay_floats);
      ctx.backend().gated_delta_decay(rows.g, decay, n * decay_floats);
      state.push_delta_records(rl, slot, rows.k, delta_u_out(ctx, rl, run), decay, n, ctx.backend());
      return;
    }
  }
}

}  // namespace

void run_delta_rules(ForwardContext& ctx, int rl, const float* q, const float* k, const float* v, const float* g,
                     const float* beta, float* out, const ops::GatedDeltaParams& params) {
  const std::vector<RecurrentRun>& runs = ctx.recurrent_runs();
  std::vector<ops::GatedDeltaCall>& calls = ctx.delta_calls();
  calls.clear();
  const auto rows_of = [&](const RecurrentRun& run) { return run_rows(run, q, k, v, g, beta, out, params); };
  // Runs [first_gathered, end) have their calls in `calls`: one round, then each run's records in run order.
  size_t first_gathered = 0;
  const auto run_gathered = [&](size_t end) {
    if (!calls.empty()) ctx.backend().gated_delta_rules(calls, params);
    for (size_t i = first_gathered; i < end; ++i) finish_delta_rule(ctx, rl, runs[i], rows_of(runs[i]));
    calls.clear();
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const RecurrentRun& run = runs[i];
    REWIND_CHECK(run.parents == nullptr || run.state.mode == Mode::replay || run.state.mode == Mode::snapshot,
                 "slot {}: a token tree under a mode that runs chains only", run.span.slot);
    if (joins_round(run.state)) {
      calls.push_back(delta_call(ctx, rl, run, rows_of(run)));
      continue;
    }
    run_gathered(i);
    run_delta_rule_alone(ctx, rl, run, rows_of(run), params);
    finish_delta_rule(ctx, rl, run, rows_of(run));
    first_gathered = i + 1;
  }
  run_gathered(runs.size());
}

}  // namespace rwd::model::blocks
