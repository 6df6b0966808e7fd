#include "state/model_state.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "compute/backend.h"
#include "compute/cpu_backend.h"

namespace rwd::state {
namespace {

// Read-only rows of the four record arrays (LayerRecords), first row at index 0.
struct RecordRows {
  const float* conv_in;
  const float* k;
  const float* u;
  const float* decay;
};

RecordRows rows_at(const LayerRecords& records, const RecurrentSpec& spec, int64_t first) {
  return {records.conv_in + first * spec.conv_channels, records.k + first * spec.record_k_floats(),
          records.u + first * spec.record_u_floats(), records.decay + first * spec.record_decay_floats()};
}

// Runs n records' tokens through a conv window (RecurrentCache layout), as the forward moved it.
void apply_conv_records(compute::Backend& backend, const RecurrentSpec& spec, const float* conv_in, int64_t n,
                        float* window) {
  if (n == 0) return;
  backend.advance_conv_window({conv_in, n, spec.conv_channels}, spec.conv_rows + 1, window);
}

// Applies n records to a recurrent state with the forward's arithmetic: bit-identical to running their tokens.
void apply_delta_records(compute::Backend& backend, const RecurrentSpec& spec, const RecordRows& rows, int64_t n,
                         float* ssm_state) {
  if (spec.n_head == 0 || n == 0) return;
  backend.fold_delta_records(ssm_state, {rows.k, rows.u, rows.decay, n}, spec.delta_params());
}

// Calls fn(array index, offset within the range, length) for the one or two contiguous pieces that ring entries
// [begin, begin + n) (entry 0: the oldest) occupy in arrays of `capacity` entries whose entry 0 is at `head`.
template <typename Fn>
void for_each_ring_piece(int64_t head, int64_t capacity, int64_t begin, int64_t n, Fn&& fn) {
  for (int64_t done = 0; done < n;) {
    const int64_t at = (head + begin + done) % capacity;
    const int64_t length = std::min(n - done, capacity - at);
    fn(at, done, length);
    done += length;
  }
}

// Records that fall off a ring of `count` entries when n more are pushed: the oldest `from_ring` entries, then
// the first `from_incoming` of the pushed ones (a push longer than the ring).
struct RingOverflow {
  int64_t from_ring;
  int64_t from_incoming;
};

RingOverflow ring_overflow(int64_t count, int64_t capacity, int64_t n) {
  const int64_t n_fold = std::max<int64_t>(0, count + n - capacity);
  const int64_t from_ring = std::min(n_fold, count);
  return {from_ring, n_fold - from_ring};
}

// Transaction token indices 0 .. n - 1: the path of a chain.
std::vector<int32_t> chain_prefix(int64_t n) {
  std::vector<int32_t> path(static_cast<size_t>(n));
  for (size_t d = 0; d < path.size(); ++d) path[d] = static_cast<int32_t>(d);
  return path;
}

}  // namespace

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

namespace {

// The snapshot policy's planes per slot: one per token a transaction may run, the current state among them
// (llama.cpp's 1 + n_rs_seq for n_rs_seq draft positions); replay with a working copy keeps it as plane 1; one
// plane otherwise.
int planes_for(const StateOptions& options) {
  if (options.max_txn_tokens == 0) return 1;
  if (options.policy == RollbackPolicy::snapshot) return static_cast<int>(options.max_txn_tokens);
  if (options.policy == RollbackPolicy::replay && options.txn_working_copy) return 2;
  return 1;
}

}  // namespace

Result<CommitResult> Transaction::commit_path(const std::vector<int32_t>& path) {
  if (state_ == nullptr || !state_->slots_[slot_].txn_open) {
    return Status::errorf("slot {}: the transaction was already committed", slot_);
  }
  Result<CommitResult> result = state_->commit_path(slot_, path);
  if (result.is_ok()) state_ = nullptr;
  return result;
}

int64_t Transaction::n_tokens() const { return state_ != nullptr ? state_->slots_[slot_].txn_tokens : 0; }

Result<CommitResult> Transaction::commit(int64_t n_keep) {
  if (state_ == nullptr || !state_->slots_[slot_].txn_open) {
    return Status::errorf("slot {}: the transaction was already committed", slot_);
  }
  // The first n_keep tokens of a tree are kept only when they are a chain from its root.
  Result<CommitResult> result = state_->slots_[slot_].tree && n_keep > 0
                                    ? state_->commit_path(slot_, chain_prefix(n_keep))
                                    : state_->commit(slot_, n_keep, n_keep - 1);
  // Detached once committed: the slot's next transaction is not this handle's to commit or roll back.
  if (result.is_ok()) state_ = nullptr;
  return result;
}

ModelState::ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers, int n_slots,
                       int64_t n_ctx)
    : ModelState(std::move(kv_layers), std::move(recurrent_layers),
                 StateOptions{n_slots, n_ctx, RollbackPolicy::replay, 0, 0}) {}

