#include "spec/mtp.h"

#include <algorithm>

#include "model/arch_info.h"
#include "sampling/logprobs.h"

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

void MtpProposer::reset_slot(int slot) { slots_[slot] = SlotState{}; }

Status MtpProposer::on_target_forward(int slot_index, int64_t first_position, int64_t, int64_t n_kept,
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

Status MtpProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    SlotState& slot = slots_[request.slot];
    const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;  // t(last) is not in the trunk yet
    if (request.max_draft < 1 || last < 1) continue;
    // Rows p = n_fed .. last-1 pair h(p) (held) with t(p+1) (known).
    const int64_t held = static_cast<int64_t>(slot.hidden.size()) / n_embd;
    if (slot.n_fed < slot.hidden_first || last > slot.hidden_first + held) {
      return Status::errorf("mtp: slot {} lacks trunk hidden rows for positions {}..{}", request.slot, slot.n_fed,
                            last - 1);
    }
    while (slot.n_fed < last) {
      const int64_t n = std::min(n_batch_, last - slot.n_fed);
      batch_.clear();
      hidden_in_.resize(static_cast<size_t>(n * n_embd));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = slot.n_fed + i;
        batch_.add(request.tokens[p + 1], static_cast<int32_t>(p), request.slot, i == n - 1);
        std::copy_n(slot.hidden.data() + (p - slot.hidden_first) * n_embd, n_embd, hidden_in_.data() + i * n_embd);
      }
      REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
      slot.n_fed += n;
    }
    slot.hidden.clear();
    slot.hidden_first = last;
    if (static_cast<int64_t>(logits_.size()) < n_vocab || last == 0) continue;
    // Chain: the block's output hidden with the token it predicted, one position further each time.
    for (int k = 0; k < request.max_draft; ++k) {
      const int32_t id = sampling::argmax(std::span<const float>(logits_.data(), static_cast<size_t>(n_vocab)));
      drafts[r].push_back({id, {}});
      const int64_t position = last + k;
      if (k + 1 == request.max_draft || position >= state_.n_ctx() - 1) break;
      hidden_in_.assign(hidden_out_.end() - n_embd, hidden_out_.end());
      batch_.clear();
      batch_.add(id, static_cast<int32_t>(position), request.slot, true);
      REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
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
