#include "base/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rwd {
namespace {

// About 50 µs of spinning: long enough to bridge the gap between two ops of a token step, short enough not
// to burn a core when the pool goes idle between requests.
constexpr int kSpinIterations = 1 << 13;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(n_threads_ - 1);
  for (int ith = 1; ith < n_threads_; ++ith) workers_.emplace_back([this, ith] { worker_loop(ith); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run_raw(RawTask task, void* context) {
  if (n_threads_ == 1) {
    task(context, 0, 1);
    return;
  }
  task_ = task;
  context_ = context;
  n_pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  task(context, 0, n_threads_);
  int spins = 0;
  while (n_pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int ith) {
  // The generation at construction, not a fresh load: the first run() may bump it before this thread starts,
  // and a worker that took the bumped value as "seen" would sleep through that run.
  uint32_t seen = 0;
  while (true) {
    int spins = 0;
    uint32_t now = generation_.load(std::memory_order_acquire);
    while (now == seen) {
      if (++spins < kSpinIterations) {
        cpu_relax();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stopping_.load(std::memory_order_acquire)) return;
    task_(context_, ith, n_threads_);
    n_pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace rwd
