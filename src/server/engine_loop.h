// EngineLoop: the one thread that owns the Engine. It loads the model, then steps the engine while any slot
// is busy; HTTP threads hand it submissions and cancellations through an inbox and read a snapshot of its
// status, so no HTTP thread ever touches the engine's mutable state (the Engine is not thread-safe; its
// const tokenizer calls are).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "rewind/engine.h"
#include "server/generation.h"

namespace rwd::server {

struct EngineSnapshot {
  EngineStatus status;
  StateReport state;
};

class EngineLoop {
 public:
  explicit EngineLoop(EngineOptions options);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void start();
  // Finishes every open request with an error and joins the thread.
  void stop();

  enum class Phase { loading, ready, failed };
  Phase phase() const { return phase_.load(); }
  double load_progress() const { return load_progress_.load(); }
  // Why loading or a step failed (phase() == failed).
  std::string failure() const;
  // Valid once phase() is ready: the engine for its thread-safe const calls (tokenize, tokenize_chat,
  // format_chat, info).
  const Engine& engine() const { return *engine_; }

  // The request's output goes to `generation`, which hears whether the engine accepted it.
  void submit(Request request, std::shared_ptr<Generation> generation, bool want_pieces);
  void cancel(std::shared_ptr<Generation> generation);
  EngineSnapshot snapshot() const;
  // False once the loop stops or fails: submissions are refused from then on.
  bool accepting() const;

 private:
  struct Command {
    std::shared_ptr<Generation> generation;
    Request request;
    bool cancel = false;
    bool want_pieces = false;
  };
  void run();
  void handle(Command& command);
  void fail_all(const std::string& message);
  void publish();

  EngineOptions options_;
  std::unique_ptr<Engine> engine_;
  std::atomic<Phase> phase_{Phase::loading};
  std::atomic<double> load_progress_{0.0};
  std::thread thread_;

  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_changed_;
  std::deque<Command> inbox_;
  bool stopping_ = false;
  std::string failure_;

  std::map<int64_t, std::shared_ptr<Generation>> active_;  // engine thread only

  mutable std::mutex snapshot_mutex_;
  EngineSnapshot snapshot_;
};

}  // namespace rwd::server
