#include "spec/mtp.h"

#include <algorithm>
#include <optional>

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

Status MtpProposer::check_rows(const ProposeRequest& request) const {
  const SlotState& slot = slots_[request.slot];
  const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
  const int64_t held = static_cast<int64_t>(slot.hidden.size()) / model_.hparams().n_embd;
  if (slot.n_fed < slot.hidden_first || last > slot.hidden_first + held) {
    return Status::errorf("mtp: slot {} lacks trunk hidden rows for positions {}..{}", request.slot, slot.n_fed,
                          last - 1);
  }
  return Status::ok();
}

template <typename Finished>
Status MtpProposer::feed(std::span<const ProposeRequest> requests, std::vector<size_t> feeding,
                         std::span<const int64_t> until, bool logits_at_end, Finished finished) {
  const int64_t n_embd = model_.hparams().n_embd;
  while (!feeding.empty()) {
    batch_.clear();
    hidden_in_.clear();
    std::vector<std::pair<size_t, int64_t>> done;  // (request, its last row in this batch)
    std::vector<size_t> still_feeding;
    for (size_t r : feeding) {
      const ProposeRequest& request = requests[r];
      SlotState& slot = slots_[request.slot];
      const int64_t n = std::min(n_batch_ - batch_.size(), until[r] - slot.n_fed);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t p = slot.n_fed + i;
        batch_.add(request.tokens[p + 1], static_cast<int32_t>(p), request.slot, logits_at_end && p == until[r] - 1);
        const float* row = slot.hidden.data() + (p - slot.hidden_first) * n_embd;
        hidden_in_.insert(hidden_in_.end(), row, row + n_embd);
      }
      slot.n_fed += n;
      if (slot.n_fed == until[r]) {
        done.push_back({r, batch_.size() - 1});
      } else {
        still_feeding.push_back(r);
      }
    }
    REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
    for (size_t r : feeding) {
      SlotState& slot = slots_[requests[r].slot];
      slot.hidden.erase(slot.hidden.begin(), slot.hidden.begin() + (slot.n_fed - slot.hidden_first) * n_embd);
      slot.hidden_first = slot.n_fed;
    }
    // With logits_at_end, the finished rows are the batch's logit rows, in order.
    for (size_t i = 0; i < done.size(); ++i) finished(done[i].first, static_cast<int64_t>(i), done[i].second);
    feeding = std::move(still_feeding);
  }
  return Status::ok();
}

Status MtpProposer::catch_up(std::span<const ProposeRequest> requests) {
  // Fed here: rows up to (not including) until[r]; a round's own rows, at most the newest token's and one per
  // token the draft before it could have had accepted, stay for propose.
  std::vector<int64_t> until(requests.size());
  std::vector<size_t> feeding;
  const int64_t n_embd = model_.hparams().n_embd;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    until[r] = static_cast<int64_t>(request.tokens.size()) - 2 - request.max_draft;
    SlotState& slot = slots_[request.slot];
    if (request.max_draft < 1 || slot.n_fed >= until[r]) continue;
    REWIND_RETURN_IF_ERROR(check_rows(request));
    const bool prompt = request.tokens.size() <= static_cast<size_t>(request.n_prompt);
    const int64_t window_start = until[r] - (prompt ? kPromptWindow : kResumeWindow);
    if (slot.n_fed < window_start) {
      slot.hidden.erase(slot.hidden.begin(), slot.hidden.begin() + (window_start - slot.hidden_first) * n_embd);
      slot.hidden_first = window_start;
      slot.n_fed = window_start;
    }
    feeding.push_back(r);
  }
  return feed(requests, std::move(feeding), until, false, [](size_t, int64_t, int64_t) {});
}

// All slots draft together: the catch-up rows of every slot share forwards (up to n_batch rows each), then each
// chain step is one forward of one row per slot still drafting, and each tree step one forward of one path per
// slot still growing. A row's logits and hidden do not depend on the other rows of its batch (batch
// invariance), so the drafts are those of slot-by-slot drafting.
Status MtpProposer::propose(std::span<const ProposeRequest> requests, std::vector<std::vector<DraftToken>>& drafts) {
  drafts.assign(requests.size(), {});
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t n_vocab = model_.hparams().n_vocab;
  const auto logit_row = [&](int64_t row) {
    return std::span<const float>(logits_.data() + row * n_vocab, static_cast<size_t>(n_vocab));
  };
  // Rows p = n_fed .. last-1 pair h(p) (held) with t(p+1) (known); t(last) is not in the trunk yet.
  std::vector<int64_t> until(requests.size());
  std::vector<size_t> feeding;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ProposeRequest& request = requests[r];
    until[r] = static_cast<int64_t>(request.tokens.size()) - 1;
    if (request.max_draft < 1 || until[r] < 1) continue;
    REWIND_RETURN_IF_ERROR(check_rows(request));
    if (slots_[request.slot].n_fed < until[r]) feeding.push_back(r);
  }
  // Per drafting request: the block's output hidden row of its last catch-up row, [n_embd], which the first
  // chain step or the tree's first nodes read.
  std::vector<std::vector<float>> chain_hidden(requests.size());
  std::vector<size_t> chaining;
  std::vector<size_t> growing;
  std::vector<std::optional<TreeGrowth>> trees(requests.size());
  REWIND_RETURN_IF_ERROR(feed(requests, std::move(feeding), until, true, [&](size_t r, int64_t logits, int64_t row) {
    const ProposeRequest& request = requests[r];
    if (request.max_nodes > 0 && request.tree_topk > 1) {
      const int max_depth = static_cast<int>(std::min<int64_t>(request.max_draft, state_.n_ctx() - until[r]));
      trees[r].emplace(max_depth, request.max_nodes, request.tree_topk, request.alternatives);
      trees[r]->expand(-1, logit_row(logits));
      growing.push_back(r);
    } else {
      drafts[r].push_back({sampling::argmax(logit_row(logits)), {}});
      chaining.push_back(r);
    }
    chain_hidden[r].assign(hidden_out_.begin() + row * n_embd, hidden_out_.begin() + (row + 1) * n_embd);
  }));
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
      drafts[next[i]].push_back({sampling::argmax(logit_row(static_cast<int64_t>(i))), {}});
      chain_hidden[next[i]].assign(hidden_out_.begin() + static_cast<int64_t>(i) * n_embd,
                                   hidden_out_.begin() + static_cast<int64_t>(i + 1) * n_embd);
    }
    chaining = std::move(next);
  }
  if (!growing.empty()) REWIND_RETURN_IF_ERROR(grow_trees(requests, growing, trees, chain_hidden));
  for (size_t r : growing) drafts[r] = trees[r]->draft();
  return Status::ok();
}

