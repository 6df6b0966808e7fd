#include "model/forward_context.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"
#include "compute/cpu_backend.h"
#include "model/arch_info.h"
#include "model/model.h"

namespace rwd::model {

ForwardContext::ForwardContext(const Model& model, ThreadPool& pool, int64_t max_batch_tokens)
    : ForwardContext(model, compute::make_cpu_backend(&pool), max_batch_tokens) {}

ForwardContext::ForwardContext(const Model& model, std::unique_ptr<compute::Backend> backend, int64_t max_batch_tokens)
    : model_(model), backend_(std::move(backend)), max_batch_tokens_(max_batch_tokens),
      logit_vocab_(model.hparams().n_vocab) {
  REWIND_CHECK(max_batch_tokens > 0, "max_batch_tokens must be positive, got {}", max_batch_tokens);
  hidden_.resize(static_cast<size_t>(max_batch_tokens * model.hparams().n_embd));
}

void ForwardContext::set_logit_vocab(int64_t n_vocab) {
  REWIND_CHECK(n_vocab >= 1 && n_vocab <= model_.hparams().n_vocab, "logit vocabulary {} is outside 1 .. {}", n_vocab,
               model_.hparams().n_vocab);
  logit_vocab_ = n_vocab;
}

float* ForwardContext::buffer(int index, int64_t n_floats) {
  if (static_cast<size_t>(index) >= buffers_.size()) buffers_.resize(index + 1);
  auto& storage = buffers_[index];
  if (storage.size() < static_cast<size_t>(n_floats)) storage.resize(static_cast<size_t>(n_floats));
  return storage.data();
}

Status ForwardContext::validate(const Batch& batch, const state::ModelState& state) const {
  const HParams& hp = model_.hparams();
  const int64_t n = batch.size();
  if (n == 0) return Status::error("empty batch");
  if (n > max_batch_tokens_) {
    return Status::errorf("batch of {} tokens exceeds the context's maximum of {}", n, max_batch_tokens_);
  }
  if (batch.positions.size() != batch.tokens.size() || batch.slots.size() != batch.tokens.size() ||
      batch.want_logits.size() != batch.tokens.size() ||
      (batch.is_tree() && batch.parents.size() != batch.tokens.size())) {
    return Status::error("batch arrays have different lengths");
  }
  std::vector<uint8_t>& slot_seen = slot_seen_;
  slot_seen.assign(static_cast<size_t>(state.n_slots()), 0);
  int64_t run_begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t token = batch.tokens[i];
    if (token < 0 || token >= hp.n_vocab) {
      return Status::errorf("token id {} at batch row {} is outside the vocabulary [0, {})", token, i, hp.n_vocab);
    }
    const int32_t slot = batch.slots[i];
    if (slot < 0 || slot >= state.n_slots()) {
      return Status::errorf("slot {} at batch row {} is outside [0, {})", slot, i, state.n_slots());
    }
    const int32_t pos = batch.positions[i];
    if (pos < 0 || pos >= state.n_ctx()) {
      return Status::errorf("position {} at batch row {} is outside the context [0, {})", pos, i, state.n_ctx());
    }
    const bool continues_run = i > 0 && batch.slots[i - 1] == slot;
    if (continues_run) {
      const int32_t parent = batch.parent(i);
      if (parent < run_begin || parent >= i) {
        return Status::errorf("slot {}: batch row {} has parent row {}, not an earlier row of the slot's run", slot,
                              i, parent);
      }
      if (pos != batch.positions[parent] + 1) {
        return Status::errorf("slot {}: position {} at batch row {} does not follow position {}", slot, pos, i,
                              batch.positions[parent]);
      }
    } else {
      if (slot_seen[slot]) return Status::errorf("slot {} appears in two separate runs of the batch", slot);
      slot_seen[slot] = 1;
      if (batch.parent(i) != -1) {
        return Status::errorf("slot {}: batch row {} starts the slot's run but has parent row {}", slot, i,
                              batch.parent(i));
      }
      run_begin = i;
    }
  }
  // A slot with an open transaction: plain tokens only before its first position and before it ran anything,
  // then its tokens continue the transaction's and fit its room.
  for (int64_t i = 0; i < n;) {
    const int32_t slot = batch.slots[i];
    int64_t end = i;
    while (end < n && batch.slots[end] == slot) ++end;
    REWIND_RETURN_IF_ERROR(state.check_state_kept(slot));
    REWIND_RETURN_IF_ERROR(validate_tree(batch, state, i, end));
    if (state.in_transaction(slot)) {
      const int32_t first = state.txn_first_position(slot);
      const int64_t n_txn_before = state.txn_tokens(slot);
      int64_t n_in_txn = 0;
      for (int64_t r = i; r < end; ++r) n_in_txn += batch.positions[r] >= first ? 1 : 0;
      if (n_in_txn > 0) {
        REWIND_RETURN_IF_ERROR(state.check_txn_room(slot, n_in_txn));
        const int32_t expected = first + static_cast<int32_t>(n_txn_before);
        const int32_t got = batch.positions[end - n_in_txn];
        if (got != expected) {
          return Status::errorf("slot {}: the transaction continues at position {}, the batch brings position {}",
                                slot, expected, got);
        }
      }
      if (n_in_txn < end - i && n_txn_before > 0) {
        return Status::errorf("slot {}: plain tokens after its transaction started", slot);
      }
    }
    i = end;
  }
  return Status::ok();
}

