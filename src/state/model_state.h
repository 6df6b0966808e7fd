// ModelState: all per-slot state of one model — KV rows of the attention layers, the recurrent checkpoint of
// the recurrent layers, and what the rollback policy keeps beside it (records, snapshots or a backup copy) —
// plus the speculation transaction of DESIGN §5:
//
//   auto txn = state.begin(slot, first_position);  // tokens at positions >= first_position may be rolled back
//   forward(batch);                                 // one or more forwards run the transaction's tokens
//   txn->commit(n_keep);                            // keep the first n_keep of them; the rest is rolled back
//
// A transaction destroyed without commit rolls all of its tokens back. KV rows need no rollback (rows past a
// slot's length are never read), so transactions only concern the recurrent layers; a model without them
// accepts every policy. Nothing here reads or writes another slot's rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "state/kv_cache.h"
#include "state/recurrent_cache.h"
#include "state/rollback_policy.h"

namespace rwd::state {

struct StateOptions {
  int n_slots = 1;
  int64_t n_ctx = 0;
  RollbackPolicy policy = RollbackPolicy::replay;
  int64_t max_txn_tokens = 0;  // most tokens one transaction may run (1 + draft length); 0: no transactions
};

// Bytes of state held for all slots, by kind (the `state` object of the run report).
struct StateBytes {
  size_t kv = 0;
  size_t conv = 0;
  size_t recurrent = 0;
  size_t records = 0;
  size_t snapshots = 0;
  size_t checkpoint_copies = 0;
  size_t scratch = 0;
  size_t total() const { return kv + conv + recurrent + records + snapshots + checkpoint_copies + scratch; }
};

// What rolling back has cost so far, over all slots.
struct RollbackCounters {
  int64_t commits = 0;
  int64_t rollbacks = 0;       // transactions that kept fewer tokens than they ran
  int64_t tokens_rolled_back = 0;
  size_t bytes_written = 0;    // state bytes written by the rollback machinery (records, copies, replays)
  size_t bytes_copied = 0;     // of which full-state copies (snapshots, backups, restores)
};

// How one run of a slot's tokens inside a forward meets the recurrent state (see the recurrent blocks).
struct SpanState {
  enum class Mode {
    in_place,  // the checkpoint is updated in place (plain decoding, or the checkpoint policy's transaction)
    replay,    // the checkpoint is read, the tokens run on a copy and leave records
    snapshot,  // each token's state is written to its own snapshot
  };
  Mode mode = Mode::in_place;
  int64_t n_fold = 0;     // records at the start of the log to apply to the checkpoint first (a lazy commit)
  int64_t log_base = 0;   // log index of the open transaction's first record
  int64_t n_ahead = 0;    // records of the transaction's earlier forwards, at log_base; new ones follow them
  int64_t txn_index = 0;  // the run's first token's index within the open transaction
  // Checkpoint policy, the transaction's first run: copy each layer's state to the backup just before the
  // layer runs it, so plain tokens ahead of it in the same forward (a re-run) are part of the backup.
  bool backup_first = false;
};

// One recurrent layer's record log for one slot: entry t of each array belongs to the same token.
struct LayerRecords {
  float* conv_in;  // [capacity, conv_channels]: the conv input column
  float* k;        // [capacity, n_head_k, head_k_dim]
  float* u;        // [capacity, n_head, head_v_dim]
  float* decay;    // [capacity, n_head(, head_k_dim)]
};

struct CommitResult {
  int64_t n_kept = 0;
  // Tokens the caller must run again as plain tokens (the checkpoint policy after a partial acceptance:
  // the state was restored to before the transaction); 0 otherwise.
  int64_t n_rerun = 0;
};

class ModelState;

class Transaction {
 public:
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  int slot() const { return slot_; }
  int32_t first_position() const { return first_position_; }
  // Tokens the transaction's forwards have run so far.
  int64_t n_tokens() const;

  // Keeps the first n_keep tokens the transaction ran and rolls the rest back. Refused (state unchanged) when
  // n_keep is negative or more than were run, or when the transaction was already committed.
  Result<CommitResult> commit(int64_t n_keep);

