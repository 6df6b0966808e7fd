// How a request starts in a slot: which state it keeps (the slot's own, extended, truncated or rewound, or a
// checkpoint and archived KV rows from the prompt cache), which idle slot it takes, and the checkpoints and
// archives the prompt cache keeps as prompts are read and sequences displaced. The step and emission live in
// engine_impl.cpp.
#include <algorithm>
#include <chrono>

#include "runtime/engine_impl.h"

namespace rwd::runtime {

EngineImpl::ReusePlan EngineImpl::plan_reuse(const Slot& slot, const Request& request,
                                            const PromptCache::Matches& cached) const {
  if (!request.cache_prompt) return {};
  const std::vector<int32_t>& prompt = request.prompt_ids;
  int64_t n_common = 0;
  ReusePlan own;
  if (slot.holds_state && state_->state_kept(slot.index)) {
    const int64_t held = std::min<int64_t>(slot.n_computed, prompt.size());
    n_common = std::mismatch(prompt.begin(), prompt.begin() + held, slot.tokens.begin()).first - prompt.begin();
    // The prompt's last token is always computed: its logits give the first output token.
    const int64_t limit = std::min<int64_t>(n_common, static_cast<int64_t>(prompt.size()) - 1);
    if (!state_->has_recurrent_layers()) {
      own = {ReusePlan::Kind::truncate, limit};
    } else if (slot.n_computed <= limit) {
      own = {ReusePlan::Kind::extend, slot.n_computed};
    } else if (slot.n_computed - limit <= state_->rewindable(slot.index)) {
      own = {ReusePlan::Kind::rewind, limit};
    }
  }
  const ReusePlan restored = plan_restore(prompt, n_common, cached);
  return restored.n_kept > own.n_kept ? restored : own;
}

EngineImpl::ReusePlan EngineImpl::plan_restore(std::span<const int32_t> prompt, int64_t n_common,
                                               const PromptCache::Matches& cached) const {
  if (!prompt_cache_ || prompt.size() < 2) return {};
  const auto limit = static_cast<int64_t>(prompt.size()) - 1;
  // Without attention layers any checkpoint will do: there are no KV rows to pair it with.
  const bool has_kv = state_->kv().n_layers() > 0;
  const int64_t kv_reach = has_kv ? std::min(limit, std::max(n_common, cached.n_archived)) : limit;
  ReusePlan plan{ReusePlan::Kind::restore, kv_reach};
  if (state_->has_recurrent_layers()) {
    plan.checkpoint = cached.state_within(kv_reach);
    if (plan.checkpoint == nullptr) return {};
    plan.n_kept = static_cast<int64_t>(plan.checkpoint->tokens.size());
  }
  plan.foreign = plan.n_kept > n_common;
  if (plan.foreign && has_kv) plan.kv_source = cached.archive;
  return plan.n_kept > 0 ? plan : ReusePlan{};
}

// Requests take slots in arrival order; each goes to the idle slot whose state saves it the most tokens,
// preferring a slot that holds them itself over copying an archive in, and when none saves any, to the one used
// longest ago (the others keep their conversations for longer).
void EngineImpl::assign_pending() {
  while (!pending_.empty()) {
    const Request& request = pending_.front().request;
    // Matched once per request: prefix comparisons against every entry are the costly part of planning.
    const PromptCache::Matches cached =
        prompt_cache_ && request.cache_prompt ? prompt_cache_->match(request.prompt_ids) : PromptCache::Matches{};
    Slot* best = nullptr;
    ReusePlan best_plan;
    for (Slot& slot : slots_) {
      if (slot.busy) continue;
      const ReusePlan plan = plan_reuse(slot, request, cached);
      const bool own = !plan.foreign;
      const bool best_own = !best_plan.foreign;
      const bool better = best == nullptr || plan.n_kept > best_plan.n_kept ||
                          (plan.n_kept == best_plan.n_kept && own && !best_own) ||
                          (plan.n_kept == best_plan.n_kept && own == best_own && slot.last_used < best->last_used);
      if (better) {
        best = &slot;
        best_plan = plan;
      }
    }
    if (best == nullptr) return;
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    start_request(*best, std::move(next), best_plan);
  }
}

PromptCache::Entry EngineImpl::cache_entry(Slot& slot, bool with_kv) {
  PromptCache::Entry entry;
  entry.tokens.assign(slot.tokens.begin(), slot.tokens.begin() + slot.n_computed);
  if (state_->has_recurrent_layers()) {
    entry.state.resize(static_cast<size_t>(state_->recurrent().slot_floats()));
    state_->save_recurrent(slot.index, entry.state.data());
  }
  if (with_kv) {
    entry.kv.resize(state_->kv().prefix_bytes(slot.n_computed));
    state_->kv().save_prefix(slot.index, slot.n_computed, entry.kv.data());
  }
  return entry;
}

void EngineImpl::start_request(Slot& slot, Pending next, const ReusePlan& plan) {
  // A sequence the new request cuts short is archived first (a rewind drops only the few tokens its ring
  // holds: the same conversation, worth no copy). It is stored after the restore, which may read the cache.
  std::optional<PromptCache::Entry> displaced;
  const int64_t n_own_kept = plan.foreign ? 0 : plan.n_kept;
  if (prompt_cache_ && slot.holds_state && state_->state_kept(slot.index) && n_own_kept < slot.n_computed &&
      plan.kind != ReusePlan::Kind::rewind) {
    displaced = cache_entry(slot, /*with_kv=*/true);
  }
  slot.busy = true;
  slot.cancelled = false;
  slot.last_used = ++n_assigned_;
  slot.request_id = next.id;
  slot.request = std::move(next.request);
  slot.on_token = std::move(next.on_token);
  slot.tokens = slot.request.prompt_ids;
  slot.n_prompt = static_cast<int64_t>(slot.tokens.size());
  slot.n_generated = 0;
  slot.holds_state = false;
  if (plan.kind == ReusePlan::Kind::rewind) {
    // Planned within rewindable(): a refusal is a broken invariant.
    const Status rewound = state_->rewind(slot.index, slot.n_computed - plan.n_kept);
    REWIND_CHECK(rewound.is_ok(), "slot {}: {}", slot.index, rewound.message());
  } else if (plan.kind == ReusePlan::Kind::restore) {
    if (plan.kv_source != nullptr) {
      const auto n_saved = static_cast<int64_t>(plan.kv_source->tokens.size());
      state_->kv().restore_prefix(slot.index, plan.kv_source->kv.data(), n_saved, plan.n_kept);
      prompt_cache_->touch(plan.kv_source);
    }
    if (plan.checkpoint != nullptr) {
      state_->restore_recurrent(slot.index, plan.checkpoint->state.data());
      prompt_cache_->touch(plan.checkpoint);
    } else {
      state_->reset_slot(slot.index);
    }
  }
  if (plan.kind == ReusePlan::Kind::fresh) state_->reset_slot(slot.index);
  if (displaced) prompt_cache_->store(std::move(*displaced));
  slot.n_computed = plan.n_kept;
  slot.checkpointed_at = plan.n_kept;
  // Validated in submit(), so creation cannot fail here.
  slot.sampler.emplace(std::move(sampling::Sampler::create(to_sampling_params(slot.request.sampling)).value()));
  for (int32_t token : slot.tokens) slot.sampler->accept(token);
  slot.decoder.emplace(*tokenizer_);
  slot.timings = RequestTimings{};
  slot.timings.n_prompt_tokens = slot.n_prompt;
  slot.timings.n_cached_tokens = plan.n_kept;
  slot.start_time = std::chrono::steady_clock::now();
  slot.counters_at_start = state_->counters(slot.index);
  slot.policy.reset();
  slot.proposed_through = slot.n_prompt;  // the proposer follows the prompt as the target reads it
  if (proposer_) {
    proposer_->start_sequence(slot.index, plan.n_kept, /*kept_from_slot=*/!plan.foreign);
    const RequestSpec& wanted = slot.request.spec;
    if (wanted.mode != "none") {
      const int draft_max = wanted.draft_max > 0 ? wanted.draft_max : options_.spec.draft_max;
      slot.policy.emplace(std::min(options_.spec.draft_min, draft_max), draft_max, options_.spec.adaptive);
    }
  }
}

void EngineImpl::maybe_save_checkpoint(Slot& slot) {
  if (!prompt_cache_ || !state_->has_recurrent_layers() || slot.n_computed <= slot.checkpointed_at) return;
  const bool prompt_end = slot.n_computed == slot.n_prompt;
  const int64_t every = options_.checkpoint_every;
  const bool interval = every > 0 && slot.n_computed / every > slot.checkpointed_at / every;
  if (!prompt_end && !interval) return;
  prompt_cache_->store(cache_entry(slot, /*with_kv=*/false));
  slot.checkpointed_at = slot.n_computed;
}

}  // namespace rwd::runtime
