// Server metrics in Prometheus' text format (prometheus-cpp's registry and serializer): request outcomes,
// tokens, latency histograms and speculation counters, updated as requests finish; slot, queue and state
// gauges read from the engine loop's latest snapshot at scrape time.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "server/engine_loop.h"
#include "server/generation.h"

namespace rwd::server {

enum class Outcome { completed, cancelled, invalid, rejected, unauthorized, failed };

class Metrics {
 public:
  Metrics();
  void count(Outcome outcome);
  // A request that produced output: tokens, latencies and what speculation did for it.
  void finished(const GenerationUpdate& final, int64_t n_prompt_tokens);
  void observe_duration(double seconds);
  // The exposition text; gauges from `snapshot` (absent while the model loads).
  std::string render(const EngineSnapshot* snapshot, int64_t in_flight);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* prompt_tokens_cached_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* time_to_first_token_;
  prometheus::Histogram* time_per_output_token_;
  prometheus::Histogram* request_seconds_;
  prometheus::Counter* spec_rounds_;
  prometheus::Counter* spec_drafted_;
  prometheus::Counter* spec_tree_rounds_;
  prometheus::Counter* spec_tree_nodes_;
  prometheus::Counter* spec_accepted_;
  prometheus::Counter* spec_rollbacks_;
  prometheus::Counter* spec_fallbacks_;
  prometheus::Counter* spec_plain_steps_;
  prometheus::Counter* rollback_bytes_;
  prometheus::Gauge* slots_total_;
  prometheus::Gauge* slots_busy_;
  prometheus::Gauge* slots_speculating_;
  prometheus::Gauge* slots_backed_off_;
  prometheus::Gauge* queue_length_;
  prometheus::Gauge* checkpoints_;
  prometheus::Gauge* checkpoint_bytes_;
  prometheus::Gauge* in_flight_;
  prometheus::Gauge* model_loaded_;
  prometheus::Family<prometheus::Gauge>* state_bytes_;
};

}  // namespace rwd::server
