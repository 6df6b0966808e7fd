#include "spec/mtp.h"

#include <algorithm>

#include "model/arch_info.h"
#include "sampling/logprobs.h"
#include "spec/draft_tree.h"

namespace rwd::spec {

Result<std::unique_ptr<MtpProposer>> MtpProposer::create(const model::Model& model, model::ForwardContext& forward,
                                                         state::ModelState& state, int64_t n_batch) {
  if (model.weights().nextn.empty() || model.arch().forward_mtp == nullptr) {
    return Status::errorf("--spec mtp: the {} model has no next-token-prediction (MTP / nextn) layers",
                          model.hparams().arch);
  }
  std::unique_ptr<MtpProposer> proposer(new MtpProposer(model, forward, state, n_batch));
  proposer->slots_.resize(static_cast<size_t>(state.n_slots()));
  return proposer;
}

void MtpProposer::start_sequence(int slot_index, int64_t n_kept, bool kept_from_slot) {
  SlotState& slot = slots_[slot_index];
  if (n_kept == 0) {
    slot = SlotState{};
    return;
  }
  // Row n_kept - 1 pairs h(n_kept - 1) with the new sequence's token n_kept: it is run again when the trunk's
  // row is still held. When it is not (propose drops rows it has fed), that one row of the block's KV keeps the
  // old sequence's token: the drafts may differ from a fresh sequence's, the verified output cannot.
  // Restored from an archive, the block's KV rows came with the trunk's (the archived sequence's own, up to
  // where its drafting had fed them), but no trunk row is held: drafting resumes at the next target forward.
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t held = static_cast<int64_t>(slot.hidden.size()) / n_embd;
  if (kept_from_slot && n_kept - 1 >= slot.hidden_first && n_kept - 1 < slot.hidden_first + held) {
    slot.hidden.resize(static_cast<size_t>((n_kept - slot.hidden_first) * n_embd));
    slot.n_fed = std::min(slot.n_fed, n_kept - 1);
  } else if (!kept_from_slot || n_kept <= slot.hidden_first + held) {
    slot.hidden.clear();
    slot.hidden_first = n_kept;
    slot.n_fed = n_kept;
  }
}

Status MtpProposer::on_target_forward(int slot_index, int64_t first_position, int64_t n_kept, int64_t,
                                      const float* hidden) {
  SlotState& slot = slots_[slot_index];
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t held = static_cast<int64_t>(slot.hidden.size()) / n_embd;
  if (held == 0) {
    slot.hidden_first = first_position;
  } else if (slot.hidden_first + held != first_position) {
    // The target re-ran positions (a checkpoint-policy re-run): keep rows up to there, then the new ones.
    const int64_t keep = std::clamp<int64_t>(first_position - slot.hidden_first, 0, held);
    slot.hidden.resize(static_cast<size_t>(keep * n_embd));
    if (keep == 0) slot.hidden_first = first_position;
  }
  slot.hidden.insert(slot.hidden.end(), hidden, hidden + n_kept * n_embd);
  slot.n_fed = std::min(slot.n_fed, first_position);
  return Status::ok();
}

// All slots draft together: the catch-up rows of every slot share forwards (up to n_batch rows each), then each
// chain step is one forward of one row per slot still drafting. A row's logits and hidden do not depend on the
// other rows of its batch (batch invariance), so the drafts are those of slot-by-slot drafting.
Status MtpProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t n_vocab = model_.hparams().n_vocab;
  // A tree request's alternatives at each depth, [request][depth - 1]: the block's runners-up there.
  std::vector<std::vector<std::vector<int32_t>>> alternatives(requests.size());
  const auto draft_from = [&](size_t r, int64_t row) {
    const std::span<const float> logits(logits_.data() + row * n_vocab, static_cast<size_t>(n_vocab));
    const ProposeRequest& request = requests[r];
    drafts[r].push_back({sampling::argmax(logits), {}});
    if (request.max_nodes > 0 && request.tree_topk > 1) {
      alternatives[r].push_back(runners_up(logits, drafts[r].back().id, request.tree_topk - 1));
    }
  };
  // Rows p = n_fed .. last-1 pair h(p) (held) with t(p+1) (known); t(last) is not in the trunk yet.
  std::vector<size_t> feeding;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    const SlotState& slot = slots_[request.slot];
    const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
    if (request.max_draft < 1 || last < 1) continue;
    const int64_t held = static_cast<int64_t>(slot.hidden.size()) / n_embd;
    if (slot.n_fed < slot.hidden_first || last > slot.hidden_first + held) {
      return Status::errorf("mtp: slot {} lacks trunk hidden rows for positions {}..{}", request.slot, slot.n_fed,
                            last - 1);
    }
    if (slot.n_fed < last) feeding.push_back(r);
  }
  // Per drafting request: its hidden row for the next chain step, [n_embd].
  std::vector<std::vector<float>> chain_hidden(requests.size());
  std::vector<size_t> chaining;
  while (!feeding.empty()) {
    batch_.clear();
    hidden_in_.clear();
    std::vector<std::pair<size_t, int64_t>> finished;  // (request, its last row in this batch)
    std::vector<size_t> still_feeding;
    for (size_t r : feeding) {
      const ProposeRequest& request = requests[r];
      SlotState& slot = slots_[request.slot];
      const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
      const int64_t n = std::min(n_batch_ - batch_.size(), last - slot.n_fed);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = slot.n_fed + i;
        batch_.add(request.tokens[p + 1], static_cast<int32_t>(p), request.slot, p == last - 1);
        const float* row = slot.hidden.data() + (p - slot.hidden_first) * n_embd;
        hidden_in_.insert(hidden_in_.end(), row, row + n_embd);
      }
      slot.n_fed += n;
      if (slot.n_fed == last) {
        finished.push_back({r, batch_.size() - 1});
      } else {
        still_feeding.push_back(r);
      }
    }
    REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
    for (size_t i = 0; i < finished.size(); ++i) {
      const auto [r, row] = finished[i];
      SlotState& slot = slots_[requests[r].slot];
      slot.hidden.clear();
      slot.hidden_first = slot.n_fed;
      draft_from(r, static_cast<int64_t>(i));  // the finished rows are the batch's logit rows, in order
      chain_hidden[r].assign(hidden_out_.begin() + row * n_embd, hidden_out_.begin() + (row + 1) * n_embd);
      chaining.push_back(r);
    }
    feeding = std::move(still_feeding);
  }
  // Chain: each slot's block output hidden with the token it predicted, one position further each time.
  for (int k = 1; !chaining.empty(); ++k) {
    batch_.clear();
    hidden_in_.clear();
    std::vector<size_t> next;
    for (size_t r : chaining) {
      const ProposeRequest& request = requests[r];
      const int64_t position = static_cast<int64_t>(request.tokens.size()) - 1 + k - 1;
      if (k == request.max_draft || position >= state_.n_ctx() - 1) continue;
      batch_.add(drafts[r].back().id, static_cast<int32_t>(position), request.slot, true);
      hidden_in_.insert(hidden_in_.end(), chain_hidden[r].begin(), chain_hidden[r].end());
      next.push_back(r);
    }
    if (next.empty()) break;
    REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
    for (size_t i = 0; i < next.size(); ++i) {
      draft_from(next[i], static_cast<int64_t>(i));
      chain_hidden[next[i]].assign(hidden_out_.begin() + static_cast<int64_t>(i) * n_embd,
                                   hidden_out_.begin() + static_cast<int64_t>(i + 1) * n_embd);
    }
    chaining = std::move(next);
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!alternatives[r].empty()) {
      drafts[r] = chain_with_runners_up(drafts[r], alternatives[r], requests[r].max_nodes,
                                        requests[r].alternatives);
    }
  }
  return Status::ok();
}

size_t MtpProposer::state_bytes() const {
  size_t bytes = 0;
  for (const SlotState& slot : slots_) bytes += slot.hidden.capacity() * sizeof(float);
  return bytes;
}

}  // namespace rwd::spec
