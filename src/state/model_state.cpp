#include "state/model_state.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/gated_delta.h"

namespace rwd::state {

std::string_view rollback_policy_name(RollbackPolicy policy) {
  switch (policy) {
    case RollbackPolicy::replay: return "replay";
    case RollbackPolicy::snapshot: return "snapshot";
    case RollbackPolicy::checkpoint: return "checkpoint";
    case RollbackPolicy::none: return "none";
  }
  return "?";
}

Result<RollbackPolicy> parse_rollback_policy(std::string_view name) {
  for (RollbackPolicy policy :
       {RollbackPolicy::replay, RollbackPolicy::snapshot, RollbackPolicy::checkpoint, RollbackPolicy::none}) {
    if (name == rollback_policy_name(policy)) return policy;
  }
  return Status::errorf("unknown rollback policy '{}' (expected replay, snapshot, checkpoint or none)", name);
}

Transaction::Transaction(Transaction&& other) noexcept
    : state_(other.state_), slot_(other.slot_), first_position_(other.first_position_) {
  other.state_ = nullptr;
}

Transaction::~Transaction() {
  if (state_ != nullptr && state_->slots_[slot_].txn_open) state_->roll_back(slot_);
}

int64_t Transaction::n_tokens() const { return state_ != nullptr ? state_->slots_[slot_].txn_tokens : 0; }

Result<CommitResult> Transaction::commit(int64_t n_keep) {
  if (state_ == nullptr || !state_->slots_[slot_].txn_open) {
    return Status::errorf("slot {}: the transaction was already committed", slot_);
  }
  Result<CommitResult> result = state_->commit(slot_, n_keep);
  // Detached once committed: the slot's next transaction is not this handle's to commit or roll back.
  if (result.is_ok()) state_ = nullptr;
  return result;
}

ModelState::ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers, int n_slots,
                       int64_t n_ctx)
    : ModelState(std::move(kv_layers), std::move(recurrent_layers),
                 StateOptions{n_slots, n_ctx, RollbackPolicy::replay, 0}) {}

ModelState::ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers,
                       const StateOptions& options)
    : options_(options),
      kv_(std::move(kv_layers), options.n_slots, options.n_ctx),
      recurrent_(std::move(recurrent_layers), options.n_slots),
      slots_(static_cast<size_t>(options.n_slots)),
      counters_(static_cast<size_t>(options.n_slots)) {
  REWIND_CHECK(options.max_txn_tokens >= 0, "max_txn_tokens must not be negative, got {}", options.max_txn_tokens);
  if (!has_recurrent_layers() || options.max_txn_tokens == 0) return;
  int64_t max_conv = 0;
  for (int il = 0; il < recurrent_.n_layers(); ++il) {
    const RecurrentSpec& spec = recurrent_.spec(il);
    max_conv = std::max(max_conv, spec.conv_floats());
    record_offset_.push_back(record_slot_floats_);
    record_slot_floats_ += spec.record_floats() * record_capacity();
  }
  switch (options.policy) {
    case RollbackPolicy::replay:
      conv_scratch_.assign(static_cast<size_t>(max_conv), 0.0f);
      records_.assign(slots_.size(), std::vector<float>(static_cast<size_t>(record_slot_floats_), 0.0f));
      break;
    case RollbackPolicy::snapshot:
      copies_.assign(slots_.size(),
                     std::vector<float>(static_cast<size_t>(recurrent_.slot_floats() * options.max_txn_tokens), 0.0f));
      break;
    case RollbackPolicy::checkpoint:
      copies_.assign(slots_.size(), std::vector<float>(static_cast<size_t>(recurrent_.slot_floats()), 0.0f));
      break;
    case RollbackPolicy::none:
      break;
  }
}

void ModelState::reset_slot(int slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  REWIND_CHECK(!slots_[slot].txn_open, "slot {}: reset while a transaction is open", slot);
  slots_[slot].pending_records = 0;
  recurrent_.reset(slot);
}

Result<Transaction> ModelState::begin(int slot, int32_t first_position) {
  if (slot < 0 || slot >= n_slots()) return Status::errorf("slot {} is outside [0, {})", slot, n_slots());
  if (options_.max_txn_tokens == 0) {
    return Status::error("this state was made without room for transactions (max_txn_tokens is 0)");
  }
  if (has_recurrent_layers() && options_.policy == RollbackPolicy::none) {
    return Status::error(
        "rollback policy 'none' cannot roll back recurrent layers: choose replay, snapshot or checkpoint");
  }
  SlotTxn& txn = slots_[slot];
  if (txn.txn_open) return Status::errorf("slot {} already has an open transaction", slot);
  txn.txn_open = true;
  txn.txn_first_position = first_position;
  txn.txn_tokens = 0;
  return Transaction(this, slot, first_position);
}

