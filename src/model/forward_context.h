// ForwardContext: everything one forward needs besides the weights — the batch, the KV cache, the backend the
// ops run on (the CPU backend over the thread pool) and activation buffers sized once for the largest batch (no allocation inside a step once warm).
// The per-slot runs of the batch are computed here so blocks can attend per slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "compute/backend.h"
#include "model/batch.h"
#include "state/model_state.h"

namespace rwd::model {

class Model;

// The MoE block's working rows (blocks/moe.h), kept by the context so that a step allocates nothing once each
// has grown to its largest size.
struct RoutingScratch {
  std::vector<int32_t> experts;  // [n_tokens, n_used]
  std::vector<float> weights;
};

// A run of one slot's tokens that meets the recurrent state one way: a slot's tokens split into the plain
// ones and those of its open transaction (positions >= the transaction's first position).
struct RecurrentRun {
  SlotSpan span;
  state::SpanState state;
  // A tree run: token t's parent within the run (-1: the run's starting state); null for a chain.
  const int32_t* parents = nullptr;
};

class ForwardContext {
 public:
  // On the CPU backend over `pool`.
  ForwardContext(const Model& model, ThreadPool& pool, int64_t max_batch_tokens);
  // On a backend of the caller's (another CPU kernel set, a tee of two backends).
  ForwardContext(const Model& model, std::unique_ptr<compute::Backend> backend, int64_t max_batch_tokens);

  // Runs `batch` over `state` and writes the logits of the rows marked want_logits, [n_logit_rows, n_vocab],
  // into `logits`. Errors name the bad token, position or slot; nothing is written to the state then.
  Status forward(const Batch& batch, state::ModelState& state, std::vector<float>& logits);

  // The next-token-prediction block over `batch`: each row's token with hidden_in's row of the same index
  // ([n_tokens, n_embd]: the trunk's output-normed hidden, or a previous MTP step's hidden_out). Writes the
  // logits of the want_logits rows and every row's hidden for chaining. The block's KV rows live in `state`
  // beside the trunk's. An error when the model has no MTP block.
  Status forward_mtp(const Batch& batch, const float* hidden_in, state::ModelState& state, std::vector<float>& logits,
                     std::vector<float>& hidden_out);

  // Logits of only the first n_vocab token ids from now on ([n_logit_rows, n_vocab]), 1 .. the model's vocabulary.
  // A draft model's head over the frequent ids of a BPE vocabulary (ids follow merge order) reads a fraction of
  // the output matrix; the drafts it cannot propose cost acceptance, never exactness.
  void set_logit_vocab(int64_t n_vocab);
  int64_t logit_vocab() const { return logit_vocab_; }

  // After forward(): the output-normed hidden rows of the whole batch, [n_tokens, n_embd], until the next call.
  const float* hidden_rows() const { return hidden_.data(); }

  // Accessors for the blocks and architecture files while a forward runs.
  const Batch& batch() const { return *batch_; }
  const std::vector<SlotSpan>& slot_spans() const { return slot_spans_; }
  const std::vector<RecurrentRun>& recurrent_runs() const { return recurrent_runs_; }
  // The KV row a batch row writes: its position along a chain; in a tree, its run's first position plus its
  // index in the run (siblings share a position).
  int32_t kv_row(int64_t row) const { return kv_rows_[row]; }
  // Those of a slot span's rows.
  std::span<const int32_t> kv_rows(const SlotSpan& span) const {
    return {kv_rows_.data() + span.begin, static_cast<size_t>(span.end - span.begin)};
  }
  // The key rows of a slot span's tree for the attention kernels; null for a chain.
  const ops::KeyPaths* key_paths(int64_t span_index) const {
    const ops::KeyPaths& paths = key_paths_[span_index];
    return paths.rows != nullptr ? &paths : nullptr;
  }
  state::KvCache& kv() { return state_->kv(); }
  state::RecurrentCache& recurrent() { return state_->recurrent(); }
  state::ModelState& state() { return *state_; }
  // The backend every op of the forward runs on.
  compute::Backend& backend() { return *backend_; }
  // The delta-rule calls a recurrent layer gathers from its runs to make in one pool round.
  std::vector<ops::GatedDeltaCall>& delta_calls() { return delta_calls_; }
  // The attention calls of a layer's slots, made in one pool round.
  std::vector<ops::AttentionCall>& attention_calls() { return attention_calls_; }
  RoutingScratch& routing_scratch() { return routing_scratch_; }
  int64_t n_tokens() const { return batch_->size(); }

  // [n_tokens, n_embd] residual stream, and scratch rows of the widths the blocks ask for.
  float* hidden() { return hidden_.data(); }
  float* buffer(int index, int64_t n_floats);

 private:
  Status validate(const Batch& batch, const state::ModelState& state) const;
  // A slot's run [begin, end) that is a token tree: in a transaction under a policy that runs trees, depth
  // first, its KV rows inside the context.
  Status validate_tree(const Batch& batch, const state::ModelState& state, int64_t begin, int64_t end) const;
  // layers [first_layer, end_layer): those the forward runs, whose KV rows it reserves.
  void begin(const Batch& batch, state::ModelState& state, const tensor::Tensor& embeddings, int first_layer,
             int end_layer);
  void finish(const Batch& batch, const tensor::Tensor& head, std::vector<float>& logits);

  const Model& model_;
  std::unique_ptr<compute::Backend> backend_;
  int64_t max_batch_tokens_;
  int64_t logit_vocab_;
  const Batch* batch_ = nullptr;
  state::ModelState* state_ = nullptr;
  std::vector<SlotSpan> slot_spans_;
  std::vector<RecurrentRun> recurrent_runs_;
  std::vector<ops::GatedDeltaCall> delta_calls_;
  std::vector<ops::AttentionCall> attention_calls_;
  std::vector<int32_t> kv_rows_;
  std::vector<int32_t> run_parents_;           // per batch row, for the runs that are trees
  std::vector<ops::KeyPaths> key_paths_;  // per slot span
  std::vector<int32_t> key_path_rows_;
  std::vector<float> hidden_;
  std::vector<std::vector<float>> buffers_;
  std::vector<float> logit_rows_;
  std::vector<int64_t> logit_row_index_;  // finish(): the batch rows that give logits
  tensor::Tensor logit_head_;  // finish(): the head's rows that give logits
  RoutingScratch routing_scratch_;
  // validate(): whether a slot's run was met, and the path of a tree's rows being checked; kept so that a warm
  // step allocates nothing.
  mutable std::vector<uint8_t> slot_seen_;
  mutable std::vector<int64_t> tree_path_;
};

}  // namespace rwd::model