 private:
  friend class ModelState;
  Transaction(ModelState* state, int slot, int32_t first_position)
      : state_(state), slot_(slot), first_position_(first_position) {}
  ModelState* state_;
  int slot_;
  int32_t first_position_;
};

class ModelState {
 public:
  // Plain decoding only: no transactions.
  ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers, int n_slots,
             int64_t n_ctx);
  ModelState(std::vector<KvLayerSpec> kv_layers, std::vector<RecurrentSpec> recurrent_layers,
             const StateOptions& options);
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }
  // The checkpoints. Records of a lazy commit may still be pending: call flush(slot) before reading them.
  RecurrentCache& recurrent() { return recurrent_; }
  const RecurrentCache& recurrent() const { return recurrent_; }
  int n_slots() const { return kv_.n_slots(); }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  RollbackPolicy policy() const { return options_.policy; }
  int64_t max_txn_tokens() const { return options_.max_txn_tokens; }
  bool has_recurrent_layers() const { return recurrent_.n_layers() > 0; }

  // A new sequence in `slot`: recurrent state back to zero, no pending records; refused while a transaction
  // is open on the slot (a programming error).
  void reset_slot(int slot);

  // Applies a slot's pending records (lazy commit) to its checkpoint now.
  void flush(int slot);

  // Opens a transaction on a slot: its tokens at positions >= first_position run under the policy. Errors:
  // no transactions configured, policy none with recurrent layers, a transaction already open on the slot.
  Result<Transaction> begin(int slot, int32_t first_position);

  // n_threads sizes the replay kernels' per-thread working copies.
  StateBytes bytes(int n_threads) const;
  const RollbackCounters& counters(int slot) const { return counters_[slot]; }
  RollbackCounters total_counters() const;

  // For the forward and the recurrent blocks.
  bool in_transaction(int slot) const { return slots_[slot].txn_open; }
  int32_t txn_first_position(int slot) const { return slots_[slot].txn_first_position; }
  int64_t txn_tokens(int slot) const { return slots_[slot].txn_tokens; }
  // Checks that n tokens more fit the slot's open transaction.
  Status check_txn_room(int slot, int64_t n_tokens) const;
  SpanState span_state(int slot, bool in_txn, bool first_run_of_slot) const;
  LayerRecords records(int rl, int slot);
  // Snapshot i of a slot's open transaction: the state after its token i (RecurrentCache slot layout).
  float* snapshot(int slot, int64_t i);
  // The checkpoint policy's backup of a slot (RecurrentCache slot layout).
  float* backup(int slot);
  // A conv window's worth of scratch for the replay mode's copy (any layer).
  float* conv_scratch() { return conv_scratch_.data(); }
  // After a forward: the slot ran n_plain tokens in place and then n_txn tokens of its transaction.
  void finish_forward(int slot, int64_t n_plain, int64_t n_txn);
  // Accounting hook for the blocks: bytes the rollback machinery wrote for a slot during a forward.
  void count_written(int slot, size_t bytes, bool full_copy);

 private:
  friend class Transaction;

  struct SlotTxn {
    bool txn_open = false;
    int32_t txn_first_position = 0;
    int64_t txn_tokens = 0;       // run so far in the open transaction
    int64_t pending_records = 0;  // records of a replay commit not yet applied to the checkpoint
    bool folded_this_forward = false;
  };

  Result<CommitResult> commit(int slot, int64_t n_keep);
  void roll_back(int slot);
  void apply_records_now(int slot, int64_t n);
  void drop_records(int slot, int64_t n_from_front);
  int64_t record_capacity() const { return 2 * options_.max_txn_tokens; }
  size_t record_bytes_per_slot() const;

  StateOptions options_;
  KvCache kv_;
  RecurrentCache recurrent_;
  std::vector<SlotTxn> slots_;
  // Replay: per slot, per layer, the record arrays of LayerRecords (capacity record_capacity() each).
  std::vector<std::vector<float>> records_;
  std::vector<int64_t> record_offset_;  // per layer: floats into a slot's record block
  int64_t record_slot_floats_ = 0;
  // Snapshot: per slot, max_txn_tokens full copies. Checkpoint: per slot, one backup copy.
  std::vector<std::vector<float>> copies_;
  std::vector<float> conv_scratch_;
  std::vector<RollbackCounters> counters_;  // per slot
};

}  // namespace rwd::state