ModelState::ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers,
                       const StateOptions& options)
    : options_(options),
      kv_(std::move(kv_layers), options.n_slots, options.n_ctx, options.cache_type_k, options.cache_type_v),
      recurrent_(std::move(recurrent_layers), options.n_slots, planes_for(options)),
      slots_(static_cast<size_t>(options.n_slots)),
      ring_state_(static_cast<size_t>(options.n_slots)),
      counters_(static_cast<size_t>(options.n_slots)),
      host_ops_(compute::make_cpu_backend(nullptr)) {
  REWIND_CHECK(options.max_txn_tokens >= 0, "max_txn_tokens must not be negative, got {}", options.max_txn_tokens);
  REWIND_CHECK(options.rewind_depth >= 0, "rewind_depth must not be negative, got {}", options.rewind_depth);
  if (!has_recurrent_layers()) return;
  int64_t max_conv = 0;
  for (int il = 0; il < recurrent_.n_layers(); ++il) {
    const RecurrentSpec& spec = recurrent_.spec(il);
    max_conv = std::max(max_conv, spec.conv_floats());
    record_offset_.push_back(record_token_floats_);
    record_token_floats_ += spec.record_floats();
  }
  const size_t n_slots = slots_.size();
  const int64_t depth = options.rewind_depth;
  if (depth > 0) {
    lagging_.assign(n_slots, std::vector<float>(static_cast<size_t>(recurrent_.slot_floats()), 0.0f));
    rings_.assign(n_slots, std::vector<float>(static_cast<size_t>(record_token_floats_ * depth), 0.0f));
  }
  if (options.max_txn_tokens == 0) return;
  switch (options.policy) {
    case RollbackPolicy::replay:
      record_capacity_ = options.max_txn_tokens;
      conv_scratch_.assign(static_cast<size_t>(max_conv), 0.0f);
      break;
    case RollbackPolicy::snapshot:
      if (depth > 0) record_capacity_ = options.max_txn_tokens;
      break;
    case RollbackPolicy::checkpoint:
      copies_.assign(n_slots, std::vector<float>(static_cast<size_t>(recurrent_.slot_floats()), 0.0f));
      if (depth > 0) record_capacity_ = options.max_txn_tokens;
      break;
    case RollbackPolicy::none:
      break;
  }
  if (record_capacity_ > 0) {
    records_.assign(n_slots, std::vector<float>(static_cast<size_t>(record_token_floats_ * record_capacity_), 0.0f));
  }
}

void ModelState::reset_slot(int slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  REWIND_CHECK(!slots_[slot].txn_open, "slot {}: reset while a transaction is open", slot);
  slots_[slot].pending_records = 0;
  slots_[slot].state_lost = false;
  recurrent_.reset(slot);
  if (!lagging_.empty()) std::fill(lagging_[slot].begin(), lagging_[slot].end(), 0.0f);
  ring_state_[slot] = SlotRing{};
}

void ModelState::save_recurrent(int slot, float* block) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  REWIND_CHECK(!slots_[slot].txn_open, "slot {}: state saved while a transaction is open", slot);
  flush(slot);
  std::copy_n(recurrent_.slot_data(slot), recurrent_.slot_floats(), block);
}

void ModelState::restore_recurrent(int slot, const float* block) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  REWIND_CHECK(!slots_[slot].txn_open, "slot {}: state restored while a transaction is open", slot);
  slots_[slot].pending_records = 0;
  slots_[slot].state_lost = false;
  std::copy_n(block, recurrent_.slot_floats(), recurrent_.slot_data(slot));
  if (!lagging_.empty()) std::copy_n(block, recurrent_.slot_floats(), lagging_[slot].data());
  ring_state_[slot] = SlotRing{};
  count_written(slot, static_cast<size_t>(recurrent_.slot_floats()) * sizeof(float), true);
}