Status ForwardContext::validate_tree(const Batch& batch, const state::ModelState& state, int64_t begin,
                                     int64_t end) const {
  const int32_t slot = batch.slots[begin];
  int64_t first_branch = -1;
  for (int64_t r = begin + 1; r < end && first_branch < 0; ++r) first_branch = batch.parent(r) != r - 1 ? r : -1;
  if (first_branch < 0) return Status::ok();
  for (int64_t r = first_branch; r < end; ++r) {
    if (batch.parent(r) == r - 1) continue;
    if (!state.in_transaction(slot) || batch.positions[r] <= state.txn_first_position(slot)) {
      return Status::errorf("slot {}: batch row {} branches outside a transaction (a token tree is a transaction's)",
                            slot, r);
    }
  }
  const int64_t last_kv_row = batch.positions[begin] + (end - 1 - begin);
  if (last_kv_row >= state.n_ctx()) {
    return Status::errorf("slot {}: a tree of {} rows from position {} needs KV row {}, outside the context [0, {})",
                          slot, end - begin, batch.positions[begin], last_kv_row, state.n_ctx());
  }
  // Depth first: each row's parent is on the path from the run's first row to the row before it.
  std::vector<int64_t>& path = tree_path_;
  path.assign(1, begin);
  for (int64_t r = begin + 1; r < end; ++r) {
    while (!path.empty() && path.back() != batch.parent(r)) path.pop_back();
    if (path.empty()) {
      return Status::errorf("slot {}: batch row {} follows row {}, whose subtree had ended: a token tree's rows must "
                            "come in depth-first order", slot, r, batch.parent(r));
    }
    path.push_back(r);
  }
  return state.check_tree_support(slot);
}

void ForwardContext::begin(const Batch& batch, state::ModelState& state, const tensor::Tensor& embeddings,
                           int first_layer, int end_layer) {
  const HParams& hp = model_.hparams();
  batch_ = &batch;
  state_ = &state;
  slot_spans_.clear();
  for (int64_t i = 0; i < batch.size(); ++i) {
    if (i == 0 || batch.slots[i] != batch.slots[i - 1]) slot_spans_.push_back({batch.slots[i], i, i});
    slot_spans_.back().end = i + 1;
  }
  kv_rows_.resize(static_cast<size_t>(batch.size()));
  key_paths_.assign(slot_spans_.size(), ops::KeyPaths{});
  key_path_rows_.clear();
  for (size_t si = 0; si < slot_spans_.size(); ++si) {
    const SlotSpan& span = slot_spans_[si];
    bool chain = true;
    for (int64_t i = span.begin; i < span.end; ++i) {
      kv_rows_[i] = batch.positions[span.begin] + static_cast<int32_t>(i - span.begin);
      chain = chain && (i == span.begin || batch.parent(i) == i - 1);
    }
    if (chain) continue;
    // Row t's keys from the span's first position on: its ancestors' KV rows and its own, shallowest first.
    ops::KeyPaths& paths = key_paths_[si];
    paths.mapped_from = batch.positions[span.begin];
    for (int64_t i = span.begin; i < span.end; ++i) {
      paths.stride = std::max<int64_t>(paths.stride, batch.positions[i] - paths.mapped_from + 1);
    }
    const size_t offset = key_path_rows_.size();
    key_path_rows_.resize(offset + static_cast<size_t>((span.end - span.begin) * paths.stride), 0);
    for (int64_t i = span.begin; i < span.end; ++i) {
      int32_t* rows = key_path_rows_.data() + offset + (i - span.begin) * paths.stride;
      for (int64_t a = i; a >= span.begin; a = batch.parent(a)) rows[batch.positions[a] - paths.mapped_from] = kv_rows_[a];
    }
  }
  // KV layers are numbered in layer order, so the forward's layers write a contiguous range of them.
  int first_kv = state.kv().n_layers();
  int end_kv = 0;
  for (int il = first_layer; il < end_layer; ++il) {
    if (model_.kv_index(il) < 0) continue;
    first_kv = std::min(first_kv, model_.kv_index(il));
    end_kv = std::max(end_kv, model_.kv_index(il) + 1);
  }
  for (const SlotSpan& span : slot_spans_) {
    int32_t last_row = 0;
    for (int64_t i = span.begin; i < span.end; ++i) last_row = std::max(last_row, kv_rows_[i]);
    state.kv().reserve(span.slot, int64_t{last_row} + 1, first_kv, end_kv);
  }
  // Pointers into key_path_rows_ once it has stopped growing.
  {
    size_t offset = 0;
    for (size_t si = 0; si < slot_spans_.size(); ++si) {
      ops::KeyPaths& paths = key_paths_[si];
      if (paths.stride == 0) continue;
      paths.rows = key_path_rows_.data() + offset;
      offset += static_cast<size_t>((slot_spans_[si].end - slot_spans_[si].begin) * paths.stride);
    }
  }
  run_parents_.resize(static_cast<size_t>(batch.size()));
  recurrent_runs_.clear();
  for (const SlotSpan& span : slot_spans_) {
    int64_t split = span.begin;
    if (state.in_transaction(span.slot)) {
      while (split < span.end && batch.positions[split] < state.txn_first_position(span.slot)) ++split;
    } else {
      split = span.end;
    }
    if (split > span.begin) {
      recurrent_runs_.push_back({{span.slot, span.begin, split}, state.span_state(span.slot, false, true)});
    }
    if (split < span.end) {
      recurrent_runs_.push_back(
          {{span.slot, split, span.end}, state.span_state(span.slot, true, split == span.begin)});
    }
  }
  for (RecurrentRun& run : recurrent_runs_) {
    bool chain = true;
    for (int64_t i = run.span.begin; i < run.span.end; ++i) {
      const int32_t parent = batch.parent(i);
      run_parents_[i] = parent >= run.span.begin ? static_cast<int32_t>(parent - run.span.begin) : -1;
      chain = chain && run_parents_[i] == i - run.span.begin - 1;
    }
    if (!chain) run.parents = run_parents_.data() + run.span.begin;
  }
  backend_->embed(embeddings, batch.tokens, hp.embd_scale, {hidden_.data(), batch.size(), hp.n_embd});
}

