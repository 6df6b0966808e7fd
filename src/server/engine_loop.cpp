#include "server/engine_loop.h"

#include "base/log.h"

namespace rwd::server {

EngineLoop::EngineLoop(EngineOptions options) : options_(std::move(options)) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start() {
  thread_ = std::thread([this] { run(); });
}

void EngineLoop::stop() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string EngineLoop::failure() const {
  std::lock_guard lock(inbox_mutex_);
  return failure_;
}

void EngineLoop::submit(Request request, std::shared_ptr<Generation> generation, bool want_pieces) {
  {
    std::lock_guard lock(inbox_mutex_);
    if (stopping_ || phase_.load() == Phase::failed) {
      generation->rejected(Status::error(failure_.empty() ? "the server is shutting down" : failure_));
      return;
    }
    inbox_.push_back({std::move(generation), std::move(request), false, want_pieces});
  }
  inbox_changed_.notify_all();
}

void EngineLoop::cancel(std::shared_ptr<Generation> generation) {
  {
    std::lock_guard lock(inbox_mutex_);
    if (stopping_) return;
    inbox_.push_back({std::move(generation), Request{}, true, false});
  }
  inbox_changed_.notify_all();
}

bool EngineLoop::accepting() const {
  std::lock_guard lock(inbox_mutex_);
  return !stopping_ && phase_.load() != Phase::failed;
}

EngineSnapshot EngineLoop::snapshot() const {
  std::lock_guard lock(snapshot_mutex_);
  return snapshot_;
}

void EngineLoop::publish() {
  EngineSnapshot fresh{engine_->status(), engine_->state_report()};
  std::lock_guard lock(snapshot_mutex_);
  snapshot_ = std::move(fresh);
}

void EngineLoop::handle(Command& command) {
  const std::shared_ptr<Generation>& generation = command.generation;
  if (command.cancel) {
    // Submitted before this command (the inbox keeps order), so the id is known unless it was refused.
    const int64_t id = generation->request_id();
    if (id > 0) engine_->cancel(id);
    return;
  }
  const bool want_pieces = command.want_pieces;
  auto on_token = [this, generation, want_pieces](const TokenEvent& event) {
    if (event.done) {
      generation->on_done(event, engine_->timings(event.request_id));
      active_.erase(event.request_id);
      return;
    }
    std::string piece = want_pieces ? engine_->detokenize({event.token}) : std::string();
    if (generation->on_token(event, std::move(piece))) engine_->cancel(event.request_id);
  };
  Result<int64_t> id = engine_->submit(std::move(command.request), std::move(on_token));
  if (!id) {
    generation->rejected(id.status());
    return;
  }
  active_[*id] = generation;
  generation->accepted(*id);
}

void EngineLoop::fail_all(const std::string& message) {
  for (auto& entry : active_) entry.second->fail(message);
  active_.clear();
}

void EngineLoop::run() {
  EngineOptions options = options_;
  options.on_load_progress = [this](double fraction) { load_progress_.store(fraction); };
  Result<std::unique_ptr<Engine>> opened = Engine::open(options);
  std::deque<Command> leftover;
  if (!opened) {
    log_error("cannot load the model: {}", opened.status().message());
    std::lock_guard lock(inbox_mutex_);
    failure_ = "cannot load the model: " + opened.status().message();
    phase_.store(Phase::failed);
    leftover.swap(inbox_);
  } else {
    engine_ = std::move(*opened);
    publish();
    phase_.store(Phase::ready);
    while (true) {
      std::deque<Command> commands;
      {
        std::unique_lock lock(inbox_mutex_);
        inbox_changed_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !engine_->idle(); });
        if (stopping_) break;
        commands.swap(inbox_);
      }
      for (Command& command : commands) handle(command);
      if (!engine_->idle()) {
        const Status status = engine_->step();
        if (!status) {
          log_error("engine step failed: {}", status.message());
          fail_all("internal error: " + status.message());
          std::lock_guard lock(inbox_mutex_);
          failure_ = "the engine failed and stopped: " + status.message();
          phase_.store(Phase::failed);
          break;
        }
      }
      publish();
    }
    fail_all("the server is shutting down");
    std::lock_guard lock(inbox_mutex_);
    leftover.swap(inbox_);
  }
  for (Command& command : leftover) {
    if (!command.cancel) command.generation->rejected(Status::error(failure_.empty() ? "the server is shutting down" : failure_));
  }
}

}  // namespace rwd::server
