#include "server/metrics.h"

#include <prometheus/text_serializer.h>

namespace rwd::server {
namespace {

prometheus::Counter* counter(prometheus::Registry& registry, const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge* gauge(prometheus::Registry& registry, const char* name, const char* help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Histogram* histogram(prometheus::Registry& registry, const char* name, const char* help,
                                 prometheus::Histogram::BucketBoundaries buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, std::move(buckets));
}

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::completed: return "completed";
    case Outcome::cancelled: return "cancelled";
    case Outcome::invalid: return "invalid";
    case Outcome::rejected: return "rejected";
    case Outcome::unauthorized: return "unauthorized";
    case Outcome::failed: return "failed";
  }
  return "failed";
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("rewind_requests_total")
                   .Help("Completion requests by outcome: completed, cancelled (client gone), invalid (4xx), "
                         "rejected (queue full), unauthorized, failed (server error)")
                   .Register(r);
  for (Outcome outcome : {Outcome::completed, Outcome::cancelled, Outcome::invalid, Outcome::rejected,
                          Outcome::unauthorized, Outcome::failed}) {
    requests_->Add({{"outcome", outcome_name(outcome)}});
  }
  prompt_tokens_ = counter(r, "rewind_prompt_tokens_total", "Prompt tokens of requests that produced output");
  prompt_tokens_cached_ = counter(r, "rewind_prompt_tokens_cached_total",
                                  "Of those prompt tokens, the ones taken from a slot's state or a checkpoint "
                                  "instead of being computed");
  generated_tokens_ = counter(r, "rewind_generated_tokens_total", "Tokens generated and returned to clients");
  time_to_first_token_ = histogram(r, "rewind_time_to_first_token_seconds",
                                   "Seconds from a request's arrival to its first generated token (queueing included)",
                                   {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  time_per_output_token_ = histogram(r, "rewind_time_per_output_token_seconds",
                                     "Mean seconds between a request's generated tokens",
                                     {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1});
  request_seconds_ = histogram(r, "rewind_request_duration_seconds", "Seconds from a request's arrival to its end",
                               {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300});
  spec_rounds_ = counter(r, "rewind_spec_rounds_total", "Verify forwards that checked at least one drafted token");
  spec_drafted_ = counter(r, "rewind_spec_drafted_tokens_total", "Tokens drafted by the proposer");
  spec_accepted_ = counter(r, "rewind_spec_accepted_tokens_total", "Drafted tokens the target accepted");
  spec_tree_rounds_ = counter(r, "rewind_spec_tree_rounds_total", "Verify forwards whose draft was a tree (branched)");
  spec_tree_nodes_ = counter(r, "rewind_spec_tree_nodes_total",
                             "Drafted tokens verified in tree rounds (accepted tokens per round: accepted / rounds)");
  spec_rollbacks_ = counter(r, "rewind_spec_rollbacks_total", "Verify rounds that rejected part of the draft");
  spec_fallbacks_ = counter(r, "rewind_spec_fallbacks_total",
                            "Times the draft-length policy switched speculation off for a slot because it lost");
  spec_plain_steps_ = counter(r, "rewind_spec_plain_steps_total",
                              "Decode steps of speculating requests taken without a draft by the policy's choice");
  rollback_bytes_ = counter(r, "rewind_spec_rollback_bytes_total", "Recurrent-state bytes written by rollbacks");
  slots_total_ = gauge(r, "rewind_slots", "Slots (sequences decoded together)");
  slots_busy_ = gauge(r, "rewind_slots_busy", "Slots holding a request");
  slots_speculating_ = gauge(r, "rewind_slots_speculating", "Busy slots whose request speculates");
  slots_backed_off_ = gauge(r, "rewind_slots_spec_backed_off",
                            "Speculating slots where the policy has switched drafting off for now");
  queue_length_ = gauge(r, "rewind_queue_length", "Requests waiting for a slot");
  checkpoints_ = gauge(r, "rewind_prompt_checkpoints", "Recurrent-state checkpoints of prompts kept for reuse");
  checkpoint_bytes_ = gauge(r, "rewind_prompt_checkpoint_bytes", "Host memory of those checkpoints (--cache-ram)");
  in_flight_ = gauge(r, "rewind_requests_in_flight", "Requests admitted and not yet answered");
  model_loaded_ = gauge(r, "rewind_model_loaded", "1 once the model is loaded and the server answers requests");
  state_bytes_ = &prometheus::BuildGauge()
                      .Name("rewind_state_bytes")
                      .Help("Memory of the slots' state by kind (KV, convolution windows, recurrent states, "
                            "rollback records, snapshots, checkpoint copies, scratch, rewind, draft model)")
                      .Register(r);
}

void Metrics::count(Outcome outcome) { requests_->Add({{"outcome", outcome_name(outcome)}}).Increment(); }

void Metrics::finished(const GenerationUpdate& final, int64_t n_prompt_tokens) {
  prompt_tokens_->Increment(static_cast<double>(n_prompt_tokens));
  prompt_tokens_cached_->Increment(static_cast<double>(final.timings.n_cached_tokens));
  generated_tokens_->Increment(static_cast<double>(final.n_generated));
  if (final.n_generated > 0) time_to_first_token_->Observe(final.time_to_first_token);
  if (final.n_generated > 1) time_per_output_token_->Observe(final.time_per_output_token);
  const SpecStats& spec = final.timings.spec;
  spec_rounds_->Increment(static_cast<double>(spec.rounds));
  spec_drafted_->Increment(static_cast<double>(spec.drafted));
  spec_accepted_->Increment(static_cast<double>(spec.accepted));
  spec_tree_rounds_->Increment(static_cast<double>(spec.tree_rounds));
  spec_tree_nodes_->Increment(static_cast<double>(spec.tree_nodes));
  spec_rollbacks_->Increment(static_cast<double>(spec.rollbacks));
  spec_fallbacks_->Increment(static_cast<double>(spec.fallbacks));
  spec_plain_steps_->Increment(static_cast<double>(spec.plain_steps));
  rollback_bytes_->Increment(static_cast<double>(spec.rollback_bytes_written));
}

void Metrics::observe_duration(double seconds) { request_seconds_->Observe(seconds); }

std::string Metrics::render(const EngineSnapshot* snapshot, int64_t in_flight) {
  in_flight_->Set(static_cast<double>(in_flight));
  model_loaded_->Set(snapshot ? 1.0 : 0.0);
  if (snapshot) {
    int busy = 0, speculating = 0, backed_off = 0;
    for (const SlotStatus& slot : snapshot->status.slots) {
      busy += slot.busy;
      speculating += slot.busy && slot.speculating;
      backed_off += slot.busy && slot.backed_off;
    }
    slots_total_->Set(static_cast<double>(snapshot->status.slots.size()));
    slots_busy_->Set(busy);
    slots_speculating_->Set(speculating);
    slots_backed_off_->Set(backed_off);
    queue_length_->Set(static_cast<double>(snapshot->status.n_queued));
    checkpoints_->Set(static_cast<double>(snapshot->status.n_checkpoints));
    checkpoint_bytes_->Set(static_cast<double>(snapshot->status.checkpoint_bytes));
    const StateReport& state = snapshot->state;
    const std::pair<const char*, size_t> kinds[] = {
        {"kv", state.kv},         {"conv", state.conv},
        {"recurrent", state.recurrent}, {"records", state.records},
        {"snapshots", state.snapshots}, {"checkpoint_copies", state.checkpoint_copies},
        {"scratch", state.scratch}, {"rewind", state.rewind},
        {"draft_model", state.draft_model}};
    for (const auto& [kind, bytes] : kinds) state_bytes_->Add({{"kind", kind}}).Set(static_cast<double>(bytes));
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

}  // namespace rwd::server