Status ModelState::rewind(int slot, int64_t n_tokens) {
  if (slot < 0 || slot >= n_slots()) return Status::errorf("slot {} is outside [0, {})", slot, n_slots());
  const int64_t depth = options_.rewind_depth;
  if (depth == 0) {
    return Status::errorf("slot {}: cannot roll back committed tokens: none are kept (--rewind-depth 0)", slot);
  }
  if (n_tokens < 0) return Status::errorf("slot {}: cannot roll back {} committed tokens", slot, n_tokens);
  if (slots_[slot].txn_open) {
    return Status::errorf("slot {}: cannot roll back committed tokens while a transaction is open", slot);
  }
  REWIND_RETURN_IF_ERROR(check_state_kept(slot));
  SlotRing& ring = ring_state_[slot];
  if (n_tokens > ring.count) {
    return Status::errorf(
        "slot {}: cannot roll back {} committed tokens, only the last {} are kept (--rewind-depth {})", slot,
        n_tokens, ring.count, depth);
  }
  if (n_tokens == 0) return Status::ok();
  const int64_t n_keep = ring.count - n_tokens;
  // The checkpoint is rebuilt below from the lagging one and the ring, which holds the pending records' tokens.
  slots_[slot].pending_records = 0;
  if (has_recurrent_layers()) {
    float* checkpoint = recurrent_.slot_data(slot);
    std::copy_n(lagging_checkpoint(slot), recurrent_.slot_floats(), checkpoint);
    for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
      const RecurrentSpec& spec = recurrent_.spec(rl);
      const LayerRecords records = ring_records(rl, slot);
      for_each_ring_piece(ring.head, depth, 0, n_keep, [&](int64_t at, int64_t, int64_t length) {
        const RecordRows rows = rows_at(records, spec, at);
        apply_conv_records(*host_ops_, spec, rows.conv_in, length, checkpoint + recurrent_.conv_offset(rl));
        apply_delta_records(*host_ops_, spec, rows, length, checkpoint + recurrent_.ssm_offset(rl));
      });
    }
    count_written(slot, static_cast<size_t>(recurrent_.slot_floats()) * sizeof(float), true);
  }
  ring.count = n_keep;
  return Status::ok();
}

int64_t ModelState::rewindable(int slot) const {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  return ring_state_[slot].count;
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
  REWIND_RETURN_IF_ERROR(check_state_kept(slot));
  txn.txn_open = true;
  txn.txn_first_plane = recurrent_.current_plane(slot);
  txn.txn_first_position = first_position;
  txn.txn_tokens = 0;
  txn.tree = false;
  txn.parents.clear();
  return Transaction(this, slot, first_position);
}

Status ModelState::check_txn_room(int slot, int64_t n_tokens) const {
  const SlotTxn& txn = slots_[slot];
  if (txn.tree) {
    return Status::errorf("slot {}: its transaction ran a token tree and takes no more tokens; commit a path", slot);
  }
  if (txn.txn_tokens + n_tokens > options_.max_txn_tokens) {
    return Status::errorf("slot {}: {} more tokens would exceed the transaction's limit of {} ({} already run)", slot,
                          n_tokens, options_.max_txn_tokens, txn.txn_tokens);
  }
  return Status::ok();
}

Status ModelState::check_tree_support(int slot) const {
  const SlotTxn& txn = slots_[slot];
  if (!txn.txn_open) return Status::errorf("slot {}: a token tree outside a transaction", slot);
  if (txn.txn_tokens > 0) {
    return Status::errorf("slot {}: a token tree must be its transaction's first forward ({} tokens already run)",
                          slot, txn.txn_tokens);
  }
  if (!has_recurrent_layers()) return Status::ok();
  const bool supported = (options_.policy == RollbackPolicy::replay && !options_.txn_working_copy) ||
                         options_.policy == RollbackPolicy::snapshot;
  if (!supported) {
    return Status::errorf("slot {}: token trees run under the replay (without a working copy) and snapshot policies, "
                          "not {}", slot, options_.txn_working_copy ? "replay with a working copy"
                                                                    : rollback_policy_name(options_.policy));
  }
  return Status::ok();
}

