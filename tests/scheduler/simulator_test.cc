#include "scheduler/simulator.h"

#include <gtest/gtest.h>

namespace ember::scheduler {
namespace {

SimOptions Recorded(int slots, int64_t items, double cores = 0.0) {
  SimOptions options;
  options.slots = slots;
  options.items = items;
  options.cores = cores;
  options.record = true;
  return options;
}

// Without contention, finish[s][i] = max(finish[s-1][i], finish[s][i-1]) +
// t_s: the textbook recursion of a pipeline with unbounded buffers.
TEST(SimulatePipelineTest, FollowsThePipelineRecursionWithoutContention) {
  const std::vector<SimStage> stages = {{"a", 1.0}, {"b", 2.0}, {"c", 0.5}};
  const int64_t n = 5;
  const SimResult r = SimulatePipeline(stages, Recorded(100, n));
  std::vector<std::vector<double>> expected(3, std::vector<double>(n));
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      const double ready = std::max(s ? expected[s - 1][i] : 0.0, i ? expected[s][i - 1] : 0.0);
      expected[s][i] = ready + stages[s].seconds;
    }
  }
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < n; ++i)
      EXPECT_DOUBLE_EQ(expected[s][i], r.finish[s][i]) << s << "," << i;
  }
  EXPECT_DOUBLE_EQ(1.0 + 2.0 * n + 0.5, r.makespan_seconds);
  EXPECT_DOUBLE_EQ(2.0 * n, r.busy_seconds[1]);
}

TEST(SimulatePipelineTest, OneSlotRunsItemsOneAfterAnother) {
  const std::vector<SimStage> stages = {{"a", 1.0}, {"b", 2.0}, {"c", 0.5}};
  const SimResult r = SimulatePipeline(stages, Recorded(1, 4));
  EXPECT_DOUBLE_EQ(4 * 3.5, r.makespan_seconds);
  EXPECT_DOUBLE_EQ(3.5, r.start[0][1]);  // Item 1 is read when item 0 is done.
  EXPECT_DOUBLE_EQ(3.5, r.seconds_per_item);
}

// Two slots: item i is read when item i - 2 has left the last stage.
TEST(SimulatePipelineTest, SlotsBoundTheItemsInFlight) {
  const std::vector<SimStage> stages = {{"a", 1.0}, {"b", 1.0}, {"c", 4.0}};
  const SimResult r = SimulatePipeline(stages, Recorded(2, 3));
  // c finishes item 0 at 6 and item 1 at 10; item 2 is read at 6.
  EXPECT_DOUBLE_EQ(6.0, r.finish[2][0]);
  EXPECT_DOUBLE_EQ(10.0, r.finish[2][1]);
  EXPECT_DOUBLE_EQ(6.0, r.start[0][2]);
  EXPECT_DOUBLE_EQ(14.0, r.makespan_seconds);
}

// Two one-core stages of 1 s on one core: while both work, each runs at
// half speed. a0: [0, 1]; a1 and b0 share [1, 3]; b1 alone: [3, 4].
TEST(SimulatePipelineTest, StagesShareCoresWhenTheyAskForMoreThanThereAre) {
  const std::vector<SimStage> stages = {{"a", 1.0, 1.0}, {"b", 1.0, 1.0}};
  const SimResult r = SimulatePipeline(stages, Recorded(4, 2, /*cores=*/1.0));
  EXPECT_DOUBLE_EQ(1.0, r.finish[0][0]);
  EXPECT_DOUBLE_EQ(3.0, r.finish[0][1]);
  EXPECT_DOUBLE_EQ(3.0, r.finish[1][0]);
  EXPECT_DOUBLE_EQ(4.0, r.finish[1][1]);
  EXPECT_DOUBLE_EQ(3.0, r.busy_seconds[0]);  // Busy time includes the slowed-down share.
  EXPECT_DOUBLE_EQ(3.0, r.busy_seconds[1]);
  // With two cores they do not slow each other down.
  const SimResult free = SimulatePipeline(stages, Recorded(4, 2, /*cores=*/2.0));
  EXPECT_DOUBLE_EQ(3.0, free.makespan_seconds);
}

// A team (an OpenMP team: the dense stage) of 2 threads on 2 cores and a
// 1-core stage beside it: the core they share is sliced in halves and the
// team waits for its slowest thread, so it runs at half speed while the
// other works. a0: [0, 1]; a1 (1 s at half speed) [1, 3], d0 does 1 s of
// its 3 meanwhile and the rest alone: [1, 5]; d1: [5, 8]. The team lost the
// whole second a1 took, where processor sharing would lose half of it.
TEST(SimulatePipelineTest, ATeamOnEveryCoreLosesTheWholeCpuTimeOfAStageBesideIt) {
  std::vector<SimStage> stages = {{"a", 1.0, 1.0}, {"d", 3.0, 2.0}};
  stages[1].team = true;
  const SimResult r = SimulatePipeline(stages, Recorded(4, 2, /*cores=*/2.0));
  EXPECT_DOUBLE_EQ(3.0, r.finish[0][1]);
  EXPECT_DOUBLE_EQ(5.0, r.finish[1][0]);
  EXPECT_DOUBLE_EQ(8.0, r.makespan_seconds);
  // Processor sharing: both at 2/3 while a1 works: a1 [1, 2.5], d0 [1, 4.5].
  stages[1].team = false;
  EXPECT_DOUBLE_EQ(7.5, SimulatePipeline(stages, Recorded(4, 2, 2.0)).makespan_seconds);
  // A third core: a1 runs beside the team without slowing it: 1 + 3 + 3.
  stages[1].team = true;
  EXPECT_DOUBLE_EQ(7.0, SimulatePipeline(stages, Recorded(4, 2, 3.0)).makespan_seconds);
}

