// links: rewind_base
// ThreadPool: every index runs exactly once per run whichever thread runs it (workers or the caller taking a
// late worker's share), plain writes made in a task are visible after run() returns, parallel_for covers its
// range exactly, and the pool survives immediate use after construction, idle periods long enough for the
// workers to fall asleep, more threads than cores, and destruction at any of those points.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace rwd {
namespace {

// Long enough for the workers to go from spinning through yielding to sleeping on the futex.
constexpr auto kIdle = std::chrono::milliseconds(30);

// Runs the pool once and checks that each index ran exactly once, with nth = n_threads.
void expect_each_index_once(ThreadPool& pool) {
  const int n = pool.n_threads();
  std::vector<int> runs(static_cast<size_t>(n), 0);  // plain ints: each index writes only its own
  std::atomic<int> wrong_nth{0};
  pool.run([&](int ith, int nth) {
    if (nth != n) wrong_nth.fetch_add(1);
    runs[static_cast<size_t>(ith)] += 1;
  });
  EXPECT_EQ(wrong_nth.load(), 0);
  for (int ith = 0; ith < n; ++ith) EXPECT_EQ(runs[static_cast<size_t>(ith)], 1) << "index " << ith << " of " << n;
}

TEST(ThreadPool, EveryIndexRunsOncePerRun) {
  for (int n_threads = 1; n_threads <= 8; ++n_threads) {
    SCOPED_TRACE(n_threads);
    ThreadPool pool(n_threads);
    ASSERT_EQ(pool.n_threads(), n_threads);
    for (int rep = 0; rep < 2000; ++rep) expect_each_index_once(pool);
  }
}

TEST(ThreadPool, RunImmediatelyAfterConstruction) {
  for (int rep = 0; rep < 200; ++rep) {
    ThreadPool pool(1 + rep % 8);
    expect_each_index_once(pool);
  }
}

TEST(ThreadPool, RunsAfterWorkersFallAsleep) {
  for (int n_threads : {2, 3, 8}) {
    ThreadPool pool(n_threads);
    for (int rep = 0; rep < 4; ++rep) {
      std::this_thread::sleep_for(kIdle);
      expect_each_index_once(pool);
      expect_each_index_once(pool);
    }
  }
}

// A caller slower than its workers: they claim their own shares and the caller waits for them.
TEST(ThreadPool, SlowCallerWaitsForWorkers) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<int> runs(4, 0);
    pool.run([&](int ith, int) {
      if (ith == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      runs[static_cast<size_t>(ith)] += 1;
    });
    for (int ith = 0; ith < 4; ++ith) EXPECT_EQ(runs[static_cast<size_t>(ith)], 1);
  }
}

// Slow worker shares, whoever runs them: run() returns only after all are done, and their writes are visible.
TEST(ThreadPool, WaitsForSlowSharesAndSeesTheirWrites) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::vector<int64_t> values(3, -1);
    pool.run([&](int ith, int) {
      if (ith != 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
      values[static_cast<size_t>(ith)] = 1000 * rep + ith;
    });
    for (int ith = 0; ith < 3; ++ith) EXPECT_EQ(values[static_cast<size_t>(ith)], 1000 * rep + ith);
  }
}

// More threads than cores: late workers' shares are taken by the caller; every index still runs once.
TEST(ThreadPool, OversubscribedPoolRunsEveryIndexOnce) {
  const int n_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(std::min(n_threads, 64));
  for (int rep = 0; rep < 500; ++rep) expect_each_index_once(pool);
}

TEST(ThreadPool, ParallelForCoversRangeExactly) {
  for (int n_threads = 1; n_threads <= 8; ++n_threads) {
    ThreadPool pool(n_threads);
    for (int64_t n : {0, 1, 2, 7, 8, 9, 1000, 4099}) {
      SCOPED_TRACE(testing::Message() << n_threads << " threads, n = " << n);
      std::vector<int> hits(static_cast<size_t>(n), 0);
      std::atomic<int> bad_ranges{0};
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        if (!(0 <= begin && begin < end && end <= n)) bad_ranges.fetch_add(1);
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)] += 1;
      });
      EXPECT_EQ(bad_ranges.load(), 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "element " << i;
    }
  }
}

// The split of parallel_for depends on n and the thread count only: range i is [n i / nth, n (i + 1) / nth).
TEST(ThreadPool, ParallelForSplitIsFixed) {
  for (int n_threads : {2, 3, 7}) {
    ThreadPool pool(n_threads);
    constexpr int64_t kN = 100;
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int64_t>> end_of(kN + 1);
      for (auto& e : end_of) e.store(-1);
      pool.parallel_for(kN, [&](int64_t begin, int64_t end) { end_of[static_cast<size_t>(begin)].store(end); });
      for (int ith = 0; ith < n_threads; ++ith) {
        const int64_t begin = kN * ith / n_threads, end = kN * (ith + 1) / n_threads;
        EXPECT_EQ(end_of[static_cast<size_t>(begin)].load(), end) << "range " << ith << " of " << n_threads;
      }
    }
  }
}

TEST(ThreadPool, DestructionWhileIdle) {
  for (int n_threads : {1, 2, 5}) {
    { ThreadPool never_used(n_threads); }
    {
      ThreadPool used_once(n_threads);
      expect_each_index_once(used_once);
    }
    {
      ThreadPool asleep(n_threads);
      expect_each_index_once(asleep);
      std::this_thread::sleep_for(kIdle);
    }
  }
}

}  // namespace
}  // namespace rwd
