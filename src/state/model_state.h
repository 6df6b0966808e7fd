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
// accepts every policy. With a rewind depth R, committed tokens can be taken back too (rewind(): the lagging
// checkpoint and its ring of the last R tokens' records). Nothing here reads or writes another slot's rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "compute/backend.h"
#include "state/kv_cache.h"
#include "state/recurrent_cache.h"
#include "state/rollback_policy.h"

namespace rwd::state {

struct StateOptions {
  int n_slots = 1;
  int64_t n_ctx = 0;
  RollbackPolicy policy = RollbackPolicy::replay;
  int64_t max_txn_tokens = 0;  // most tokens one transaction may run (1 + draft length); 0: no transactions
  int64_t rewind_depth = 0;    // committed tokens per slot that rewind() can take back; 0: none, no memory
  // Replay only, for transactions of several forwards (a draft model's): they run on a working copy of the
  // state (one more per slot), so each forward starts where the last ended instead of re-applying the
  // transaction's earlier records (a draft of k one-token forwards: k passes, not k²/2 record applications).
  bool txn_working_copy = false;
  tensor::DType cache_type_k = tensor::DType::f32;  // how KV rows are stored (KvCache::check_types)
  tensor::DType cache_type_v = tensor::DType::f32;
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
  // The rewind depth's: lagging checkpoints, rings of records, and the transaction record log that the
  // snapshot and checkpoint policies keep only for the ring.
  size_t rewind = 0;
  size_t total() const {
    return kv + conv + recurrent + records + snapshots + checkpoint_copies + scratch + rewind;
  }
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
    working_copy,  // the tokens run in place on the slot's working copy and leave records (txn_working_copy)
  };
  Mode mode = Mode::in_place;
  // Both at the start of the log: the first forward after a commit folds its records before writing new ones
  // in their place, so the log needs room for one transaction only.
  int64_t n_fold = 0;     // records to apply to the checkpoint first (a lazy commit)
  int64_t n_ahead = 0;    // records of the transaction's earlier forwards; new ones follow them
  int64_t txn_index = 0;  // the run's first token's index within the open transaction
  // Checkpoint policy, the transaction's first run: copy each layer's state to the backup just before the
  // layer runs it, so plain tokens ahead of it in the same forward (a re-run) are part of the backup.
  bool backup_first = false;
  // Working copy, the transaction's first run: the checkpoint (after the fold) is copied into it first.
  bool copy_first = false;
  // Where the run's per-token records go. A transaction's tokens write them to the log at n_ahead
  // (always with replay; with the other policies only for the rewind ring, which commit fills from the log).
  // Plain tokens are committed as they run: with a rewind depth their records go straight to the ring.
  enum class Records { none, log, ring };
  Records records = Records::none;
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
  // Keeps one path of a transaction that ran a token tree: `path` lists transaction token indices, a root (a
  // token that followed the state before the transaction) first, each next one a child of the one before. The
  // path's KV rows move to the rows of its positions and its records become the kept ones; everything else is
  // rolled back. An empty path keeps nothing. Refused (state unchanged) when `path` is not such a path.
  Result<CommitResult> commit_path(const std::vector<int32_t>& path);

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

  // A new sequence in `slot`: recurrent state and lagging checkpoint back to zero, no pending records, an
  // empty rewind ring; refused while a transaction is open on the slot (a programming error).
  void reset_slot(int slot);

  // Applies a slot's pending records (lazy commit) to its checkpoint now.
  void flush(int slot);

  // Rolls back the last n_tokens committed tokens of a slot, bit-identical to a state that ran only the tokens
  // before them: the lagging checkpoint is copied over the checkpoint and the ring's older records replayed
  // onto it; the ring keeps those. Committed tokens include those of a lazy commit whose records are still
  // pending (they are dropped: the rebuilt checkpoint holds what is kept of them) and exclude a checkpoint
  // policy's kept tokens until they are re-run. KV rows need nothing: the caller's length goes down by
  // n_tokens. Refused (state unchanged) with no rewind depth, a negative count, more tokens than rewindable(),
  // or a transaction open on the slot.
  Status rewind(int slot, int64_t n_tokens);
  // Committed tokens rewind() can take back now: the records in the slot's ring, at most rewind_depth (fewer
  // early in a sequence, and after a rewind until as many tokens have been committed again).
  int64_t rewindable(int slot) const;
  int64_t rewind_depth() const { return options_.rewind_depth; }

