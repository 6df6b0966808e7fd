// ThreadPool: persistent workers that run one task on every thread at once (fork-join), for the hundreds of
// small operations in a token step. Workers spin briefly between tasks and sleep on a futex when idle, so a
// step pays no thread creation and, while busy, no wake-up latency. It does not queue independent jobs.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace rwd {

class ThreadPool {
 public:
  // n_threads includes the calling thread; 0 means one per available core.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs task(thread_index, n_threads) on every thread, the caller being thread 0, and returns when all
  // have finished. Not reentrant: a task must not call run() on the same pool.
  template <typename Task>
  void run(Task&& task) {
    auto trampoline = [](void* context, int ith, int nth) { (*static_cast<Task*>(context))(ith, nth); };
    run_raw(trampoline, &task);
  }

  // Splits [0, n) into contiguous ranges, one per thread, and calls body(begin, end) for the non-empty ones.
  // The split depends only on n and n_threads, never on timing, so results are reproducible.
  template <typename Body>
  void parallel_for(int64_t n, Body&& body) {
    run([&](int ith, int nth) {
      const int64_t begin = n * ith / nth;
      const int64_t end = n * (ith + 1) / nth;
      if (begin < end) body(begin, end);
    });
  }

 private:
  using RawTask = void (*)(void* context, int ith, int nth);
  void run_raw(RawTask task, void* context);
  void worker_loop(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> n_pending_{0};
  std::atomic<bool> stopping_{false};
  RawTask task_ = nullptr;
  void* context_ = nullptr;
};

}  // namespace rwd