// Threads that overflow onto a team's cores share each core equally with
// its thread: a (1 s), b (1 s), then a 1-thread team d (3 s), on 1 core.
TEST(SimulatePipelineTest, ThreadsOnATeamsCoreShareItEqually) {
  std::vector<SimStage> stages = {{"a", 1.0, 1.0}, {"b", 1.0, 1.0}, {"d", 3.0, 1.0}};
  stages[2].team = true;
  const SimResult r = SimulatePipeline(stages, Recorded(8, 3, /*cores=*/1.0));
  // [0, 1]: a0 alone. [1, 3]: a1 and b0 at 1/2 each. From 3, d0, a2 and
  // b1 share the core in thirds: a2 and b1 are done at 6, when d0 has 2 s
  // left. From 6, b2 and d0 at 1/2: b2 is done at 8, d0 (1 s left) at 9.
  EXPECT_DOUBLE_EQ(3.0, r.finish[1][0]);
  EXPECT_DOUBLE_EQ(6.0, r.finish[0][2]);
  EXPECT_DOUBLE_EQ(6.0, r.finish[1][1]);
  EXPECT_DOUBLE_EQ(8.0, r.finish[1][2]);
  EXPECT_DOUBLE_EQ(9.0, r.finish[2][0]);
}

// Stages of another pool (a network link) share it, not the cores: two
// one-unit stages of 1 s on a pool of capacity 1 take 2 s together, while
// a CPU stage beside them runs at full speed.
TEST(SimulatePipelineTest, StagesOfAPoolShareItsCapacity) {
  std::vector<SimStage> stages = {
      {"cpu", 1.0, 1.0}, {"send", 1.0, 1.0, -1, 1, 1}, {"recv", 1.0, 1.0, -1, 1, 1}};
  SimOptions options = Recorded(8, 3, /*cores=*/1.0);
  options.pool_capacity = {1.0};
  const SimResult r = SimulatePipeline(stages, options);
  // cpu: 0-1, 1-2, 2-3. send0: 1-2. send1 and recv0 share [2, 4]; cpu idle
  // from 3; recv1, send2: [4, 6]; recv2: [6, 7].
  EXPECT_DOUBLE_EQ(3.0, r.finish[0][2]);
  EXPECT_DOUBLE_EQ(4.0, r.finish[1][1]);
  EXPECT_DOUBLE_EQ(4.0, r.finish[2][0]);
  EXPECT_DOUBLE_EQ(7.0, r.makespan_seconds);
  options.pool_capacity = {};  // No contention: 1 + 3 x 1 + 1.
  EXPECT_DOUBLE_EQ(5.0, SimulatePipeline(stages, options).makespan_seconds);
}

// A pull (stage 1) that must see the push (stage 2) of the previous item
// starts only once that push is done: with lag 1, pull -> push -> next pull
// is a loop that serialises them.
TEST(SimulatePipelineTest, AStageWaitsForTheStageItDependsOn) {
  std::vector<SimStage> stages = {{"read", 0.5}, {"pull", 1.0}, {"push", 1.0}};
  stages[1].waits_for = 2;
  stages[1].lag = 1;
  const SimResult strict = SimulatePipeline(stages, Recorded(8, 3));
  // pull0 [0.5, 1.5], push0 [1.5, 2.5]; pull1 [2.5, 3.5], push1 [3.5, 4.5];
  // pull2 [4.5, 5.5], push2 [5.5, 6.5].
  EXPECT_DOUBLE_EQ(2.5, strict.start[1][1]);
  EXPECT_DOUBLE_EQ(3.5, strict.finish[1][1]);
  EXPECT_DOUBLE_EQ(6.5, strict.makespan_seconds);
  EXPECT_DOUBLE_EQ(3.0, strict.busy_seconds[1]);  // Waiting is not work.
  // Lag 2 (staleness 1): pull1 [1.5, 2.5] need not wait; pull2 waits for
  // push0 (done at 2.5): [2.5, 3.5]; push2 [3.5, 4.5].
  stages[1].lag = 2;
  const SimResult stale = SimulatePipeline(stages, Recorded(8, 3));
  EXPECT_DOUBLE_EQ(2.5, stale.finish[1][1]);
  EXPECT_DOUBLE_EQ(4.5, stale.makespan_seconds);
  // A slow push (2 s): pull3 ends at 10.5 with lag 1, at 6.5 with lag 2.
  stages[2].seconds = 2.0;
  stages[1].lag = 1;
  EXPECT_DOUBLE_EQ(10.5, SimulatePipeline(stages, Recorded(8, 4)).finish[1][3]);
  stages[1].lag = 2;
  EXPECT_DOUBLE_EQ(6.5, SimulatePipeline(stages, Recorded(8, 4)).finish[1][3]);
}

TEST(SimulatePipelineTest, NothingToRunTakesNoTime) {
  EXPECT_EQ(0.0, SimulatePipeline({}, Recorded(2, 5)).makespan_seconds);
  EXPECT_EQ(0.0, SimulatePipeline({{"a", 1.0}}, Recorded(2, 0)).makespan_seconds);
}

}  // namespace
}  // namespace ember::scheduler