  // Prompt reuse: a slot's recurrent state as one block of recurrent().slot_floats() floats (its pending records
  // applied first), and a slot put back into such a state as if it had just run the tokens the block was taken
  // after — with nothing behind it to rewind (an empty ring whose lagging checkpoint is the block). KV rows are
  // the caller's: those of the block's tokens must already be in the slot. Both refused (a programming error)
  // while a transaction is open on the slot.
  void save_recurrent(int slot, float* block);
  void restore_recurrent(int slot, const float* block);
  // False after a snapshot transaction lost the slot's state (check_state_kept), until reset or restore.
  bool state_kept(int slot) const { return !slots_[slot].state_lost; }

  // Opens a transaction on a slot: its tokens at positions >= first_position run under the policy. Errors:
  // no transactions configured, policy none with recurrent layers, a transaction already open on the slot.
  Result<Transaction> begin(int slot, int32_t first_position);

  // n_threads sizes the replay kernels' per-thread working copies.
  StateBytes bytes(int n_threads) const;
  // One token's records over all recurrent layers: what a tree node (or a draft position) costs under replay,
  // against recurrent().slot_floats() floats for a full state per node.
  size_t record_bytes_per_token() const { return static_cast<size_t>(record_token_floats_) * sizeof(float); }
  const RollbackCounters& counters(int slot) const { return counters_[slot]; }
  RollbackCounters total_counters() const;

  // For the forward and the recurrent blocks.
  bool in_transaction(int slot) const { return slots_[slot].txn_open; }
  int32_t txn_first_position(int slot) const { return slots_[slot].txn_first_position; }
  int64_t txn_tokens(int slot) const { return slots_[slot].txn_tokens; }
  // Checks that n tokens more fit the slot's open transaction.
  Status check_txn_room(int slot, int64_t n_tokens) const;
  // Whether the slot's open transaction can run a token tree now: its first forward, under replay (without a
  // working copy) or snapshot. The checkpoint policy would re-run a kept path anyway; a working copy serves a
  // draft model's one-token chains.
  Status check_tree_support(int slot) const;
  SpanState span_state(int slot, bool in_txn, bool first_run_of_slot) const;
  // The transaction record log: record_capacity() entries per layer and slot, index 0 the oldest.
  LayerRecords records(int rl, int slot);
  int64_t record_capacity() const { return record_capacity_; }
  // The rewind ring's arrays (rewind_depth entries per layer and slot; the ring's order is internal) and the
  // lagging checkpoint (RecurrentCache slot layout), for inspection.
  LayerRecords ring_records(int rl, int slot);
  float* lagging_checkpoint(int slot);
  // Layer rl's share of committing n tokens to a slot's rewind ring (their records, oldest first): records
  // that no longer fit are folded into the lagging checkpoint, the rest stored. Every layer pushes the same n
  // before the ring's counters move (finish_forward, commit); a forward's folds run on its backend.
  void push_conv_records(int rl, int slot, const float* conv_in, int64_t n);
  void push_delta_records(int rl, int slot, const float* k, const float* u, const float* decay, int64_t n,
                          compute::Backend& backend);
  // Snapshot i of a slot's open transaction: the state after its token i (RecurrentCache slot layout), a plane
  // of the recurrent cache; the last possible one is the plane the transaction started from.
  float* snapshot(int slot, int64_t i);
  // Refuses a slot whose state a rolled-back snapshot transaction lost (until reset_slot).
  Status check_state_kept(int slot) const;
  // The checkpoint policy's backup of a slot (RecurrentCache slot layout).
  float* backup(int slot);
  // The replay policy's working copy of a slot for multi-forward transactions (RecurrentCache slot layout).
  float* working_copy(int slot);
  // A conv window's worth of scratch for the replay mode's copy (any layer).
  float* conv_scratch() { return conv_scratch_.data(); }
  // After a forward: the slot ran n_plain tokens in place (committed: they enter the rewind ring) and then
  // n_txn tokens of its transaction, a tree when txn_parents is given (each token's parent among them, -1 for
  // the state before the transaction).
  void finish_forward(int slot, int64_t n_plain, int64_t n_txn, const int32_t* txn_parents = nullptr);
  // The parent of each token of the slot's open transaction: i - 1 along a chain, the tree's otherwise.
  const std::vector<int32_t>& txn_parents(int slot) const { return slots_[slot].parents; }
  // Accounting hook for the blocks: bytes the rollback machinery wrote for a slot during a forward.
  void count_written(int slot, size_t bytes, bool full_copy);

