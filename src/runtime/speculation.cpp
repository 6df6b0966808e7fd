// The speculative half of an engine step: asking the proposer for drafts and scheduling them into the batch,
// verifying a round and keeping its statistics, and telling each slot's draft policy what its round cost. The
// step itself, requests, prompt reuse and emission live in engine_impl.cpp.
#include <algorithm>
#include <array>
#include <chrono>

#include "runtime/engine_impl.h"

namespace rwd::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// Speculative decode steps after which a plain step is timed again (see schedule_decode).
constexpr int64_t kPlainRetimeSteps = 64;
// calibrate_costs: prompt tokens before the first timed step; timings of each size: the first of a size counts
// only until the second arrives, so six fill the median's window of five with warm ones, robust to one step
// that another process slowed (on the trained hybrid one of three 2-token timings took 846 µs against 479,
// and with two kept their mean priced every verify 40 % too dear). A model whose reps take long stops after
// two once half a second has gone (a rep of a 1.5B model on two cores takes about that), so that loading
// costs little more. Draft lengths up to kCalibratedLengths: the policy seldom drafts more on a CPU, and
// longer ones are timed when first drafted.
constexpr int64_t kCalibrationPrompt = 4;
constexpr int kCalibrationReps = 6;
constexpr int kCalibrationMinReps = 2;
constexpr double kCalibrationSeconds = 0.5;
constexpr int kCalibratedLengths = 3;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Status EngineImpl::calibrate_costs() {
  const int longest_draft = std::min(options_.spec.draft_max, kCalibratedLengths);
  // Each rep advances the slots by one plain step and one token per round (a round keeps its newest token).
  const int64_t positions = kCalibrationPrompt + int64_t{kCalibrationReps} * (1 + longest_draft);
  // The checkpoint policy re-runs a round's kept token, which is not a round's cost on the others; a context or
  // batch too small for the sizes leaves the policy to measure as it goes.
  if (state_->policy() == state::RollbackPolicy::checkpoint || positions >= options_.n_ctx) return Status::ok();
  const int32_t filler = tokenizer_->bos_id() >= 0 ? tokenizer_->bos_id() : 0;
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<int> slot_counts = {1};
  if (options_.n_slots > 1) slot_counts.push_back(options_.n_slots);
  for (const int n_slots : slot_counts) {
    if (static_cast<int64_t>(n_slots) * (1 + longest_draft) > options_.n_batch) continue;
    // With one slot the proposer drafts each round as in a request (its drafts are what the target verifies);
    // with all slots the target alone is timed.
    const bool with_proposer = proposer_ != nullptr && n_slots == 1;
    std::vector<int32_t> tokens(static_cast<size_t>(kCalibrationPrompt), filler);
    batch_.clear();
    for (int slot = 0; slot < n_slots; ++slot) {
      for (int64_t pos = 0; pos < kCalibrationPrompt; ++pos) {
        batch_.add(filler, static_cast<int32_t>(pos), slot, pos + 1 == kCalibrationPrompt);
      }
    }
    REWIND_RETURN_IF_ERROR(forward_->forward(batch_, *state_, logits_));
    spec::ProposeRequest request;
    request.sampling = &greedy;
    request.n_prompt = kCalibrationPrompt;
    request.max_draft = longest_draft;
    const std::span<const spec::ProposeRequest> requests(&request, 1);
    if (with_proposer) {
      proposer_->start_sequence(0, 0, false);
      REWIND_RETURN_IF_ERROR(proposer_->on_target_forward(0, 0, kCalibrationPrompt, kCalibrationPrompt,
                                                          forward_->hidden_rows()));
      request.tokens = tokens;
      REWIND_RETURN_IF_ERROR(proposer_->catch_up(requests));
    }
    std::vector<std::vector<spec::DraftToken>> drafts(1);
    const auto began = Clock::now();
    for (int rep = 0; rep < kCalibrationReps; ++rep) {
      if (rep >= kCalibrationMinReps && seconds_between(began, Clock::now()) > kCalibrationSeconds) break;
      for (int n_tokens = 1; n_tokens <= 1 + longest_draft; ++n_tokens) {
        const auto newest = static_cast<int32_t>(tokens.size());
        tokens.push_back(filler);
        drafts.assign(1, {});
        if (with_proposer && n_tokens > 1) {
          request.tokens = tokens;
          request.max_draft = n_tokens - 1;
          const auto start = Clock::now();
          REWIND_RETURN_IF_ERROR(proposer_->catch_up(requests));
          REWIND_RETURN_IF_ERROR(proposer_->propose(requests, drafts));
          if (!drafts[0].empty()) {
            proposer_cost_.observe(static_cast<int>(drafts[0].size()), seconds_between(start, Clock::now()));
          }
        }
        std::vector<state::Transaction> txns;
        batch_.clear();
        for (int slot = 0; slot < n_slots; ++slot) {
          if (n_tokens > 1) {
            REWIND_ASSIGN_OR_RETURN(state::Transaction txn, state_->begin(slot, newest));
            txns.push_back(std::move(txn));
          }
          batch_.add(filler, newest, slot, true);
          // The proposer's draft as a chain, filled up to the round's size (only the size is timed).
          for (int i = 1; i < n_tokens; ++i) {
            const size_t d = static_cast<size_t>(i - 1);
            batch_.add(d < drafts[0].size() ? drafts[0][d].id : filler, newest + i, slot, true);
          }
        }
        const auto start = Clock::now();
        REWIND_RETURN_IF_ERROR(forward_->forward(batch_, *state_, logits_));
        cost_.observe(n_slots, batch_.size(), seconds_between(start, Clock::now()));
        // Every draft rejected: the round keeps its newest token, as a plain step does.
        for (state::Transaction& txn : txns) REWIND_RETURN_IF_ERROR(txn.commit(1).status());
        if (with_proposer) {
          REWIND_RETURN_IF_ERROR(proposer_->on_target_forward(0, newest, 1, 1, forward_->hidden_rows()));
        }
      }
    }
    for (int slot = 0; slot < n_slots; ++slot) state_->reset_slot(slot);
    if (with_proposer) proposer_->start_sequence(0, 0, false);
  }
  batch_.clear();
  return Status::ok();
}