SpanState ModelState::span_state(int slot, bool in_txn, bool first_run_of_slot) const {
  const SlotTxn& txn = slots_[slot];
  SpanState span;
  span.n_fold = first_run_of_slot ? txn.pending_records : 0;
  if (!has_recurrent_layers()) return span;
  const bool rewinding = options_.rewind_depth > 0;
  if (!in_txn) {
    if (rewinding) span.records = SpanState::Records::ring;
    return span;
  }
  span.n_ahead = txn.txn_tokens;
  span.txn_index = txn.txn_tokens;
  if (options_.policy == RollbackPolicy::replay) {
    span.mode = options_.txn_working_copy ? SpanState::Mode::working_copy : SpanState::Mode::replay;
    span.copy_first = options_.txn_working_copy && txn.txn_tokens == 0;
  }
  if (options_.policy == RollbackPolicy::snapshot) span.mode = SpanState::Mode::snapshot;
  span.backup_first = options_.policy == RollbackPolicy::checkpoint && txn.txn_tokens == 0;
  if (options_.policy == RollbackPolicy::replay || rewinding) span.records = SpanState::Records::log;
  return span;
}

float* ModelState::working_copy(int slot) {
  REWIND_CHECK(options_.policy == RollbackPolicy::replay && recurrent_.n_planes() == 2, "slot {} has no working copy",
               slot);
  return recurrent_.plane_data(slot, 1);
}

float* ModelState::backup(int slot) {
  REWIND_CHECK(options_.policy == RollbackPolicy::checkpoint && !copies_.empty(), "slot {} has no backup", slot);
  return copies_[slot].data();
}

LayerRecords ModelState::layer_records(float* block, int rl, int64_t capacity) {
  const RecurrentSpec& spec = recurrent_.spec(rl);
  LayerRecords log;
  log.conv_in = block + record_offset_[rl] * capacity;
  log.k = log.conv_in + capacity * spec.conv_channels;
  log.u = log.k + capacity * spec.record_k_floats();
  log.decay = log.u + capacity * spec.record_u_floats();
  return log;
}

LayerRecords ModelState::records(int rl, int slot) {
  REWIND_CHECK(!records_.empty(), "records asked of a state without a record log");
  return layer_records(records_[slot].data(), rl, record_capacity_);
}

LayerRecords ModelState::ring_records(int rl, int slot) {
  REWIND_CHECK(!rings_.empty(), "rewind records asked of a state without a rewind depth");
  return layer_records(rings_[slot].data(), rl, options_.rewind_depth);
}

float* ModelState::lagging_checkpoint(int slot) {
  REWIND_CHECK(!lagging_.empty(), "the lagging checkpoint asked of a state without a rewind depth");
  return lagging_[slot].data();
}

void ModelState::push_conv_records(int rl, int slot, const float* conv_in, int64_t n) {
  const RecurrentSpec& spec = recurrent_.spec(rl);
  const int64_t width = spec.conv_channels;
  const int64_t depth = options_.rewind_depth;
  const SlotRing& ring = ring_state_[slot];
  float* ring_conv = ring_records(rl, slot).conv_in;
  float* window = lagging_checkpoint(slot) + recurrent_.conv_offset(rl);
  const RingOverflow overflow = ring_overflow(ring.count, depth, n);
  for_each_ring_piece(ring.head, depth, 0, overflow.from_ring, [&](int64_t at, int64_t, int64_t length) {
    apply_conv_records(*host_ops_, spec, ring_conv + at * width, length, window);
  });
  apply_conv_records(*host_ops_, spec, conv_in, overflow.from_incoming, window);
  const int64_t n_stored = n - overflow.from_incoming;
  for_each_ring_piece(ring.head, depth, ring.count + overflow.from_incoming, n_stored,
                      [&](int64_t at, int64_t offset, int64_t length) {
                        std::copy_n(conv_in + (overflow.from_incoming + offset) * width, length * width,
                                    ring_conv + at * width);
                      });
  size_t written = static_cast<size_t>(n_stored * width);
  if (overflow.from_ring + overflow.from_incoming > 0) written += static_cast<size_t>(spec.conv_floats());
  count_written(slot, written * sizeof(float), false);
}

