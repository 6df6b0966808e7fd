// Slot: one sequence being decoded — its request, tokens, how many are already in the KV rows, its
// sampler and its stream decoder. The scheduler asks each slot for n_total - n_computed tokens. An idle slot
// keeps its tokens and state for the next request to reuse (holds_state).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "rewind/engine.h"
#include "state/model_state.h"
#include "sampling/sampler.h"
#include "spec/policy.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace rwd::runtime {

struct Slot {
  int index = 0;
  bool busy = false;
  int64_t request_id = 0;
  Request request;
  std::function<void(const TokenEvent&)> on_token;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int64_t n_prompt = 0;
  int64_t n_computed = 0;       // tokens whose KV rows are written
  // Idle: the state is that of tokens[0, n_computed) exactly (the last request finished normally), so a request
  // with the same prefix may start from it.
  bool holds_state = false;
  uint64_t last_used = 0;       // the engine's request counter when the slot last took a request
  int64_t checkpointed_at = 0;  // position of the last checkpoint taken of this request's prompt
  int64_t n_generated = 0;
  bool cancelled = false;
  std::optional<sampling::Sampler> sampler;
  std::optional<tokenizer::StreamDecoder> decoder;
  std::chrono::steady_clock::time_point start_time;
  std::chrono::steady_clock::time_point first_token_time;
  RequestTimings timings;
  std::optional<spec::DraftPolicy> policy;  // when the engine speculates
  int64_t proposed_through = 0;  // tokens the proposer had seen at its last call (catch-up owed past them)
  state::RollbackCounters counters_at_start;
};

}  // namespace rwd::runtime