void EngineImpl::assume_costs() {
  const double verify_token = options_.spec.assumed_verify_token;
  const double draft_token = options_.spec.assumed_draft_token;
  // Twice each: a size's first timing counts only until the second arrives (RecentSeconds). A step of s slots
  // costs s plain steps of a slot, so a token ahead is worth a whole step (CostModel::token_value).
  for (int rep = 0; rep < 2; ++rep) {
    for (int64_t n_slots = 1; n_slots <= options_.n_slots; ++n_slots) {
      for (int64_t n_tokens = n_slots; n_tokens <= spec::CostModel::kMaxTokens; ++n_tokens) {
        cost_.observe(n_slots, n_tokens,
                      static_cast<double>(n_slots) + verify_token * static_cast<double>(n_tokens - n_slots));
      }
    }
    if (draft_token <= 0.0) continue;
    for (int length = 1; length <= spec::ProposerCost::kMaxLength; ++length) {
      proposer_cost_.observe(length, draft_token * length);
      proposer_cost_.observe_catch_up(length, draft_token * length);
    }
  }
}

// A draft model reads the prompt behind the target, chunk by chunk: its prefill is then part of the time to the
// first token, as in llama.cpp, instead of a stall in the first speculative round, and a long prompt's draft
// prefill comes in the target's chunks rather than in one piece that holds up every other slot.
Status EngineImpl::follow_prompt(const Slot& slot) {
  if (!slot.policy) return Status::ok();
  const spec::ProposeRequest request = propose_request(slot, slot.n_computed, {options_.spec.draft_max, 0, {}});
  return proposer_->catch_up(std::span<const spec::ProposeRequest>(&request, 1));
}