void ForwardContext::finish(const Batch& batch, const tensor::Tensor& head, std::vector<float>& logits) {
  const HParams& hp = model_.hparams();
  const int64_t n_out = batch.n_logit_rows();
  logit_rows_.resize(static_cast<size_t>(std::max<int64_t>(n_out, 1) * hp.n_embd));
  logit_row_index_.clear();
  for (int64_t i = 0; i < batch.size(); ++i) {
    if (batch.want_logits[i]) logit_row_index_.push_back(i);
  }
  backend_->gather_rows({hidden_.data(), batch.size(), hp.n_embd}, logit_row_index_,
                        {logit_rows_.data(), n_out, hp.n_embd});
  logits.resize(static_cast<size_t>(n_out * logit_vocab_));
  // The first logit_vocab_ rows (rows are contiguous). Assigned into a member: its name keeps its storage, so
  // the view costs no allocation once made.
  logit_head_ = head;
  logit_head_.ne[1] = logit_vocab_;
  const compute::Rows logit_view{logits.data(), n_out, logit_vocab_};
  if (n_out > 0) backend_->matmul(logit_head_, {logit_rows_.data(), n_out, hp.n_embd}, logit_view);
  if (hp.final_logit_softcap > 0.0f) backend_->softcap(logit_view, hp.final_logit_softcap);
  // llama.cpp scales by the reciprocal
  if (hp.logit_scale != 1.0f) backend_->scale(logit_view, 1.0f / hp.logit_scale);
  batch_ = nullptr;
  state_ = nullptr;
}

Status ForwardContext::forward(const Batch& batch, state::ModelState& state, std::vector<float>& logits) {
  REWIND_RETURN_IF_ERROR(validate(batch, state));
  begin(batch, state, model_.weights().token_embd, 0, static_cast<int>(model_.hparams().n_layer));
  model_.arch().forward_layers(model_, *this);
  for (const SlotSpan& span : slot_spans_) {
    int64_t n_txn = 0;
    for (const RecurrentRun& run : recurrent_runs_) {
      if (run.span.slot == span.slot && state.in_transaction(span.slot) &&
          batch.positions[run.span.begin] >= state.txn_first_position(span.slot)) {
        n_txn += run.span.end - run.span.begin;
      }
    }
    const int32_t* txn_parents = nullptr;
    for (const RecurrentRun& run : recurrent_runs_) {
      if (run.span.slot == span.slot && run.parents != nullptr) txn_parents = run.parents;
    }
    state.finish_forward(span.slot, span.end - span.begin - n_txn, n_txn, txn_parents);
  }
  finish(batch, model_.weights().output, logits);
  return Status::ok();
}

Status ForwardContext::forward_mtp(const Batch& batch, const float* hidden_in, state::ModelState& state,
                                   std::vector<float>& logits, std::vector<float>& hidden_out) {
  if (model_.arch().forward_mtp == nullptr || model_.weights().nextn.empty()) {
    return Status::errorf("the {} model has no next-token-prediction (MTP) block", model_.hparams().arch);
  }
  REWIND_RETURN_IF_ERROR(validate(batch, state));
  const NextnWeights& nextn = model_.weights().nextn[0];
  const auto mtp_layer = static_cast<int>(model_.hparams().n_layer);  // the first MTP block; chains reuse it
  begin(batch, state, nextn.embed_tokens, mtp_layer, mtp_layer + 1);
  model_.arch().forward_mtp(model_, *this, hidden_in);
  hidden_out.assign(hidden_.begin(), hidden_.begin() + batch.size() * model_.hparams().n_embd);
  finish(batch, nextn.shared_head_head, logits);
  return Status::ok();
}

}  // namespace rwd::model
