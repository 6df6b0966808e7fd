// One request's output on its way from the engine thread to the HTTP thread that answers it. The engine
// thread pushes token events; stop strings are matched there, so the engine cancels the request at once;
// the HTTP thread takes text in pieces that never end inside a possible stop string.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "rewind/engine.h"

namespace rwd::server {

// Finds the first of several stop strings in streamed text. push() returns the text that can be sent: text
// that can no longer be the start of a stop string. After a match, the text before it is returned and
// stopped() is true.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  std::string push(std::string_view text);
  // The text held back at the end of generation (it never completed a stop string).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

struct GeneratedToken {
  int32_t id = 0;
  std::string piece;  // the token's own bytes (may be part of a UTF-8 character)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// What the HTTP thread takes from a Generation at once: text and tokens since the last take, and at the end
// the finish reason and timings.
struct GenerationUpdate {
  std::string text;
  std::vector<GeneratedToken> tokens;
  bool done = false;
  std::string finish_reason;  // done: "stop" (end of sequence or stop string), "length", "cancelled", "error"
  std::string error;          // finish_reason == "error": what went wrong
  bool stopped_by_string = false;  // finish_reason "stop" came from a stop string, not the end of sequence
  int64_t n_generated = 0;    // tokens counted for usage: up to and including the one that completed a stop string
  RequestTimings timings;
  double time_to_first_token = 0.0;  // seconds from creation to the first generated token (queueing included)
  double time_per_output_token = 0.0;  // mean seconds between generated tokens
};

class Generation {
 public:
  using Clock = std::chrono::steady_clock;
  Generation(std::vector<std::string> stops, bool keep_tokens);

  // Engine thread.
  void accepted(int64_t request_id);
  void rejected(Status status);
  // Returns true when the request should be cancelled in the engine (a stop string matched).
  bool on_token(const TokenEvent& event, std::string piece);
  void on_done(const TokenEvent& event, const RequestTimings& timings);
  void fail(const std::string& message);

  // HTTP thread. Waits until the engine took the request; the error when it refused it.
  Status wait_accepted();
  // Waits up to `timeout` for new output; false when there is none yet.
  bool take(GenerationUpdate& update, std::chrono::milliseconds timeout);
  int64_t request_id() const;
  bool finished() const;

 private:
  void finish_locked(const std::string& reason, const RequestTimings& timings);

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  enum class Phase { waiting, accepted, rejected } phase_ = Phase::waiting;
  Status rejection_;
  int64_t request_id_ = 0;
  StopMatcher stop_;
  bool keep_tokens_;
  GenerationUpdate pending_;
  bool finished_ = false;
  int64_t n_counted_ = 0;
  Clock::time_point created_ = Clock::now();
  Clock::time_point first_token_;
  Clock::time_point last_token_;
};

}  // namespace rwd::server
