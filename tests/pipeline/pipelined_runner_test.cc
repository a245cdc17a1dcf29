#include "pipeline/pipelined_runner.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/threads.h"
#include "pipeline/sequential_runner.h"
#include "pipeline/staleness.h"

namespace ember::pipeline {
namespace {

using ::testing::HasSubstr;

struct Item {
  int64_t index = -1;
  int64_t value = 0;
};

// Three stages that transform an item; the result of item i is a function
// of i and of what earlier items left in `state` (a running sum), so order
// matters.
struct Chain {
  std::mutex mu;
  std::vector<std::string> seen;  // "<stage><index>" as the stages ran
  int64_t state = 0;
  std::vector<int64_t> results;

  std::vector<StageWork<Item>> Stages() {
    auto log = [this](const char* stage, const Item& it) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(stage + std::to_string(it.index));
    };
    return {
        {Stage::kUnique, [=](Item& it) { log("a", it); it.value = it.index * 3; return Status::OK(); }},
        {Stage::kPull, [=](Item& it) { log("b", it); it.value += 1; return Status::OK(); }},
        {Stage::kDense, [=, this](Item& it) {
           log("c", it);
           state += it.value;  // Only stage c touches state: one worker, in order.
           it.value = state;
           return Status::OK();
         }},
    };
  }
};

Status RunChain(Chain& chain, int items, int slots, PipelineStats* stats = nullptr,
                Tracer* tracer = nullptr) {
  std::vector<Item> buffer(slots);
  PipelineOptions options;
  options.tracer = tracer;
  return RunPipelined<Item>(
      chain.Stages(), buffer,
      [&](int64_t i, Item& it) -> Result<bool> {
        it.index = i;
        return i < items;
      },
      [&](Item& it) { chain.results.push_back(it.value); }, options, stats);
}

TEST(RunPipelinedTest, GivesTheSequentialResultsInOrderForAnyDepth) {
  Chain reference;
  std::vector<Item> one(1);
  Item item;
  ASSERT_TRUE(RunSequential<Item>(
                  reference.Stages(),
                  [](int64_t i, Item& it) {
                    it.index = i;
                    return i < 50;
                  },
                  item, nullptr, nullptr, [&](Item& it) { reference.results.push_back(it.value); })
                  .ok());
  for (int slots : {1, 2, 3, 8}) {
    SCOPED_TRACE(slots);
    Chain chain;
    PipelineStats stats;
    Tracer tracer;
    ASSERT_TRUE(RunChain(chain, 50, slots, &stats, &tracer).ok());
    EXPECT_EQ(reference.results, chain.results);
    // Every stage saw every item, each stage in item order.
    for (const char* stage : {"a", "b", "c"}) {
      std::vector<std::string> order;
      for (const std::string& s : chain.seen) {
        if (s.rfind(stage, 0) == 0) order.push_back(s);
      }
      ASSERT_EQ(50u, order.size());
      for (int i = 0; i < 50; ++i) EXPECT_EQ(stage + std::to_string(i), order[i]);
    }
    EXPECT_EQ(50, stats.times.items);
    // Reading and the three stages were timed; the push stage did not run.
    for (Stage s : {Stage::kRead, Stage::kUnique, Stage::kPull, Stage::kDense}) {
      EXPECT_GT(stats.times.busy_seconds[s], 0.0) << StageName(s);
    }
    EXPECT_EQ(0.0, stats.times.busy_seconds[Stage::kPush]);
    // A span per stage per item, reading included, and the read that
    // found the end of the input.
    EXPECT_EQ(4u * 50 + 1, tracer.Events().size());
  }
}

TEST(RunPipelinedTest, StagesOverlapOnDifferentItems) {
  // Stage a waits until stage b has started on the previous item: only
  // possible when two items are in flight at once.
  std::atomic<int64_t> b_started{-1};
  std::vector<StageWork<Item>> stages = {
      {Stage::kUnique,
       [&](Item& it) {
         const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         while (it.index > 0 && b_started.load() < it.index - 1) {
           if (std::chrono::steady_clock::now() > deadline) {
             return Status::Internal("no overlap");
           }
           std::this_thread::sleep_for(std::chrono::milliseconds(1));
         }
         return Status::OK();
       }},
      {Stage::kPull,
       [&](Item& it) {
         b_started.store(it.index);
         std::this_thread::sleep_for(std::chrono::milliseconds(2));
         return Status::OK();
       }},
  };
  std::vector<Item> buffer(2);
  const Status status = RunPipelined<Item>(
      stages, buffer,
      [](int64_t i, Item& it) -> Result<bool> {
        it.index = i;
        return i < 10;
      },
      {}, PipelineOptions{}, nullptr);
  EXPECT_TRUE(status.ok()) << status;
}

// stage_nice lowers the priority of the stages given a positive value, on
// their own worker threads only: the others and the caller keep theirs.
// Runs items 0, 1 and 2 through `stages` in two slots.
Status RunThreeItems(const std::vector<StageWork<Item>>& stages, const PipelineOptions& options) {
  std::vector<Item> buffer(2);
  return RunPipelined<Item>(
      stages, buffer,
      [](int64_t i, Item& it) -> Result<bool> {
        it.index = i;
        return i < 3;
      },
      {}, options, nullptr);
}

TEST(RunPipelinedTest, StageNiceLowersOnlyThoseStagesThreads) {
  const int base = ThisThreadsNiceValue();
  std::atomic<int> nice_a{-100}, nice_b{-100};
  std::vector<StageWork<Item>> stages = {
      {Stage::kUnique, [&](Item&) { nice_a = ThisThreadsNiceValue(); return Status::OK(); }},
      {Stage::kPull, [&](Item&) { nice_b = ThisThreadsNiceValue(); return Status::OK(); }},
  };
  PipelineOptions options;
  options.stage_nice[Stage::kUnique] = 5;
  const Status status = RunThreeItems(stages, options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(std::min(19, base + 5), nice_a.load());
  EXPECT_EQ(base, nice_b.load());
  EXPECT_EQ(base, ThisThreadsNiceValue());
}

// A stage given threads runs in an arena of that many, with an OpenMP team
// of that many for oneDNN; one given none runs on its worker thread.
TEST(RunPipelinedTest, StageThreadsGiveEachStageItsArenaAndOpenMpTeam) {
  std::atomic<int> arena_a{0}, omp_a{0}, arena_b{0}, omp_b{0}, arena_c{0};
  std::vector<StageWork<Item>> stages = {
      {Stage::kUnique,
       [&](Item&) {
         arena_a = CurrentArenaThreads();
         omp_a = OpenMpThreads();
         return Status::OK();
       }},
      {Stage::kPull,
       [&](Item&) {
         arena_b = CurrentArenaThreads();
         omp_b = OpenMpThreads();
         return Status::OK();
       }},
      {Stage::kDense,
       [&](Item&) {
         arena_c = CurrentArenaThreads();
         return Status::OK();
       }},
  };
  PipelineOptions options;
  options.stage_threads[Stage::kUnique] = 3;
  options.stage_threads[Stage::kPull] = 1;
  const Status status = RunThreeItems(stages, options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(3, arena_a.load());
  EXPECT_EQ(3, omp_a.load());
  EXPECT_EQ(1, arena_b.load());
  EXPECT_EQ(1, omp_b.load());
  EXPECT_EQ(CurrentArenaThreads(), arena_c.load());
}

// A failure in any stage (or in reading) stops the pipeline with that
// error, never a hang, and no later item reaches the last stage.
TEST(RunPipelinedTest, AFailureInAnyStageStopsThePipelineWithItsError) {
  for (int failing = 0; failing <= 3; ++failing) {
    SCOPED_TRACE(failing);
    std::atomic<int> stop_calls{0};
    std::atomic<int64_t> last_done{-1};
    std::vector<StageWork<Item>> stages;
    const Stage ids[] = {Stage::kUnique, Stage::kPull, Stage::kDense};
    for (int s = 0; s < 3; ++s) {
      stages.push_back({ids[s], [=](Item& it) {
                          if (failing == s + 1 && it.index == 7) {
                            return Status::DataLoss("injected at s", s);
                          }
                          return Status::OK();
                        }});
    }
    std::vector<Item> buffer(3);
    PipelineOptions options;
    options.on_stop = [&] { ++stop_calls; };
    const Status status = RunPipelined<Item>(
        stages, buffer,
        [&](int64_t i, Item& it) -> Result<bool> {
          if (failing == 0 && i == 7) return Status::IOError("injected at read");
          it.index = i;
          return true;  // Endless: only the failure ends the run.
        },
        [&](Item& it) { last_done.store(it.index); }, options, nullptr);
    ASSERT_FALSE(status.ok());
    if (failing == 0) {
      EXPECT_EQ(StatusCode::kIOError, status.code());
    } else {
      EXPECT_EQ(StatusCode::kDataLoss, status.code());
      EXPECT_THAT(status.message(),
                  HasSubstr(std::string("stage ") + StageName(ids[failing - 1])));
    }
    EXPECT_EQ(1, stop_calls.load());
    EXPECT_LT(last_done.load(), 7);
  }
}

TEST(RunPipelinedTest, OnStopReleasesAStageBlockedOnItsOwnCondition) {
  // The pull stage waits on the gate for a push that will never come
  // because the dense stage fails; on_stop cancels the gate.
  StalenessGate gate(0, /*early_pulls=*/false);
  std::vector<StageWork<Item>> stages = {
      {Stage::kPull, [&](Item& it) { return gate.AwaitPull(it.index, {1, 2, 3}); }},
      {Stage::kDense, [](Item& it) {
         return it.index == 0 ? Status::Internal("dense failed") : Status::OK();
       }},
      {Stage::kPush, [&](Item& it) { gate.MarkPushed(it.index); return Status::OK(); }},
  };
  std::vector<Item> buffer(4);
  PipelineOptions options;
  options.on_stop = [&] { gate.Cancel(); };
  const Status status = RunPipelined<Item>(
      stages, buffer,
      [](int64_t i, Item& it) -> Result<bool> {
        it.index = i;
        return i < 100;
      },
      {}, options, nullptr);
  EXPECT_EQ(StatusCode::kInternal, status.code()) << status;
  EXPECT_THAT(status.message(), HasSubstr("dense failed"));
}

TEST(RunPipelinedTest, TheWatchdogNamesAStageThatStopsMakingProgress) {
  std::vector<StageWork<Item>> stages = {
      {Stage::kUnique, [](Item&) { return Status::OK(); }},
      {Stage::kPull, [](Item& it) {
         if (it.index == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
         return Status::OK();
       }},
  };
  std::vector<Item> buffer(2);
  PipelineOptions options;
  options.watchdog_seconds = 0.05;
  std::mutex mu;
  std::vector<std::pair<Stage, int64_t>> stalls;
  options.on_stall = [&](Stage stage, int64_t item, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    stalls.push_back({stage, item});
    EXPECT_GE(seconds, 0.05);
  };
  PipelineStats stats;
  ASSERT_TRUE(RunPipelined<Item>(
                  stages, buffer,
                  [](int64_t i, Item& it) -> Result<bool> {
                    it.index = i;
                    return i < 4;
                  },
                  {}, options, &stats)
                  .ok());
  ASSERT_EQ(1u, stalls.size());
  EXPECT_EQ(Stage::kPull, stalls[0].first);
  EXPECT_EQ(2, stalls[0].second);
  EXPECT_EQ(1, stats.stalls);
}

TEST(RunPipelinedTest, BadOptionsAreInvalidArguments) {
  std::vector<Item> none;
  std::vector<StageWork<Item>> stages = {{Stage::kUnique, [](Item&) { return Status::OK(); }}};
  const Status status = RunPipelined<Item>(
      stages, none, [](int64_t, Item&) -> Result<bool> { return false; }, {}, PipelineOptions{},
      nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
}

// The stages after reading are named once each, and none is the read stage
// (reading is the runner's own).
TEST(RunPipelinedTest, StagesAreDistinctAndNotRead) {
  const auto ok = [](Item&) { return Status::OK(); };
  for (const std::vector<StageWork<Item>>& stages :
       {std::vector<StageWork<Item>>{{Stage::kPull, ok}, {Stage::kPull, ok}},
        std::vector<StageWork<Item>>{{Stage::kRead, ok}, {Stage::kPull, ok}}}) {
    std::vector<Item> buffer(2);
    const Status status = RunPipelined<Item>(
        stages, buffer, [](int64_t, Item&) -> Result<bool> { return false; }, {},
        PipelineOptions{}, nullptr);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
    EXPECT_THAT(status.message(), HasSubstr("distinct and not \"read\""));
  }
}

TEST(StalenessGateTest, EarlyPullsWaitOnlyForInFlightBatchesSharingKeys) {
  StalenessGate gate(0, /*early_pulls=*/true);
  ASSERT_TRUE(gate.AwaitPull(0, {1, 2, 3}).ok());
  // Disjoint from batch 0: no wait.
  ASSERT_TRUE(gate.AwaitPull(1, {4, 5}).ok());
  // Shares key 3 with batch 0: waits until batch 0 is pushed.
  std::atomic<bool> pulled{false};
  std::thread puller([&] {
    EXPECT_TRUE(gate.AwaitPull(2, {3, 9}).ok());
    pulled = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pulled.load());
  gate.MarkPushed(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pulled.load());
  gate.MarkPushed(0);
  puller.join();
  EXPECT_TRUE(pulled.load());
  const StalenessHistogram h = gate.histogram();
  EXPECT_EQ(7, h.total());
  EXPECT_EQ(7, h.rows[0]);  // k = 0: every row read fresh.
  EXPECT_EQ(1, h.waits);
}

TEST(StalenessGateTest, BoundedStalenessRecordsHowStaleEachRowWas) {
  StalenessGate gate(2, /*early_pulls=*/false);
  ASSERT_TRUE(gate.AwaitPull(0, {1, 2}).ok());
  ASSERT_TRUE(gate.AwaitPull(1, {2, 3}).ok());
  // Two batches in flight: allowed with k = 2. Key 2 misses two pushes,
  // key 3 one, key 4 none.
  ASSERT_TRUE(gate.AwaitPull(2, {2, 3, 4}).ok());
  StalenessHistogram h = gate.histogram();
  ASSERT_EQ(3u, h.rows.size());
  EXPECT_EQ((std::vector<int64_t>{2 + 1 + 1, 1 + 1, 1}), h.rows);
  EXPECT_NEAR((0 * 4 + 1 * 2 + 2 * 1) / 7.0, h.mean(), 1e-12);
  EXPECT_EQ("0: 57.14%, 1: 28.57%, 2: 14.29%", h.ToString());
  // A fourth would make three in flight: cancelled while waiting.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate.Cancel();
  });
  EXPECT_EQ(StatusCode::kCancelled, gate.AwaitPull(3, {7}).code());
  canceller.join();
}

TEST(StalenessGateTest, AfterAllPushesWaitsForEveryEarlierBatch) {
  StalenessGate gate(0, /*early_pulls=*/true);
  ASSERT_TRUE(gate.AwaitPull(0, {1}).ok());
  std::atomic<bool> pulled{false};
  std::thread puller([&] {
    EXPECT_TRUE(gate.AwaitPull(1, {2}, /*after_all_pushes=*/true).ok());
    pulled = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(pulled.load());
  gate.MarkPushed(0);
  puller.join();
  EXPECT_TRUE(pulled.load());
}

TEST(StalenessGateTest, AwaitPushedIsABarrierOnEveryEarlierBatch) {
  StalenessGate gate(0, /*early_pulls=*/true);
  EXPECT_TRUE(gate.AwaitPushed(0).ok());  // Nothing before batch 0.
  ASSERT_TRUE(gate.AwaitPull(0, {1}).ok());
  ASSERT_TRUE(gate.AwaitPull(1, {2}).ok());
  std::atomic<bool> passed{false};
  std::thread waiter([&] {
    EXPECT_TRUE(gate.AwaitPushed(2).ok());
    passed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(passed.load());
  gate.MarkPushed(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(passed.load());  // Batch 1 is still in flight.
  gate.MarkPushed(1);
  waiter.join();
  EXPECT_TRUE(passed.load());
  // A barrier no push will reach is released by Cancel.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate.Cancel();
  });
  EXPECT_EQ(StatusCode::kCancelled, gate.AwaitPushed(5).code());
  canceller.join();
}

}  // namespace
}  // namespace ember::pipeline
