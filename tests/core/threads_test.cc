#include "core/threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(ParallelForTest, ChunksCoverTheRangeExactlyOnce) {
  std::vector<std::atomic<int>> hits(10007);
  ParallelFor(0, 10007, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(1, hits[i].load()) << i;
}

TEST(ParallelForTest, EmptyRangeCallsNothing) {
  bool called = false;
  ParallelFor(5, 5, 1, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadArenaTest, NeverUsesMoreThreadsThanItsBudget) {
  ThreadArena arena(2);
  EXPECT_EQ(2, arena.threads());
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> active{0}, peak{0};
  arena.Execute([&] {
    ParallelFor(0, 2000, 1, [&](int64_t, int64_t) {
      const int now = active.fetch_add(1) + 1;
      int seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      volatile double sink = 0;
      for (int i = 0; i < 2000; ++i) sink = sink + i;
      active.fetch_sub(1);
    });
  });
  EXPECT_LE(peak.load(), 2);
  EXPECT_LE(ids.size(), 2u);
}

// Each function runs on the one background thread, after the one started
// before it has returned, with the thread's priority lowered and inside an
// arena of the given size; Wait returns only after it has returned, and the
// destructor waits for the one running.
TEST(BackgroundThreadTest, RunsEachFunctionInTurnOnItsOwnLowPriorityThread) {
  const int caller_nice = ThisThreadsNiceValue();
  std::vector<int> order;
  std::set<std::thread::id> ids;
  int nice = -100, arena_threads = -1;
  {
    BackgroundThread background(1, 5);
    background.Wait();  // Nothing started: returns at once.
    std::atomic<bool> release{false};
    std::atomic<bool> running{false};
    background.Start([&] {
      running = true;
      while (!release.load()) std::this_thread::yield();
      order.push_back(1);
      ids.insert(std::this_thread::get_id());
      nice = ThisThreadsNiceValue();
      arena_threads = CurrentArenaThreads();
    });
    while (!running.load()) std::this_thread::yield();
    EXPECT_TRUE(order.empty());  // Start did not wait for it.
    release = true;
    background.Wait();
    ASSERT_EQ(std::vector<int>{1}, order);
    for (int i = 2; i <= 4; ++i) {
      background.Start([&order, &ids, i] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        order.push_back(i);
        ids.insert(std::this_thread::get_id());
      });
    }
    // The destructor waits for function 4.
  }
  EXPECT_EQ((std::vector<int>{1, 2, 3, 4}), order);
  ASSERT_EQ(1u, ids.size());
  EXPECT_NE(std::this_thread::get_id(), *ids.begin());
  // Lowered by 5, up to 19 (raising one's own nice value is always allowed).
  EXPECT_EQ(std::min(19, caller_nice + 5), nice);
  EXPECT_EQ(1, arena_threads);
}

// With only_idle_cores the thread is in SCHED_IDLE (the read-ahead's class);
// without, and in the caller, the class is left as it was.
TEST(BackgroundThreadTest, RunsOnlyOnIdleCoresWhenAskedTo) {
  ASSERT_FALSE(ThisThreadRunsOnlyOnIdleCores());
  for (const bool only_idle : {false, true}) {
    SCOPED_TRACE(only_idle ? "only idle cores" : "any core");
    bool idle_class = !only_idle;
    {
      BackgroundThread background(1, 19, only_idle);
      background.Start([&] { idle_class = ThisThreadRunsOnlyOnIdleCores(); });
    }
    EXPECT_EQ(only_idle, idle_class);
    EXPECT_FALSE(ThisThreadRunsOnlyOnIdleCores());
  }
}

}  // namespace
}  // namespace ember
