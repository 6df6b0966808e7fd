#include "spec/draft_model.h"

#include <algorithm>

#include "base/log.h"
#include "sampling/logprobs.h"
#include "spec/draft_tree.h"

namespace rwd::spec {

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create(const DraftModelOptions& options,
                                                                       int64_t target_n_vocab, ThreadPool& pool) {
  std::unique_ptr<DraftModelProposer> proposer(new DraftModelProposer(options, pool));
  REWIND_ASSIGN_OR_RETURN(proposer->model_, model::Model::load(options.path));
  const int64_t n_vocab = proposer->model_->hparams().n_vocab;
  if (n_vocab != target_n_vocab) {
    return Status::errorf("{}: the draft model has {} tokens in its vocabulary, the target {}; they must match",
                          options.path, n_vocab, target_n_vocab);
  }
  if (options.vocab > n_vocab) {
    return Status::errorf("draft-vocab {} exceeds the draft model's vocabulary of {} tokens", options.vocab, n_vocab);
  }
  if (options.vocab == DraftModelOptions::kAutoVocab) {
    proposer->frequent_ids_ = n_vocab > DraftModelOptions::kLargeVocab ? DraftModelOptions::kFrequentIds : 0;
  } else if (options.vocab < n_vocab) {
    proposer->frequent_ids_ = options.vocab;
  }
  if (proposer->frequent_ids_ > 0) {
    log_info("draft model: scoring ids below {} of {} where a slot's recent tokens lie there (--draft-vocab)",
             proposer->frequent_ids_, n_vocab);
  }
  state::StateOptions state_options{options.n_slots, options.n_ctx, options.policy, options.max_draft, 0};
  state_options.txn_working_copy = true;  // a draft round is max_draft one-token forwards of one transaction
  if (proposer->model_->recurrent_specs().size() > 0 && options.policy == state::RollbackPolicy::none) {
    return Status::errorf("{}: the draft model has recurrent layers; rollback policy 'none' cannot roll them back",
                          options.path);
  }
  proposer->state_ = std::make_unique<state::ModelState>(proposer->model_->kv_specs(),
                                                         proposer->model_->recurrent_specs(), state_options);
  proposer->forward_ = std::make_unique<model::ForwardContext>(*proposer->model_, pool,
                                                               std::max<int64_t>(options.n_batch, options.n_slots));
  proposer->slots_.resize(static_cast<size_t>(options.n_slots));
  if (const Status warmed = proposer->warm_up(); !warmed) {
    return warmed.with_context(options.path + ": draft model warm-up forward");
  }
  return proposer;
}

Status DraftModelProposer::warm_up() {
  // The draft's prompt catch-up asks for no logits, so the first round would be the first to read the output
  // matrix (a quarter of Qwen2.5-0.5B's bytes) and fault its pages in: ~0.15 s charged to that round's draft
  // length, which the policy then took for the cost of drafting (a 2-token draft measured at 197 ms, later
  // ones at 43 ms). One forward with logits at load pays it up front, as llama.cpp's warm-up run does, on a
  // state of its own so that the slots' stay untouched.
  const state::StateOptions scratch_options{1, 1, options_.policy, 0, 0};
  state::ModelState scratch(model_->kv_specs(), model_->recurrent_specs(), scratch_options);
  batch_.clear();
  batch_.add(0, 0, 0, true);
  return forward_->forward(batch_, scratch, logits_);
}

void DraftModelProposer::start_sequence(int slot, int64_t n_kept, bool kept_from_slot) {
  SlotState& s = slots_[slot];
  s.sampler.reset();
  // Tokens the draft has not run yet are caught up by the next round; state past n_kept cannot be taken back
  // (the draft keeps no rewind ring), and state of another sequence is of no use, so the slot starts over.
  if (kept_from_slot && !s.txn && s.n_done <= n_kept) return;
  s.txn.reset();  // rolls back whatever a cancelled round left open
  s.n_done = 0;
  state_->reset_slot(slot);
}

DraftToken DraftModelProposer::pick(SlotState& slot, const ProposeRequest& request, const float* logits) {
  const std::span<const float> row(logits, static_cast<size_t>(forward_->logit_vocab()));
  if (request.sampling == nullptr || request.sampling->temperature == 0.0f) return {sampling::argmax(row), {}};
  if (!slot.sampler) {
    // The draft samples with the target's truncation and temperature but no penalties: q only needs to be
    // the distribution the token was drawn from, and a good guess at p.
    sampling::SamplingParams params = *request.sampling;
    params.repetition_penalty = 1.0f;
    params.frequency_penalty = 0.0f;
    params.presence_penalty = 0.0f;
    params.seed = request.sampling->seed ^ 0x9e3779b97f4a7c15ULL;
    slot.sampler.emplace(std::move(sampling::Sampler::create(params).value()));
  }
  const auto q = slot.sampler->distribution(row);
  DraftToken token{0, {q.begin(), q.end()}};
  token.id = slot.sampler->draw(token.probs);
  return token;
}

Status DraftModelProposer::catch_up_until(const ProposeRequest& request, int64_t left) {
  SlotState& slot = slots_[request.slot];
  const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
  if (slot.txn) return Status::errorf("draft model: slot {} still has an open transaction", request.slot);
  if (slot.n_done > last) return Status::errorf("draft model: slot {} is ahead of its sequence", request.slot);
  while (last - slot.n_done > left) {
    const int64_t n_chunk = std::min(options_.n_batch, last - slot.n_done - left);
    batch_.clear();
    for (int64_t i = 0; i < n_chunk; ++i) {
      batch_.add(request.tokens[slot.n_done + i], static_cast<int32_t>(slot.n_done + i), request.slot, false);
    }
    REWIND_RETURN_IF_ERROR(forward_->forward(batch_, *state_, logits_));
    slot.n_done += n_chunk;
  }
  return Status::ok();
}

int64_t round_logit_vocab(std::span<const std::span<const int32_t>> recent_tokens, int64_t frequent_ids,
                          int64_t n_vocab, std::span<const int32_t> control_ids) {
  if (frequent_ids <= 0 || frequent_ids >= n_vocab) return n_vocab;
  const auto is_control = [&](int32_t id) { return std::binary_search(control_ids.begin(), control_ids.end(), id); };
  for (const std::span<const int32_t> tokens : recent_tokens) {
    const std::span<const int32_t> recent = tokens.last(std::min<size_t>(tokens.size(), kRecentTokens));
    int64_t text = 0, outside = 0;
    for (const int32_t id : recent) {
      // Control tokens lie outside in Qwen's vocabulary, so only those are looked up.
      if (id >= frequent_ids && is_control(id)) continue;
      ++text;
      outside += id >= frequent_ids;
    }
    if (outside * kMaxOutsideShare > text) return n_vocab;
  }
  return frequent_ids;
}

namespace {

// Whether the request wants a draft and its next token has room in the draft model's context.
bool drafts_for(const ProposeRequest& request, int64_t n_ctx) {
  const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
  return request.max_draft >= 1 && last >= 0 && last < n_ctx - 1;
}

}  // namespace

Status DraftModelProposer::catch_up(std::span<const ProposeRequest> requests) {
  // A round's own catch-up is the token after the draft the target kept (a fully accepted draft's last token,
  // never fed back); what lies before it the target decoded without the draft model.
  constexpr int64_t kRoundCatchUp = 1;
  for (const ProposeRequest& request : requests) {
    if (drafts_for(request, state_->n_ctx())) REWIND_RETURN_IF_ERROR(catch_up_until(request, kRoundCatchUp));
  }
  return Status::ok();
}

Status DraftModelProposer::propose(std::span<const ProposeRequest> requests,
                                   std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  // Each slot's round-0 run is kept under this, so all slots' runs fit one forward; what catch_up left over
  // beyond it (when the engine did not call it) goes in chunks of its own first.
  const int64_t per_slot = std::max<int64_t>(1, options_.n_batch / options_.n_slots);
  std::vector<size_t> active;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!drafts_for(requests[r], state_->n_ctx())) continue;
    REWIND_RETURN_IF_ERROR(catch_up_until(requests[r], per_slot - 1));
    active.push_back(r);
  }
  std::vector<std::span<const int32_t>> drafting_tokens;
  for (size_t r : active) drafting_tokens.push_back(requests[r].tokens);
  forward_->set_logit_vocab(
      round_logit_vocab(drafting_tokens, frequent_ids_, model_->hparams().n_vocab, options_.control_ids));
  // Round 0: each slot's remaining catch-up (plain) and its newest token (the transaction's first); then one
  // drafted token per forward.
  batch_.clear();
  std::vector<size_t> in_batch;
  for (size_t r : active) {
    const ProposeRequest& request = requests[r];
    SlotState& slot = slots_[request.slot];
    const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
    REWIND_ASSIGN_OR_RETURN(state::Transaction txn, state_->begin(request.slot, static_cast<int32_t>(last)));
    slot.txn.emplace(std::move(txn));
    for (int64_t pos = slot.n_done; pos <= last; ++pos) {
      batch_.add(request.tokens[pos], static_cast<int32_t>(pos), request.slot, pos == last);
    }
    in_batch.push_back(r);
  }
  // A greedy tree request's alternatives at each depth, [request][depth - 1]: the draft model's runners-up.
  std::vector<std::vector<std::vector<int32_t>>> alternatives(requests.size());
  for (int step = 0; !in_batch.empty(); ++step) {
    REWIND_RETURN_IF_ERROR(forward_->forward(batch_, *state_, logits_));
    std::vector<size_t> next;
    batch_.clear();
    for (size_t row = 0; row < in_batch.size(); ++row) {
      const size_t r = in_batch[row];
      const ProposeRequest& request = requests[r];
      SlotState& slot = slots_[request.slot];
      const float* logits = logits_.data() + row * forward_->logit_vocab();
      drafts[r].push_back(pick(slot, request, logits));
      // Sampled drafts carry their distribution, and siblings must be deterministic: those stay chains.
      if (request.max_nodes > 0 && request.tree_topk > 1 && drafts[r].back().probs.empty()) {
        alternatives[r].push_back(runners_up(std::span<const float>(logits, static_cast<size_t>(forward_->logit_vocab())),
                                             drafts[r].back().id, request.tree_topk - 1));
      }
      const int64_t position = static_cast<int64_t>(request.tokens.size()) + step;
      // The last draft is never fed back: the target verifies it, and the next round starts after it.
      if (static_cast<int>(drafts[r].size()) < request.max_draft && position < state_->n_ctx() - 1) {
        batch_.add(drafts[r].back().id, static_cast<int32_t>(position), request.slot, true);
        next.push_back(r);
      }
    }
    in_batch = std::move(next);
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!alternatives[r].empty()) {
      drafts[r] = chain_with_runners_up(drafts[r], alternatives[r], requests[r].max_nodes,
                                        requests[r].alternatives);
    }
  }
  return Status::ok();
}

Status DraftModelProposer::on_target_forward(int slot_index, int64_t first_position, int64_t, int64_t n_as_run,
                                             const float*) {
  SlotState& slot = slots_[slot_index];
  if (!slot.txn) return Status::ok();
  // The transaction ran the newest token and the chain's drafts fed back; keep what the target kept of them
  // (after a tree, up to where the kept path left the chain: the rest is caught up on as plain tokens).
  const int64_t txn_first = slot.txn->first_position();
  const int64_t keep = std::clamp<int64_t>(n_as_run - (txn_first - first_position), 0, slot.txn->n_tokens());
  REWIND_ASSIGN_OR_RETURN(state::CommitResult result, slot.txn->commit(keep));
  slot.txn.reset();
  slot.n_done = txn_first + (result.n_rerun > 0 ? 0 : keep);
  return Status::ok();
}

size_t DraftModelProposer::state_bytes() const { return state_->bytes(pool_.n_threads()).total(); }

}  // namespace rwd::spec
