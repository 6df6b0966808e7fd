#include "server/connection_pool.h"

#include <chrono>
#include <thread>

namespace rwd::server {
namespace {

// A thread that served nobody for this long exits; a burst of connections leaves no crowd of threads behind.
constexpr std::chrono::seconds kIdleThreadLifetime{30};

thread_local bool tls_serving_overflow = false;

}  // namespace

ConnectionPool::ConnectionPool(size_t max_connections, size_t n_overflow_threads)
    : max_connections_(max_connections) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < n_overflow_threads; ++i) {
    ++n_threads_;
    std::thread([this] { refuse_overflow(); }).detach();
  }
}

ConnectionPool::~ConnectionPool() { shutdown(); }

bool ConnectionPool::serving_overflow() { return tls_serving_overflow; }

void ConnectionPool::enqueue(std::function<void()> connection) {
  std::lock_guard lock(mutex_);
  if (n_open_ >= max_connections_) {
    overflow_.push_back(std::move(connection));
    work_ready_.notify_all();
    return;
  }
  ++n_open_;
  waiting_.push_back(std::move(connection));
  if (n_idle_threads_ >= waiting_.size()) {  // an idle thread will take it
    work_ready_.notify_all();
    return;
  }
  ++n_threads_;
  std::thread([this] { serve_connections(); }).detach();
}

void ConnectionPool::serve_connections() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++n_idle_threads_;
    const bool has_work = work_ready_.wait_for(lock, kIdleThreadLifetime,
                                               [this] { return !waiting_.empty() || stopping_; });
    --n_idle_threads_;
    if (!has_work || waiting_.empty()) break;  // idle too long, or stopping with nothing left to serve
    std::function<void()> connection = std::move(waiting_.front());
    waiting_.pop_front();
    lock.unlock();
    connection();
    connection = nullptr;  // its captures go before the place is given back
    lock.lock();
    --n_open_;
  }
  --n_threads_;
  threads_done_.notify_all();  // under the lock: shutdown() cannot return, and the pool die, before this ends
}

void ConnectionPool::refuse_overflow() {
  tls_serving_overflow = true;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return !overflow_.empty() || stopping_; });
    if (overflow_.empty()) break;
    std::function<void()> connection = std::move(overflow_.front());
    overflow_.pop_front();
    lock.unlock();
    connection();
    connection = nullptr;
    lock.lock();
  }
  --n_threads_;
  threads_done_.notify_all();
}

void ConnectionPool::shutdown() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  work_ready_.notify_all();
  threads_done_.wait(lock, [this] { return n_threads_ == 0; });
}

}  // namespace rwd::server
