#include "core/threads.h"

#include <atomic>
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

}  // namespace
}  // namespace ember