 private:
  friend class Transaction;

  struct SlotTxn {
    bool txn_open = false;
    int32_t txn_first_position = 0;
    int64_t txn_tokens = 0;       // run so far in the open transaction
    int64_t pending_records = 0;  // records of a replay commit not yet applied to the checkpoint
    int txn_first_plane = 0;      // snapshot policy: the current plane when the transaction began
    bool state_lost = false;
    bool tree = false;             // the open transaction ran a token tree
    std::vector<int32_t> parents;  // per token run in the open transaction
  };

  // A slot's rewind ring: entry i (0 the oldest) of each layer's arrays sits at (head + i) % rewind_depth.
  struct SlotRing {
    int64_t head = 0;
    int64_t count = 0;
  };

  // Keeps n_keep tokens whose last one is transaction token last_kept (n_keep - 1 along a chain).
  Result<CommitResult> commit(int slot, int64_t n_keep, int64_t last_kept);
  Result<CommitResult> commit_path(int slot, const std::vector<int32_t>& path);
  // Moves the records and KV rows of path[d] to index d, for d in order (path[d] >= d).
  void compact_path(int slot, const std::vector<int32_t>& path);
  // Rolls the open transaction back; a snapshot transaction that ran one token per plane cannot be, and
  // leaves the slot's state lost instead.
  void roll_back(int slot);
  int snapshot_plane(int slot, int64_t i) const;
  LayerRecords layer_records(float* block, int rl, int64_t capacity);
  // Moves every layer's n records at log index `from` to the ring, then the ring's counters.
  void push_log_to_ring(int slot, int64_t n);
  void advance_ring(int slot, int64_t n_pushed);
  size_t record_bytes_per_slot() const;

  StateOptions options_;
  KvCache kv_;
  RecurrentCache recurrent_;
  std::vector<SlotTxn> slots_;
  // Per slot, per layer, the record arrays of LayerRecords (capacity record_capacity() each): with replay, and
  // with the other policies when there is a rewind depth.
  std::vector<std::vector<float>> records_;
  int64_t record_capacity_ = 0;
  std::vector<int64_t> record_offset_;  // per layer: one token's records of the layers before it, floats
  int64_t record_token_floats_ = 0;     // one token's records, all layers
  // Rewind depth: per slot, the lagging checkpoint and the ring (record_offset_ layout, capacity rewind_depth).
  std::vector<std::vector<float>> lagging_;
  std::vector<std::vector<float>> rings_;
  std::vector<SlotRing> ring_state_;
  // Checkpoint: per slot, one backup copy. (The snapshot policy's copies are planes of recurrent_.)
  std::vector<std::vector<float>> copies_;
  std::vector<float> conv_scratch_;
  std::vector<RollbackCounters> counters_;  // per slot
  // The state ops of commits and rewinds outside a forward (folds into a checkpoint), on the memory the state
  // lives in: host memory, one thread.
  std::unique_ptr<compute::Backend> host_ops_;
};

}  // namespace rwd::state