void ModelState::push_delta_records(int rl, int slot, const float* k, const float* u, const float* decay, int64_t n,
                                    compute::Backend& backend) {
  const RecurrentSpec& spec = recurrent_.spec(rl);
  const int64_t depth = options_.rewind_depth;
  const SlotRing& ring = ring_state_[slot];
  const LayerRecords records = ring_records(rl, slot);
  float* ssm_state = lagging_checkpoint(slot) + recurrent_.ssm_offset(rl);
  const RingOverflow overflow = ring_overflow(ring.count, depth, n);
  for_each_ring_piece(ring.head, depth, 0, overflow.from_ring, [&](int64_t at, int64_t, int64_t length) {
    apply_delta_records(backend, spec, rows_at(records, spec, at), length, ssm_state);
  });
  apply_delta_records(backend, spec, {nullptr, k, u, decay}, overflow.from_incoming, ssm_state);
  const int64_t n_stored = n - overflow.from_incoming;
  const int64_t k_floats = spec.record_k_floats();
  const int64_t u_floats = spec.record_u_floats();
  const int64_t decay_floats = spec.record_decay_floats();
  for_each_ring_piece(ring.head, depth, ring.count + overflow.from_incoming, n_stored,
                      [&](int64_t at, int64_t offset, int64_t length) {
                        const int64_t from = overflow.from_incoming + offset;
                        std::copy_n(k + from * k_floats, length * k_floats, records.k + at * k_floats);
                        std::copy_n(u + from * u_floats, length * u_floats, records.u + at * u_floats);
                        std::copy_n(decay + from * decay_floats, length * decay_floats,
                                    records.decay + at * decay_floats);
                      });
  size_t written = static_cast<size_t>(n_stored * (k_floats + u_floats + decay_floats));
  if (overflow.from_ring + overflow.from_incoming > 0) written += static_cast<size_t>(spec.ssm_floats());
  count_written(slot, written * sizeof(float), false);
}

void ModelState::push_log_to_ring(int slot, int64_t n) {
  if (n == 0) return;
  for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
    const RecurrentSpec& spec = recurrent_.spec(rl);
    const RecordRows rows = rows_at(records(rl, slot), spec, 0);
    push_conv_records(rl, slot, rows.conv_in, n);
    if (spec.n_head > 0) push_delta_records(rl, slot, rows.k, rows.u, rows.decay, n, *host_ops_);
  }
  advance_ring(slot, n);
}

void ModelState::advance_ring(int slot, int64_t n_pushed) {
  SlotRing& ring = ring_state_[slot];
  const RingOverflow overflow = ring_overflow(ring.count, options_.rewind_depth, n_pushed);
  const int64_t n_folded = overflow.from_ring + overflow.from_incoming;
  ring.head = (ring.head + n_folded) % options_.rewind_depth;
  ring.count += n_pushed - n_folded;
}

float* ModelState::snapshot(int slot, int64_t i) {
  REWIND_CHECK(options_.policy == RollbackPolicy::snapshot && i >= 0 && i < options_.max_txn_tokens,
               "snapshot {} of slot {} does not exist", i, slot);
  return recurrent_.plane_data(slot, snapshot_plane(slot, i));
}

int ModelState::snapshot_plane(int slot, int64_t i) const {
  return static_cast<int>((slots_[slot].txn_first_plane + 1 + i) % recurrent_.n_planes());
}

Status ModelState::check_state_kept(int slot) const {
  if (!slots_[slot].state_lost) return Status::ok();
  return Status::errorf(
      "slot {}: its recurrent state was lost when a snapshot transaction that ran all {} of its tokens was rolled "
      "back entirely (the snapshot policy keeps one plane per token, as llama.cpp does); reset the slot",
      slot, options_.max_txn_tokens);
}