spec::ProposeRequest EngineImpl::propose_request(const Slot& slot, int64_t n_tokens,
                                                 const spec::DraftShape& shape) const {
  spec::ProposeRequest request;
  request.slot = slot.index;
  request.tokens = std::span<const int32_t>(slot.tokens.data(), static_cast<size_t>(n_tokens));
  request.max_draft = shape.length;
  request.max_nodes = shape.nodes;
  request.alternatives = shape.alternatives;
  request.tree_topk = options_.spec.tree_topk;
  request.sampling = &slot.sampler->params();
  request.n_prompt = slot.n_prompt;
  request.oracle = std::span<const int32_t>(slot.request.oracle_ids);
  return request;
}

int EngineImpl::tree_nodes(const Slot& slot) const {
  return slot.request.spec.tree_nodes >= 0 ? slot.request.spec.tree_nodes : options_.spec.tree_nodes;
}

// Decoding slots go first (one token each, or a verify run), ahead of prompt chunks: they bound latency.
void EngineImpl::schedule_decode(std::vector<SlotRun>& runs, int64_t& budget) {
  std::vector<int> decoding;
  for (Slot& slot : slots_) {
    if (slot.busy && slot.n_computed >= slot.n_prompt && static_cast<int64_t>(slot.tokens.size()) > slot.n_computed) {
      decoding.push_back(slot.index);
    }
  }
  // Draft lengths first, so that one proposer call serves every speculating slot.
  std::vector<spec::ProposeRequest> requests;
  std::vector<int> request_slots;
  std::vector<spec::DraftShape> shapes;
  // The policy weighs a verify round against a plain step of the same slots, so that step must have been timed:
  // until it has, and again after some speculative steps (the machine's speed drifts), the slots decode plainly
  // once. Without it a slot that drafts from its first step never learns what drafting costs and keeps drafting
  // where plain decoding is faster. The first timings come soon after each other (after 2, 4, 8 … speculative
  // steps, up to kPlainRetimeSteps): the first steps after a prompt run slow (3x on the trained hybrid), and a
  // step timed then made every verify look cheap for the next 64 rounds.
  const int64_t n_decoding = static_cast<int64_t>(decoding.size());
  const int64_t plain_timings = cost_.timings(n_decoding, n_decoding);
  const int64_t retime_after = std::min(kPlainRetimeSteps, int64_t{1} << std::min<int64_t>(plain_timings, 6));
  const bool time_plain_step = options_.spec.adaptive && !assumed_costs() && n_decoding > 0 &&
                               (plain_timings == 0 || speculative_steps_since_plain_ >= retime_after);
  for (int index : decoding) {
    Slot& slot = slots_[index];
    if (!slot.policy) continue;
    if (time_plain_step) {
      slot.policy->on_plain_step();
      continue;
    }
    const int64_t newest = static_cast<int64_t>(slot.tokens.size()) - 1;
    const int64_t n_rerun = newest - slot.n_computed;
    // Tokens that fit the context's KV rows and the batch; a draft longer than the tokens still wanted is waste.
    const int64_t node_room = std::min<int64_t>(options_.n_ctx - 1 - newest,
                                                budget - n_rerun - 1 - static_cast<int64_t>(decoding.size()));
    const int64_t room = std::min<int64_t>(node_room, slot.request.max_tokens - slot.n_generated - 1);
    spec::DraftShape shape =
        slot.policy->next_shape(cost_, proposer_cost_, static_cast<int64_t>(decoding.size()), tree_nodes(slot),
                                options_.spec.tree_topk, proposer_->branches_continue(), drafting_slots_);
    shape.fit(static_cast<int>(std::min<int64_t>(shape.length, room)), static_cast<int>(node_room));
    if (shape.length < 1) continue;
    requests.push_back(propose_request(slot, static_cast<int64_t>(slot.tokens.size()), shape));
    request_slots.push_back(index);
    shapes.push_back(std::move(shape));
  }
  // Each slot chose expecting drafting_slots_ to draft with it; with fewer, each bears more of the round. A
  // slot whose budget does not bear its round with those that do decodes plainly, until all that draft bear it.
  for (bool declined = true; declined && !requests.empty();) {
    declined = false;
    for (size_t r = requests.size(); r-- > 0;) {
      spec::DraftPolicy& policy = *slots_[request_slots[r]].policy;
      if (policy.bears(shapes[r], cost_, proposer_cost_, n_decoding, static_cast<int64_t>(requests.size()))) continue;
      policy.decline();
      requests.erase(requests.begin() + static_cast<std::ptrdiff_t>(r));
      request_slots.erase(request_slots.begin() + static_cast<std::ptrdiff_t>(r));
      shapes.erase(shapes.begin() + static_cast<std::ptrdiff_t>(r));
      declined = true;
    }
  }
  speculative_steps_since_plain_ = requests.empty() ? 0 : speculative_steps_since_plain_ + 1;
  std::vector<std::vector<spec::DraftToken>> drafts(requests.size());
  // An injected fault stands for the proposer failing on that request's part of the call. The proposer's
  // catch-up on a round's kept tokens is part of every round and priced with the call; one on a run of plain
  // steps is priced apart, by the tokens owed, and charged to the round that resumes speculating.
  propose_seconds_ = 0.0;
  catch_up_seconds_ = 0.0;
  longest_draft_ = 0;
  const auto propose = [&](std::span<const spec::ProposeRequest> part, std::vector<std::vector<spec::DraftToken>>& out) {
    for (const spec::ProposeRequest& request : part) REWIND_RETURN_IF_ERROR(injected_fault(slots_[request.slot], "propose"));
    const auto start = Clock::now();
    REWIND_RETURN_IF_ERROR(proposer_->catch_up(part));
    const auto caught_up = Clock::now();
    REWIND_RETURN_IF_ERROR(proposer_->propose(part, out));
    catch_up_seconds_ += seconds_between(start, caught_up);
    propose_seconds_ += seconds_between(caught_up, Clock::now());
    return Status::ok();
  };
  std::vector<int64_t> owed_rows(requests.size());
  int64_t owed_total = 0;
  for (size_t r = 0; r < requests.size(); ++r) {
    Slot& slot = slots_[requests[r].slot];
    owed_rows[r] = std::clamp<int64_t>(static_cast<int64_t>(slot.tokens.size()) - slot.proposed_through, 0,
                                       proposer_->max_catch_up_rows());
    owed_total += owed_rows[r];
    slot.proposed_through = static_cast<int64_t>(slot.tokens.size());
  }
  const int64_t steady_rows = spec::DraftPolicy::steady_owed_rows(options_.spec.draft_max);
  resuming_ = std::any_of(owed_rows.begin(), owed_rows.end(), [&](int64_t owed) { return owed > steady_rows; });
  if (!requests.empty()) {
    bool measured = true;
    if (!propose(requests, drafts)) {
      measured = false;
      // One call drafts for every slot: find the requests at fault by drafting for each alone, after clearing
      // what the failed call may have left half-done in the proposer (an open draft transaction).
      drafts.assign(requests.size(), {});
      for (size_t r = 0; r < requests.size(); ++r) {
        Slot& slot = slots_[requests[r].slot];
        proposer_->start_sequence(slot.index, slot.n_computed, /*kept_from_slot=*/true);
        std::vector<std::vector<spec::DraftToken>> alone;
        const Status drafted = propose(std::span<const spec::ProposeRequest>(&requests[r], 1), alone);
        if (!drafted) {
          fail(slot, "propose", drafted);
        } else {
          drafts[r] = std::move(alone[0]);
        }
      }
    }
    for (const auto& draft : drafts) longest_draft_ = std::max(longest_draft_, draft.size());
    // One call drafts for every speculating slot; its cost is that of its longest draft. A call in a slot's
    // first steps after its prompt runs cold, as the target's steps then do (see step).
    measured = measured && std::all_of(requests.begin(), requests.end(), [&](const spec::ProposeRequest& request) {
                 return slots_[request.slot].n_generated >= kColdSteps;
               });
    measured = measured && !assumed_costs();
    if (measured && longest_draft_ > 0) {
      proposer_cost_.observe(static_cast<int>(longest_draft_), propose_seconds_ + (resuming_ ? 0.0 : catch_up_seconds_));
    }
    if (measured && resuming_) proposer_cost_.observe_catch_up(owed_total, catch_up_seconds_);
  }
  for (int index : decoding) {
    Slot& slot = slots_[index];
    if (!slot.busy) continue;  // failed above
    SlotRun run;
    run.slot = index;
    run.first_position = slot.n_computed;
    const int64_t newest = static_cast<int64_t>(slot.tokens.size()) - 1;
    for (size_t r = 0; r < request_slots.size(); ++r) {
      if (request_slots[r] != index) continue;
      run.draft = std::move(drafts[r]);
      run.proposed = true;
      run.owed_rows = owed_rows[r];
    }
    if (!run.draft.empty()) {
      Result<state::Transaction> txn = state_->begin(index, static_cast<int32_t>(newest));
      if (!txn) {
        fail(slot, "rollback", txn.status());
        continue;
      }
      run.txn.emplace(std::move(*txn));
    }
    // Re-run tokens (checkpoint policy) are plain; the newest token and the draft ask for logits.
    for (int64_t pos = slot.n_computed; pos < newest; ++pos) batch_.add(slot.tokens[pos], static_cast<int32_t>(pos), index, false);
    run.logit_row = batch_.n_logit_rows();
    const auto root_row = static_cast<int32_t>(batch_.size());
    batch_.add(slot.tokens[newest], static_cast<int32_t>(newest), index, true);
    if (spec::is_chain(run.draft)) {
      for (size_t i = 0; i < run.draft.size(); ++i) {
        batch_.add(run.draft[i].id, static_cast<int32_t>(newest + 1 + static_cast<int64_t>(i)), index, true);
      }
    } else {
      for (size_t i = 0; i < run.draft.size(); ++i) {
        const int32_t parent = spec::draft_parent(run.draft, i);
        const int32_t parent_row = parent < 0 ? root_row : root_row + 1 + parent;
        batch_.add_node(run.draft[i].id, batch_.positions[parent_row] + 1, index, true, parent_row);
      }
    }
    run.n_tokens = newest + 1 + static_cast<int64_t>(run.draft.size()) - slot.n_computed;
    budget -= run.n_tokens;
    slot.n_computed = newest + 1;
    runs.push_back(std::move(run));
  }
}

