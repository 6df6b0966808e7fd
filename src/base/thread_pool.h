// ThreadPool: persistent workers that run one task on every thread index at once (fork-join), for the hundreds
// of small operations in a token step. Workers spin briefly between tasks, then yield, then sleep on a futex,
// so a busy step pays no wake-up latency and an idle pool burns no core. A worker that has not started its
// share by the time the caller has finished its own (asleep, or descheduled because another process holds the
// core) does not hold the run up: the caller takes that share and runs it itself. It does not queue jobs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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

  // Runs task(thread_index, n_threads) once for every index in [0, n_threads) and returns when all have
  // finished. Index 0 runs on the caller; any other index runs on its worker or, if that worker is late, on
  // the caller, so a task must depend on its index only, never on which OS thread runs it. Not reentrant: a
  // task must not call run() on the same pool.
  template <typename Task>
  void run(Task&& task) {
    auto trampoline = [](void* context, int ith, int nth) { (*static_cast<Task*>(context))(ith, nth); };
    run_raw(trampoline, &task);
  }

  // Splits [0, n) into contiguous ranges, one per thread index, and calls body(begin, end) for the non-empty
  // ones. The split depends only on n and n_threads, never on timing, so results are reproducible.
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

  // The share of one worker in the current run: (generation << 2) | phase.
  struct alignas(64) Share {
    std::atomic<uint32_t> state{0};
  };

  void run_raw(RawTask task, void* context);
  void worker_loop(int ith);
  // Waits until generation_ differs from seen and returns it.
  uint32_t wait_for_next_run(uint32_t seen);
  // Waits until the share's state is no longer `running`.
  void wait_for_share(Share& share, uint32_t running);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Share[]> shares_;  // index 1 .. n_threads - 1
  RawTask task_ = nullptr;
  void* context_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<int> n_sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace rwd