// A node's row is at position last + depth - 1 of the block's KV rows, where the chain's token of that depth
// would be; growing a node's children runs its row with its ancestors' rows in place below it. Rows stay where a
// forward wrote them, so only the ancestors that another branch has overwritten since run again (a chain batch
// from the shallowest of them down to the node), and a branch's rows all come back when the next catch-up
// overwrites them with the kept sequence's.
Status MtpProposer::grow_trees(std::span<const ProposeRequest> requests, std::span<const size_t> growing,
                               std::vector<std::optional<TreeGrowth>>& trees,
                               const std::vector<std::vector<float>>& first_hidden) {
  const int64_t n_embd = model_.hparams().n_embd;
  const int64_t n_vocab = model_.hparams().n_vocab;
  struct Growing {
    size_t request;
    std::vector<std::vector<float>> hidden;  // per node: the block's output hidden of its row, once run
    std::vector<int32_t> row_node;           // [depth - 1]: the node whose row the KV holds there (-1: none)
    int32_t expanding = -1;                  // the node whose row the next forward runs (-1: ask the tree)
    bool done = false;
  };
  std::vector<Growing> states;
  for (size_t r : growing) states.push_back({r, {}, std::vector<int32_t>(static_cast<size_t>(requests[r].max_draft), -1)});
  std::vector<int32_t> path;
  while (true) {
    batch_.clear();
    hidden_in_.clear();
    std::vector<std::pair<Growing*, std::vector<int32_t>>> runs;  // each run's nodes, shallowest first
    for (Growing& g : states) {
      if (g.done) continue;
      TreeGrowth& tree = *trees[g.request];
      if (g.expanding < 0) g.expanding = tree.next_expansion();
      if (g.expanding < 0) {
        g.done = true;
        continue;
      }
      path.clear();
      for (int32_t node = g.expanding; node >= 0; node = tree.parent(node)) path.insert(path.begin(), node);
      size_t first = 0;
      while (first + 1 < path.size() && g.row_node[first] == path[first]) ++first;
      if (batch_.size() > 0 && batch_.size() + static_cast<int64_t>(path.size() - first) > n_batch_) continue;
      const ProposeRequest& request = requests[g.request];
      const int64_t last = static_cast<int64_t>(request.tokens.size()) - 1;
      g.hidden.resize(static_cast<size_t>(tree.size()));
      for (size_t i = first; i < path.size(); ++i) {
        batch_.add(tree.token(path[i]), static_cast<int32_t>(last + static_cast<int64_t>(i)), request.slot,
                   i + 1 == path.size());
        const std::vector<float>& input = i == 0 ? first_hidden[g.request] : g.hidden[path[i - 1]];
        hidden_in_.insert(hidden_in_.end(), input.begin(), input.end());
      }
      runs.push_back({&g, std::vector<int32_t>(path.begin() + static_cast<int64_t>(first), path.end())});
    }
    if (runs.empty()) return Status::ok();
    REWIND_RETURN_IF_ERROR(forward_.forward_mtp(batch_, hidden_in_.data(), state_, logits_, hidden_out_));
    int64_t row = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      auto& [g, nodes] = runs[k];
      TreeGrowth& tree = *trees[g->request];
      for (int32_t node : nodes) {
        std::vector<float>& hidden = g->hidden[node];
        if (hidden.empty()) hidden.assign(hidden_out_.begin() + row * n_embd, hidden_out_.begin() + (row + 1) * n_embd);
        g->row_node[static_cast<size_t>(tree.depth(node) - 1)] = node;
        ++row;
      }
      tree.expand(g->expanding,
                  std::span<const float>(logits_.data() + static_cast<int64_t>(k) * n_vocab, static_cast<size_t>(n_vocab)));
      g->expanding = -1;
    }
  }
}

size_t MtpProposer::state_bytes() const {
  size_t bytes = 0;
  for (const SlotState& slot : slots_) bytes += slot.hidden.capacity() * sizeof(float);
  return bytes;
}

}  // namespace rwd::spec