// Verifies a speculating run's draft against the target's logits, emits the tokens, commits the transaction.
Status EngineImpl::finish_spec_run(Slot& slot, SlotRun& run) {
  REWIND_RETURN_IF_ERROR(injected_fault(slot, "verify"));
  const int64_t txn_first = run.txn->first_position();
  const float* rows = logits_.data() + run.logit_row * info_.n_vocab;
  const int64_t remaining = slot.request.max_tokens - slot.n_generated;
  int64_t n_emitted = 0;
  const auto stop = [&](int32_t token) {
    ++n_emitted;
    return (!slot.request.ignore_eos && tokenizer_->is_eog(token)) || n_emitted >= remaining;
  };
  REWIND_ASSIGN_OR_RETURN(spec::VerifyOutcome outcome,
                          spec::verify(*slot.sampler, run.draft, rows, info_.n_vocab, stop));
  run.n_emitted = static_cast<int>(outcome.emitted.size());
  const int n_drafted = static_cast<int>(run.draft.size());
  const bool tree = !spec::is_chain(run.draft);
  // Depth of each drafted token (1: a child of the newest token); a chain's token i is at depth i + 1.
  std::array<int, SpecOptions::kMaxTreeNodes> depth{};
  REWIND_CHECK(run.draft.size() <= depth.size(), "a draft of {} tokens", run.draft.size());
  int n_depths = 0;
  for (size_t i = 0; i < run.draft.size(); ++i) {
    const int32_t parent = spec::draft_parent(run.draft, i);
    depth[i] = parent < 0 ? 1 : depth[parent] + 1;
    n_depths = std::max(n_depths, depth[i]);
  }
  const int32_t last_accepted = outcome.path.empty() ? -1 : outcome.path.back();
  bool rejected = false;  // a drafted token after the accepted ones was verified and not taken
  for (size_t i = 0; i < run.draft.size(); ++i) rejected = rejected || spec::draft_parent(run.draft, i) == last_accepted;
  // The draft's first path is the chain the proposer would have drafted; what of it was accepted is what the
  // draft-length policy learns from, so that a tree's alternatives do not pass for a chain's acceptance.
  int chain_length = 0;
  while (chain_length < n_drafted && spec::draft_parent(run.draft, chain_length) == chain_length - 1) ++chain_length;
  int chain_accepted = 0;
  while (chain_accepted < outcome.n_accepted && outcome.path[chain_accepted] == chain_accepted) ++chain_accepted;
  SpecStats& stats = slot.timings.spec;
  ++stats.rounds;
  stats.drafted += n_drafted;
  stats.accepted += outcome.n_accepted;
  if (tree) {
    ++stats.tree_rounds;
    stats.tree_nodes += n_drafted;
  }
  if (stats.drafted_by_position.size() < static_cast<size_t>(n_depths)) {
    stats.drafted_by_position.resize(n_depths, 0);
    stats.accepted_by_position.resize(n_depths, 0);
  }
  for (int i = 0; i < n_depths; ++i) ++stats.drafted_by_position[i];
  for (int i = 0; i < outcome.n_accepted; ++i) ++stats.accepted_by_position[i];
  if (rejected) ++stats.rollbacks;
  slot.policy->record(chain_length, chain_accepted);
  if (tree) {
    std::array<int32_t, SpecOptions::kMaxTreeNodes> parents{};
    for (size_t i = 0; i < run.draft.size(); ++i) parents[i] = spec::draft_parent(run.draft, i);
    slot.policy->record_tree(std::span<const int32_t>(parents.data(), run.draft.size()), outcome.path);
  }

  const int64_t n_keep = 1 + outcome.n_accepted;
  std::vector<int32_t> kept_path(1, 0);  // transaction token indices: the newest token, then the accepted drafts
  for (int32_t index : outcome.path) kept_path.push_back(1 + index);
  REWIND_ASSIGN_OR_RETURN(state::CommitResult committed,
                          tree ? run.txn->commit_path(kept_path) : run.txn->commit(n_keep));
  run.txn.reset();
  const int64_t n_plain = txn_first - run.first_position;
  const float* run_hidden = forward_->hidden_rows() + run_first_row_ * info_.n_embd;
  if (tree) {
    // The kept tokens' rows in order: the run's plain ones and the newest token's, then the accepted path's.
    kept_hidden_.assign(run_hidden, run_hidden + (n_plain + 1) * info_.n_embd);
    for (int32_t index : outcome.path) {
      const float* row = run_hidden + (n_plain + 1 + index) * info_.n_embd;
      kept_hidden_.insert(kept_hidden_.end(), row, row + info_.n_embd);
    }
    run_hidden = kept_hidden_.data();
  }
  REWIND_RETURN_IF_ERROR(
      proposer_->on_target_forward(slot.index, run.first_position, n_plain + n_keep, n_plain + 1 + chain_accepted,
                                   run_hidden));
  slot.n_computed = committed.n_rerun > 0 ? txn_first : txn_first + n_keep;
  // Token i came from the row of the token before it: the newest token's, then the accepted drafts'.
  for (size_t i = 0; i < outcome.emitted.size() && slot.busy; ++i) {
    const int64_t row = i == 0 ? 0 : 1 + outcome.path[i - 1];
    emit(slot, outcome.emitted[i], rows + row * info_.n_vocab);
  }
  return Status::ok();
}