Status ModelState::check_txn_room(int slot, int64_t n_tokens) const {
  const SlotTxn& txn = slots_[slot];
  if (txn.txn_tokens + n_tokens > options_.max_txn_tokens) {
    return Status::errorf("slot {}: {} more tokens would exceed the transaction's limit of {} ({} already run)", slot,
                          n_tokens, options_.max_txn_tokens, txn.txn_tokens);
  }
  return Status::ok();
}

SpanState ModelState::span_state(int slot, bool in_txn, bool first_run_of_slot) const {
  const SlotTxn& txn = slots_[slot];
  SpanState span;
  span.n_fold = first_run_of_slot ? txn.pending_records : 0;
  span.log_base = txn.pending_records;
  if (!in_txn || !has_recurrent_layers()) return span;
  span.n_ahead = txn.txn_tokens;
  span.txn_index = txn.txn_tokens;
  if (options_.policy == RollbackPolicy::replay) span.mode = SpanState::Mode::replay;
  if (options_.policy == RollbackPolicy::snapshot) span.mode = SpanState::Mode::snapshot;
  span.backup_first = options_.policy == RollbackPolicy::checkpoint && txn.txn_tokens == 0;
  return span;
}

float* ModelState::backup(int slot) {
  REWIND_CHECK(options_.policy == RollbackPolicy::checkpoint && !copies_.empty(), "slot {} has no backup", slot);
  return copies_[slot].data();
}

LayerRecords ModelState::records(int rl, int slot) {
  REWIND_CHECK(!records_.empty(), "records asked of a state without a replay log");
  const RecurrentSpec& spec = recurrent_.spec(rl);
  const int64_t cap = record_capacity();
  float* base = records_[slot].data() + record_offset_[rl];
  LayerRecords log;
  log.conv_in = base;
  log.k = log.conv_in + cap * spec.conv_channels;
  log.u = log.k + cap * spec.record_k_floats();
  log.decay = log.u + cap * spec.record_u_floats();
  return log;
}

float* ModelState::snapshot(int slot, int64_t i) {
  REWIND_CHECK(options_.policy == RollbackPolicy::snapshot && i >= 0 && i < options_.max_txn_tokens,
               "snapshot {} of slot {} does not exist", i, slot);
  return copies_[slot].data() + i * recurrent_.slot_floats();
}

void ModelState::finish_forward(int slot, int64_t n_plain, int64_t n_txn) {
  SlotTxn& txn = slots_[slot];
  REWIND_CHECK(n_txn == 0 || txn.txn_open, "slot {}: transaction tokens without a transaction", slot);
  (void)n_plain;
  txn.txn_tokens += n_txn;
  if (txn.pending_records > 0) drop_records(slot, txn.pending_records);
  txn.pending_records = 0;
}

void ModelState::drop_records(int slot, int64_t n_from_front) {
  const int64_t n_left = slots_[slot].txn_open ? slots_[slot].txn_tokens : 0;
  if (n_left == 0) return;
  for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
    const RecurrentSpec& spec = recurrent_.spec(rl);
    LayerRecords log = records(rl, slot);
    const auto shift = [&](float* array, int64_t width) {
      std::memmove(array, array + n_from_front * width, static_cast<size_t>(n_left * width) * sizeof(float));
    };
    shift(log.conv_in, spec.conv_channels);
    shift(log.k, spec.record_k_floats());
    shift(log.u, spec.record_u_floats());
    shift(log.decay, spec.record_decay_floats());
  }
}

void ModelState::count_written(int slot, size_t bytes, bool full_copy) {
  counters_[slot].bytes_written += bytes;
  if (full_copy) counters_[slot].bytes_copied += bytes;
}

RollbackCounters ModelState::total_counters() const {
  RollbackCounters total;
  for (const RollbackCounters& c : counters_) {
    total.commits += c.commits;
    total.rollbacks += c.rollbacks;
    total.tokens_rolled_back += c.tokens_rolled_back;
    total.bytes_written += c.bytes_written;
    total.bytes_copied += c.bytes_copied;
  }
  return total;
}

