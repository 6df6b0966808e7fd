// ThreadPool (thread_pool.h): fork-join with claimable shares. Every run bumps a generation and posts one share
// per worker; a worker claims its share with a compare-and-swap before running it, and the caller, once its own
// share is done, claims every share still posted and runs it itself. Exactly one thread wins each share, so
// every index runs once. Waiting is adaptive: spin with pause, then yield the core to whoever else wants it,
// then sleep on a futex that the other side wakes only when someone sleeps.
#include "base/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rwd {
namespace {

// Phases of a share, in the low 2 bits of its state; the generation of the run is in the bits above.
constexpr uint32_t kPosted = 0;
constexpr uint32_t kRunning = 1;
constexpr uint32_t kDone = 2;
constexpr uint32_t kTakenByCaller = 3;

constexpr uint32_t share_state(uint32_t generation, uint32_t phase) { return generation << 2 | phase; }

// About 30 µs of pause: bridges the gap between two operations of a token step without a wake-up.
constexpr int kSpinIterations = 1 << 12;
// Then yield this many times: on an oversubscribed core this hands the time slice to the other process
// instead of burning it, and on an idle one it costs little more than spinning.
constexpr int kYieldIterations = 16;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waits until done() with the spin, yield, sleep escalation; sleep(…) blocks until woken or spurious return.
template <typename Done, typename Sleep>
void wait_adaptively(Done done, Sleep sleep) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return;
    cpu_relax();
  }
  for (int i = 0; i < kYieldIterations; ++i) {
    if (done()) return;
    std::this_thread::yield();
  }
  while (!done()) sleep();
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(n_threads_));
  // Shares start as done in generation 0 so that no worker finds one to claim before the first run.
  for (int ith = 0; ith < n_threads_; ++ith) shares_[ith].state.store(share_state(0, kDone), std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int ith = 1; ith < n_threads_; ++ith) workers_.emplace_back([this, ith] { worker_loop(ith); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
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
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  // Release: a worker that claims its share (acquire) sees task_ and context_.
  for (int ith = 1; ith < n_threads_; ++ith) {
    shares_[ith].state.store(share_state(generation, kPosted), std::memory_order_release);
  }
  generation_.store(generation, std::memory_order_seq_cst);
  if (n_sleeping_workers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

  task(context, 0, n_threads_);
  for (int ith = 1; ith < n_threads_; ++ith) {
    uint32_t expected = share_state(generation, kPosted);
    if (shares_[ith].state.compare_exchange_strong(expected, share_state(generation, kTakenByCaller),
                                                   std::memory_order_acq_rel)) {
      task(context, ith, n_threads_);
    }
  }
  for (int ith = 1; ith < n_threads_; ++ith) wait_for_share(shares_[ith], share_state(generation, kRunning));
}

void ThreadPool::wait_for_share(Share& share, uint32_t running) {
  // Acquire: the worker's writes in its share happen before run() returns.
  wait_adaptively([&] { return share.state.load(std::memory_order_acquire) != running; },
                  [&] {
                    caller_sleeping_.store(true, std::memory_order_seq_cst);
                    share.state.wait(running, std::memory_order_seq_cst);
                    caller_sleeping_.store(false, std::memory_order_relaxed);
                  });
}

uint32_t ThreadPool::wait_for_next_run(uint32_t seen) {
  uint32_t now = seen;
  wait_adaptively(
      [&] {
        now = generation_.load(std::memory_order_acquire);
        return now != seen;
      },
      [&] {
        n_sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_seq_cst);
        n_sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
      });
  return now;
}

void ThreadPool::worker_loop(int ith) {
  // The generation at construction, not a fresh load: the first run() may bump it before this thread starts,
  // and a worker that took the bumped value as "seen" would sleep through that run.
  uint32_t seen = 0;
  Share& share = shares_[ith];
  while (true) {
    seen = wait_for_next_run(seen);
    if (stopping_.load(std::memory_order_acquire)) return;
    uint32_t expected = share_state(seen, kPosted);
    if (!share.state.compare_exchange_strong(expected, share_state(seen, kRunning), std::memory_order_acq_rel)) {
      continue;  // the caller took this share (or a later run is posted: the next wait returns at once)
    }
    task_(context_, ith, n_threads_);
    share.state.store(share_state(seen, kDone), std::memory_order_seq_cst);
    if (caller_sleeping_.load(std::memory_order_seq_cst)) share.state.notify_all();
  }
}

}  // namespace rwd