void ModelState::finish_forward(int slot, int64_t n_plain, int64_t n_txn, const int32_t* txn_parents) {
  SlotTxn& txn = slots_[slot];
  REWIND_CHECK(n_txn == 0 || txn.txn_open, "slot {}: transaction tokens without a transaction", slot);
  if (options_.rewind_depth > 0) advance_ring(slot, n_plain);
  for (int64_t t = 0; t < n_txn; ++t) {
    const int64_t parent = txn_parents != nullptr ? txn_parents[t] : t - 1;
    txn.parents.push_back(static_cast<int32_t>(parent >= 0 ? txn.txn_tokens + parent : txn.txn_tokens - 1));
  }
  txn.tree = txn.tree || txn_parents != nullptr;
  txn.txn_tokens += n_txn;
  txn.pending_records = 0;  // every forward of the slot folded them in its first run
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

Result<CommitResult> ModelState::commit_path(int slot, const std::vector<int32_t>& path) {
  const SlotTxn& txn = slots_[slot];
  bool prefix = true;
  for (size_t d = 0; d < path.size(); ++d) {
    const int32_t node = path[d];
    if (node < 0 || node >= txn.txn_tokens) {
      return Status::errorf("slot {}: path entry {} is token {}, outside the transaction's {}", slot, d, node,
                            txn.txn_tokens);
    }
    const int32_t expected_parent = d == 0 ? -1 : path[d - 1];
    if (txn.parents[node] != expected_parent) {
      return Status::errorf("slot {}: path entry {} is token {}, whose parent is {}, not {}", slot, d, node,
                            txn.parents[node], expected_parent);
    }
    prefix = prefix && node == static_cast<int32_t>(d);
  }
  const auto n_keep = static_cast<int64_t>(path.size());
  if (prefix) return commit(slot, n_keep, n_keep - 1);
  REWIND_CHECK(txn.tree, "slot {}: a branching path through a chain", slot);
  compact_path(slot, path);
  return commit(slot, n_keep, path.back());
}

void ModelState::compact_path(int slot, const std::vector<int32_t>& path) {
  const int32_t first_row = slots_[slot].txn_first_position;
  for (size_t d = 0; d < path.size(); ++d) {
    if (path[d] == static_cast<int32_t>(d)) continue;
    kv_.copy_row(slot, first_row + path[d], first_row + static_cast<int64_t>(d));
  }
  if (records_.empty()) return;
  for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
    const RecurrentSpec& spec = recurrent_.spec(rl);
    const LayerRecords log = records(rl, slot);
    for (size_t d = 0; d < path.size(); ++d) {
      const auto from = static_cast<int64_t>(path[d]);
      const auto to = static_cast<int64_t>(d);
      if (from == to) continue;
      const auto move = [&](float* array, int64_t floats) {
        std::copy_n(array + from * floats, floats, array + to * floats);
      };
      move(log.conv_in, spec.conv_channels);
      move(log.k, spec.record_k_floats());
      move(log.u, spec.record_u_floats());
      move(log.decay, spec.record_decay_floats());
    }
    count_written(slot,
                  path.size() * static_cast<size_t>(spec.record_floats()) * sizeof(float), false);
  }
}

Result<CommitResult> ModelState::commit(int slot, int64_t n_keep, int64_t last_kept) {
  SlotTxn& txn = slots_[slot];
  if (n_keep < 0 || n_keep > txn.txn_tokens) {
    return Status::errorf("slot {}: cannot keep {} tokens of a transaction that ran {}", slot, n_keep,
                          txn.txn_tokens);
  }
  CommitResult result;
  result.n_kept = n_keep;
  const size_t slot_bytes = static_cast<size_t>(recurrent_.slot_floats()) * sizeof(float);
  int64_t n_committed = n_keep;  // what enters the rewind ring now
  if (has_recurrent_layers()) {
    switch (options_.policy) {
      case RollbackPolicy::replay:
        // Applied by the slot's next forward (or flush) while its rows are in cache. Records still pending from
        // the previous commit mean this transaction ran nothing (a forward would have folded them): keep them.
        txn.pending_records += n_keep;
        break;
      case RollbackPolicy::snapshot:
        // The kept token's plane becomes the current one: nothing moves. The transaction's first plane holds
        // the state before it until its last possible token overwrites it.
        if (n_keep > 0) {
          recurrent_.set_current_plane(slot, snapshot_plane(slot, last_kept));
        } else if (txn.txn_tokens == recurrent_.n_planes()) {
          return Status::errorf(
              "slot {}: the snapshot policy cannot roll back all {} tokens of a transaction that ran as many as it "
              "has planes (as llama.cpp, whose rollback depth is the draft length); keep at least one",
              slot, txn.txn_tokens);
        }
        break;
      case RollbackPolicy::checkpoint:
        if (n_keep < txn.txn_tokens) {
          std::copy_n(copies_[slot].data(), recurrent_.slot_floats(), recurrent_.slot_data(slot));
          count_written(slot, slot_bytes, true);
          result.n_rerun = n_keep;
          n_committed = 0;  // the re-run commits them, as plain tokens
        }
        break;
      case RollbackPolicy::none:
        break;
    }
  }
  if (options_.rewind_depth > 0) push_log_to_ring(slot, n_committed);
  ++counters_[slot].commits;
  if (n_keep < txn.txn_tokens) {
    ++counters_[slot].rollbacks;
    counters_[slot].tokens_rolled_back += txn.txn_tokens - n_keep;
  }
  txn.txn_open = false;
  txn.txn_tokens = 0;
  txn.tree = false;
  txn.parents.clear();
  return result;
}