Result<CommitResult> ModelState::commit(int slot, int64_t n_keep) {
  SlotTxn& txn = slots_[slot];
  if (n_keep < 0 || n_keep > txn.txn_tokens) {
    return Status::errorf("slot {}: cannot keep {} tokens of a transaction that ran {}", slot, n_keep,
                          txn.txn_tokens);
  }
  CommitResult result;
  result.n_kept = n_keep;
  const size_t slot_bytes = static_cast<size_t>(recurrent_.slot_floats()) * sizeof(float);
  if (has_recurrent_layers()) {
    switch (options_.policy) {
      case RollbackPolicy::replay:
        // Applied by the slot's next forward (or flush) while its rows are in cache. Records still pending from
        // the previous commit mean this transaction ran nothing (a forward would have folded them): keep them.
        txn.pending_records += n_keep;
        break;
      case RollbackPolicy::snapshot:
        if (n_keep > 0) {
          std::copy_n(snapshot(slot, n_keep - 1), recurrent_.slot_floats(), recurrent_.slot_data(slot));
          count_written(slot, slot_bytes, true);
        }
        break;
      case RollbackPolicy::checkpoint:
        if (n_keep < txn.txn_tokens) {
          std::copy_n(copies_[slot].data(), recurrent_.slot_floats(), recurrent_.slot_data(slot));
          count_written(slot, slot_bytes, true);
          result.n_rerun = n_keep;
        }
        break;
      case RollbackPolicy::none:
        break;
    }
  }
  ++counters_[slot].commits;
  if (n_keep < txn.txn_tokens) {
    ++counters_[slot].rollbacks;
    counters_[slot].tokens_rolled_back += txn.txn_tokens - n_keep;
  }
  txn.txn_open = false;
  txn.txn_tokens = 0;
  return result;
}

void ModelState::roll_back(int slot) {
  auto result = commit(slot, 0);
  REWIND_CHECK(result.is_ok(), "rolling back slot {}: {}", slot, result.status().message());
}

void ModelState::flush(int slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  const int64_t n = slots_[slot].pending_records;
  if (n == 0) return;
  for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
    const RecurrentSpec& spec = recurrent_.spec(rl);
    const LayerRecords log = records(rl, slot);
    kernels::cpu::advance_conv_window(log.conv_in, n, spec.conv_channels, spec.conv_rows + 1,
                                      recurrent_.conv_window(rl, slot));
    if (spec.n_head == 0) continue;
    kernels::cpu::GatedDeltaStateIo io;
    io.fold = {log.k, log.u, log.decay, n};
    kernels::cpu::gated_delta_rule_io(nullptr, nullptr, nullptr, nullptr, nullptr, 0, recurrent_.ssm_state(rl, slot),
                                      io, nullptr, nullptr, spec.delta_params(), nullptr);
  }
  count_written(slot, recurrent_.slot_floats() * sizeof(float), false);
  drop_records(slot, n);
  slots_[slot].pending_records = 0;
}

size_t ModelState::record_bytes_per_slot() const {
  return records_.empty() ? 0 : static_cast<size_t>(record_slot_floats_) * sizeof(float);
}

StateBytes ModelState::bytes(int n_threads) const {
  StateBytes bytes;
  const size_t n = slots_.size();
  bytes.kv = kv_.bytes_per_slot() * n;
  bytes.conv = recurrent_.conv_bytes_per_slot() * n;
  bytes.recurrent = recurrent_.ssm_bytes_per_slot() * n;
  bytes.records = record_bytes_per_slot() * n;
  for (const auto& copy : copies_) {
    const size_t copy_bytes = copy.size() * sizeof(float);
    if (options_.policy == RollbackPolicy::snapshot) bytes.snapshots += copy_bytes;
    if (options_.policy == RollbackPolicy::checkpoint) bytes.checkpoint_copies += copy_bytes;
  }
  if (!records_.empty()) {
    int64_t max_head = 0;
    for (int il = 0; il < recurrent_.n_layers(); ++il) {
      const RecurrentSpec& spec = recurrent_.spec(il);
      max_head = std::max(max_head, spec.head_v_dim * spec.head_k_dim);
    }
    bytes.scratch = (conv_scratch_.size() + static_cast<size_t>(max_head) * std::max(n_threads, 1)) * sizeof(float);
  }
  return bytes;
}

}  // namespace rwd::state
