// The threads that serve HTTP connections (cpp-httplib's TaskQueue): one thread per open connection, up to a
// cap, so that idle or slow clients (slowloris) hold only their own thread and never delay anyone else's answer.
// Connections beyond the cap go to a few overflow threads whose requests are answered 503 at once. Threads are
// reused, and one idle for a while exits. It does not read sockets itself: timeouts are cpp-httplib's.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace rwd::server {

class ConnectionPool final : public httplib::TaskQueue {
 public:
  // `max_connections`: connections served at once; `n_overflow_threads`: threads that refuse the rest.
  ConnectionPool(size_t max_connections, size_t n_overflow_threads);
  ~ConnectionPool() override;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  void enqueue(std::function<void()> connection) override;
  // Serves what was accepted (each connection sees the server stopped and closes), then ends every thread.
  void shutdown() override;

  // True on a thread serving a connection beyond the cap: its requests must be refused (503) and the
  // connection closed.
  static bool serving_overflow();

 private:
  void serve_connections();
  void refuse_overflow();

  const size_t max_connections_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable threads_done_;
  std::deque<std::function<void()>> waiting_;   // within the cap, not yet taken by a thread
  std::deque<std::function<void()>> overflow_;  // beyond the cap
  size_t n_open_ = 0;                           // connections within the cap, waiting or being served
  size_t n_idle_threads_ = 0;
  size_t n_threads_ = 0;  // connection and overflow threads alive; shutdown waits for zero
  bool stopping_ = false;
};

}  // namespace rwd::server