void ModelState::roll_back(int slot) {
  SlotTxn& txn = slots_[slot];
  if (options_.policy == RollbackPolicy::snapshot && has_recurrent_layers() &&
      txn.txn_tokens == recurrent_.n_planes()) {
    // The plane of the state before the transaction was overwritten: nothing to go back to.
    ++counters_[slot].rollbacks;
    counters_[slot].tokens_rolled_back += txn.txn_tokens;
    txn.txn_open = false;
    txn.txn_tokens = 0;
    txn.tree = false;
    txn.parents.clear();
    txn.state_lost = true;
    return;
  }
  auto result = commit(slot, 0, -1);
  REWIND_CHECK(result.is_ok(), "rolling back slot {}: {}", slot, result.status().message());
}

void ModelState::flush(int slot) {
  REWIND_CHECK(slot >= 0 && slot < n_slots(), "slot {} out of range", slot);
  const int64_t n = slots_[slot].pending_records;
  if (n == 0) return;
  for (int rl = 0; rl < recurrent_.n_layers(); ++rl) {
    const RecurrentSpec& spec = recurrent_.spec(rl);
    const RecordRows rows = rows_at(records(rl, slot), spec, 0);
    apply_conv_records(*host_ops_, spec, rows.conv_in, n, recurrent_.conv_window(rl, slot));
    apply_delta_records(*host_ops_, spec, rows, n, recurrent_.ssm_state(rl, slot));
  }
  count_written(slot, recurrent_.slot_floats() * sizeof(float), false);
  slots_[slot].pending_records = 0;
}

size_t ModelState::record_bytes_per_slot() const {
  return records_.empty() ? 0 : records_[0].size() * sizeof(float);
}

StateBytes ModelState::bytes(int n_threads) const {
  StateBytes bytes;
  const size_t n = slots_.size();
  bytes.kv = kv_.allocated_bytes();
  bytes.conv = recurrent_.conv_bytes_per_slot() * n;
  bytes.recurrent = recurrent_.ssm_bytes_per_slot() * n;
  const size_t log_bytes = record_bytes_per_slot() * n;
  const bool log_for_rewind = options_.policy != RollbackPolicy::replay;
  bytes.records = log_for_rewind ? 0 : log_bytes;
  bytes.rewind = log_for_rewind ? log_bytes : 0;
  for (const auto& lagging : lagging_) bytes.rewind += lagging.size() * sizeof(float);
  for (const auto& ring : rings_) bytes.rewind += ring.size() * sizeof(float);
  for (const auto& copy : copies_) bytes.checkpoint_copies += copy.size() * sizeof(float);
  const size_t extra_planes = static_cast<size_t>(recurrent_.n_planes() - 1) *
                              static_cast<size_t>(recurrent_.slot_floats()) * sizeof(float) * n;
  if (options_.policy == RollbackPolicy::snapshot) bytes.snapshots = extra_planes;
  if (!conv_scratch_.empty()) {
    int64_t max_head = 0;
    for (int il = 0; il < recurrent_.n_layers(); ++il) {
      const RecurrentSpec& spec = recurrent_.spec(il);
      max_head = std::max(max_head, spec.head_v_dim * spec.head_k_dim);
    }
    bytes.scratch = (conv_scratch_.size() + static_cast<size_t>(max_head) * std::max(n_threads, 1)) * sizeof(float);
  }
  if (options_.policy == RollbackPolicy::replay) bytes.scratch += extra_planes;  // the working copies
  return bytes;
}

}  // namespace rwd::state
