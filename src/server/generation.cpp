#include "server/generation.h"

#include <algorithm>

namespace rwd::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& stop) { return stop.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  // Text already sent cannot hold the start of a match: push() keeps back every suffix that begins a stop.
  size_t first_match = std::string::npos;
  for (const std::string& stop : stops_) first_match = std::min(first_match, held_.find(stop));
  if (first_match != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first_match);
    held_.clear();
    return out;
  }
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

Generation::Generation(std::vector<std::string> stops, bool keep_tokens)
    : stop_(std::move(stops)), keep_tokens_(keep_tokens) {}

void Generation::accepted(int64_t request_id) {
  std::lock_guard lock(mutex_);
  phase_ = Phase::accepted;
  request_id_ = request_id;
  changed_.notify_all();
}

void Generation::rejected(Status status) {
  std::lock_guard lock(mutex_);
  phase_ = Phase::rejected;
  rejection_ = std::move(status);
  finished_ = true;
  changed_.notify_all();
}

bool Generation::on_token(const TokenEvent& event, std::string piece) {
  std::lock_guard lock(mutex_);
  if (finished_ || stop_.stopped()) return false;
  const Clock::time_point now = Clock::now();
  if (n_counted_ == 0) first_token_ = now;
  last_token_ = now;
  ++n_counted_;
  if (keep_tokens_) pending_.tokens.push_back({event.token, std::move(piece), event.logprob, event.top});
  pending_.text += stop_.push(event.text);
  changed_.notify_all();
  return stop_.stopped();
}

void Generation::on_done(const TokenEvent& event, const RequestTimings& timings) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  if (!stop_.stopped()) pending_.text += stop_.push(event.text);
  std::string reason;
  if (stop_.stopped()) {
    reason = "stop";
    pending_.stopped_by_string = true;
  } else {
    pending_.text += stop_.flush();
    switch (event.finish_reason) {
      case FinishReason::eos: reason = "stop"; break;
      case FinishReason::length: reason = "length"; break;
      case FinishReason::cancelled: reason = "cancelled"; break;
      case FinishReason::error:
      case FinishReason::none: reason = "error"; break;
    }
    if (reason == "error") pending_.error = event.error.empty() ? "the engine ended the request" : event.error;
  }
  finish_locked(reason, timings);
}

void Generation::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  if (phase_ == Phase::waiting) {
    phase_ = Phase::rejected;
    rejection_ = Status::error(message);
    finished_ = true;
    changed_.notify_all();
    return;
  }
  pending_.error = message;
  finish_locked("error", RequestTimings{});
}

void Generation::finish_locked(const std::string& reason, const RequestTimings& timings) {
  finished_ = true;
  pending_.done = true;
  pending_.finish_reason = reason;
  pending_.n_generated = n_counted_;
  pending_.timings = timings;
  pending_.timings.n_generated_tokens = n_counted_;
  if (n_counted_ > 0) {
    pending_.time_to_first_token = std::chrono::duration<double>(first_token_ - created_).count();
  }
  if (n_counted_ > 1) {
    pending_.time_per_output_token =
        std::chrono::duration<double>(last_token_ - first_token_).count() / static_cast<double>(n_counted_ - 1);
  }
  changed_.notify_all();
}

Status Generation::wait_accepted() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return phase_ != Phase::waiting; });
  return phase_ == Phase::rejected ? rejection_ : Status::ok();
}

bool Generation::take(GenerationUpdate& update, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto ready = [&] { return pending_.done || !pending_.text.empty() || !pending_.tokens.empty(); };
  if (!changed_.wait_for(lock, timeout, ready)) return false;
  update = std::move(pending_);
  pending_ = GenerationUpdate{};
  return true;
}

int64_t Generation::request_id() const {
  std::lock_guard lock(mutex_);
  return request_id_;
}

bool Generation::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

}  // namespace rwd::server