void EngineImpl::settle_rounds(const std::vector<SlotRun>& runs) {
  const auto n_slots = static_cast<int64_t>(runs.size());
  const double plain_seconds = cost_.seconds(n_slots, n_slots);
  int64_t n_proposed = 0;
  int64_t owed_total = 0;
  for (const SlotRun& run : runs) {
    n_proposed += run.proposed ? 1 : 0;
    owed_total += run.proposed ? run.owed_rows : 0;
  }
  if (n_proposed == 0 || plain_seconds <= 0.0) return;
  const auto drafted = std::count_if(runs.begin(), runs.end(), [](const SlotRun& run) { return !run.draft.empty(); });
  if (drafted > 0) drafting_slots_ = drafted;
  // Medians, so one step slowed by another process does not count against speculation; a call that drafted
  // nothing is not priced by length, so its own time counts, and so does a catch-up on a run of plain steps.
  const double catch_up_seconds = assumed_costs() ? proposer_cost_.catch_up_seconds(owed_total) : catch_up_seconds_;
  const double call_seconds = longest_draft_ > 0   ? proposer_cost_.seconds(static_cast<int>(longest_draft_))
                              : assumed_costs() ? catch_up_seconds
                                                : propose_seconds_ + catch_up_seconds_;
  const double round_steps = (cost_.seconds(n_slots, batch_.size()) + call_seconds) / plain_seconds;
  // In the slot's plain steps (its share of a step of all the slots): what the round cost beyond a plain step
  // is shared by the slots that asked for a draft.
  const double extra_steps = (round_steps - 1.0) * static_cast<double>(n_slots) / static_cast<double>(n_proposed);
  const double share_seconds = plain_seconds / static_cast<double>(n_slots);
  const double token_value = cost_.token_value(n_slots);
  for (const SlotRun& run : runs) {
    Slot& slot = slots_[run.slot];
    if (!run.proposed || !slot.policy) continue;
    const double catch_up_steps =
        resuming_ && owed_total > 0 && longest_draft_ > 0
            ? catch_up_seconds * static_cast<double>(run.owed_rows) / static_cast<double>(owed_total) / share_seconds
            : 0.0;
    slot.policy->settle(run.draft.empty() ? 1 : run.n_emitted, 1.0 + extra_steps + catch_up_steps, token_value);
  }
}

// What the request's policy decided and its rollbacks cost, for its timings.
void EngineImpl::fill_spec_stats(Slot& slot) {
  if (!slot.policy) return;
  SpecStats& stats = slot.timings.spec;
  const spec::PolicyDecisions& decisions = slot.policy->decisions();
  stats.plain_steps = decisions.plain_steps;
  stats.fallbacks = decisions.fallbacks;
  stats.budget_plain_steps = decisions.budget_plain;
  stats.budget_balance = slot.policy->budget().balance();
  stats.rounds_by_length = decisions.rounds_by_length;
  stats.final_acceptance_estimate = slot.policy->acceptance();
  const state::RollbackCounters& now = state_->counters(slot.index);
  stats.rollback_bytes_written = now.bytes_written - slot.counters_at_start.bytes_written;
  stats.rollback_bytes_copied = now.bytes_copied - slot.counters_at_start.bytes_copied;
}

}  // namespace rwd::runtime
