#include "pipeline/schedule_simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeline/schedule.h"
#include "pipeline/schedule_drawing.h"

namespace ember::pipeline {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

constexpr double kRounding = 1e-9;

Schedule Make(const std::string& kind, int p, int v, int m) {
  Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *std::move(schedule);
}

Timeline Simulate(const Schedule& schedule, const ScheduleCosts& costs) {
  Result<Timeline> timeline = SimulateSchedule(schedule, costs);
  EXPECT_TRUE(timeline.ok()) << timeline.status();
  return *std::move(timeline);
}

ScheduleCosts EqualChunks(double forward_seconds, double backward_seconds) {
  ScheduleCosts costs;
  costs.forward_seconds = {forward_seconds};
  costs.backward_seconds = {backward_seconds};
  return costs;
}

// (kind, p, v, m) for the grid below.
std::vector<std::tuple<std::string, int, int, int>> Grid() {
  std::vector<std::tuple<std::string, int, int, int>> grid;
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 12; ++m) {
      grid.emplace_back("1f1b", p, 1, m);
      for (int v = 1; v <= 3; ++v) {
        grid.emplace_back("gpipe", p, v, m);
        if (m % p == 0) grid.emplace_back("interleaved", p, v, m);
      }
    }
  }
  return grid;
}

// Narayanan et al. (2021): with v chunks per rank each costing 1/v of a
// rank's work, the bubble is (p - 1)/v chunk-passes of (f + b) against m
// micro-batches of work: idle / busy = (p - 1) / (v·m), whatever f : b is.
TEST(ScheduleSimulatorTest, OneFOneBBubbleIsPMinusOneOverVTimesM) {
  for (const auto& [kind, p, v, m] : Grid()) {
    if (kind == "gpipe") continue;
    for (const double backward : {1.0, 2.0, 3.0}) {
      const Timeline timeline = Simulate(Make(kind, p, v, m), EqualChunks(1.0, backward));
      EXPECT_THAT(timeline.bubble_ratio(), DoubleNear((p - 1.0) / (v * m), kRounding))
          << kind << " " << ToString(ScheduleShape{p, v, m}) << " b=" << backward;
    }
  }
}

// The same over the larger grid (p 2-8, v 1-4, m 2-32) for 1F1B and
// interleaved 1F1B in Megatron's current order, with its default group
// (G = p) and with every other group Megatron accepts whose groups are
// whole (m mod G = 0: a ragged last group adds its own wait).
TEST(ScheduleSimulatorTest, BubbleIsPMinusOneOverVTimesMOverALargerGrid) {
  int simulated = 0;
  for (int p = 2; p <= 8; ++p) {
    for (int m = 2; m <= 32; ++m) {
      for (int v = 1; v <= 4; ++v) {
        std::vector<std::pair<std::string, int>> kinds;  // (kind, group)
        if (v == 1) kinds.emplace_back("1f1b", 0);
        for (int g = p; g <= m; ++g) {
          if (m % g == 0) kinds.emplace_back("interleaved", g);
        }
        for (const auto& [kind, g] : kinds) {
          const ScheduleShape shape{p, v, m, g};
          Result<Schedule> schedule = BuiltinSchedules().Make(kind, shape);
          ASSERT_TRUE(schedule.ok()) << kind << " " << ToString(shape) << ": " << schedule.status();
          const Timeline timeline = Simulate(*schedule, EqualChunks(1.0, 2.0));
          if (kind == "interleaved" && g != p) {
            // A wider group keeps more in flight and never idles longer.
            EXPECT_LE(timeline.bubble_ratio(), (p - 1.0) / (v * m) + kRounding)
                << kind << " " << ToString(shape);
          } else {
            EXPECT_THAT(timeline.bubble_ratio(), DoubleNear((p - 1.0) / (v * m), kRounding))
                << kind << " " << ToString(shape);
          }
          ++simulated;
        }
      }
    }
  }
  EXPECT_GT(simulated, 500);
}

// ZB-H1 over the grid (p 2-8, m 2-32) with equal F, B and W (a
// backward of 2 of which the weight gradients are 1): the bubble is
// (p - 1)/(3m) when m >= p, a third of 1F1B's at the same costs, and no more
// than 1F1B's when m < p (each micro-batch's own path then bounds the step).
TEST(ScheduleSimulatorTest, ZeroBubbleH1BubbleIsPMinusOneOverThreeM) {
  ScheduleCosts costs = EqualChunks(1.0, 2.0);
  costs.weight_seconds = {1.0};
  int simulated = 0;
  for (int p = 2; p <= 8; ++p) {
    for (int m = 2; m <= 32; ++m) {
      const Timeline zb = Simulate(Make("zb-h1", p, 1, m), costs);
      const Timeline one = Simulate(Make("1f1b", p, 1, m), costs);
      EXPECT_THAT(one.bubble_ratio(), DoubleNear((p - 1.0) / m, kRounding));
      if (m >= p) {
        EXPECT_THAT(zb.bubble_ratio(), DoubleNear((p - 1.0) / (3 * m), kRounding))
            << ToString(ScheduleShape{p, 1, m});
      } else {
        EXPECT_LE(zb.bubble_ratio(), one.bubble_ratio() + kRounding)
            << ToString(ScheduleShape{p, 1, m});
      }
      // Every rank does the same work as in 1F1B: 3m units.
      for (double busy : zb.busy_seconds) EXPECT_THAT(busy, DoubleNear(3.0 * m, kRounding));
      ++simulated;
    }
  }
  EXPECT_EQ(7 * 31, simulated);
}

// Unsplit kinds charge the weight gradients to the backward; a weight part
// larger than its backward is refused.
TEST(ScheduleSimulatorTest, WeightSecondsArePartOfTheBackward) {
  ScheduleCosts costs = EqualChunks(1.0, 2.0);
  costs.weight_seconds = {0.5};
  const Timeline split = Simulate(Make("zb-h1", 2, 1, 2), costs);
  const Timeline whole = Simulate(Make("1f1b", 2, 1, 2), costs);
  for (const Timeline* t : {&split, &whole}) {
    for (double busy : t->busy_seconds) EXPECT_THAT(busy, DoubleNear(6.0, kRounding));
  }
  for (const TimedInstr& timed : split.ranks[0]) {
    const double length = timed.end_seconds - timed.start_seconds;
    if (timed.instr.kind == InstrKind::kBackward) EXPECT_THAT(length, DoubleNear(1.5, kRounding));
    if (timed.instr.kind == InstrKind::kBackwardWeight) {
      EXPECT_THAT(length, DoubleNear(0.5, kRounding));
    }
  }
  costs.weight_seconds = {3.0};
  EXPECT_THAT(SimulateSchedule(Make("zb-h1", 2, 1, 2), costs).status().message(),
              HasSubstr("weight_seconds of chunk 0 (3) is more than its backward_seconds (2)"));
}

// GPipe: the last rank starts its forwards p - 1 chunk-times late, and rank
// 0 ends its backwards p - 1 chunk-times after the last rank; in between
// each rank is busy v·m·(f + b) when m >= p (a rank's next chunk then never
// waits for the previous pass to come round). So the step is
// (v·m + p - 1)·(f + b) and each rank idles (p - 1)·(f + b):
// idle fraction (p - 1) / (v·m + p - 1), the same bubble as 1F1B.
TEST(ScheduleSimulatorTest, GPipeIdleFractionIsPMinusOneOverVMPlusPMinusOne) {
  for (const auto& [kind, p, v, m] : Grid()) {
    if (kind != "gpipe" || (v > 1 && m < p)) continue;
    for (const double backward : {1.0, 2.0}) {
      const Timeline timeline = Simulate(Make(kind, p, v, m), EqualChunks(1.0, backward));
      EXPECT_THAT(timeline.step_seconds, DoubleNear((v * m + p - 1) * (1.0 + backward), kRounding))
          << ToString(ScheduleShape{p, v, m});
      EXPECT_THAT(timeline.idle_fraction(), DoubleNear((p - 1.0) / (v * m + p - 1), kRounding))
          << ToString(ScheduleShape{p, v, m});
    }
  }
}

TEST(ScheduleSimulatorTest, GPipeWithFewerMicroBatchesThanRanksWaitsForEachPass) {
  // p = 4, v = 2, m = 1: every chunk waits for the one before it.
  const Timeline timeline = Simulate(Make("gpipe", 4, 2, 1), EqualChunks(1.0, 2.0));
  EXPECT_THAT(timeline.step_seconds, DoubleNear(8 * 3.0, kRounding));
  EXPECT_GT(timeline.idle_fraction(), 3.0 / (2 * 1 + 3));
}

TEST(ScheduleSimulatorTest, OneMicroBatchCrossesEveryLinkTwiceWithItsLatency) {
  for (const auto& [kind, p, v] :
       {std::tuple{"gpipe", 3, 2}, {"1f1b", 4, 1}, {"interleaved", 1, 3}}) {
    ScheduleCosts costs = EqualChunks(1.0, 2.0);
    costs.send_latency_seconds = 0.25;
    costs.optimizer_step_seconds = 0.5;
    const int chunks = p * v;
    const int hops = p > 1 ? chunks - 1 : 0;
    const Timeline timeline = Simulate(Make(kind, p, v, 1), costs);
    // Rank 0 runs the first forward and the last backward, then its step.
    EXPECT_THAT(timeline.step_seconds, DoubleNear(chunks * 3.0 + 2 * hops * 0.25 + 0.5, kRounding))
        << kind;
  }
}

TEST(ScheduleSimulatorTest, EachRankIsBusyWithItsOwnChunksForEveryMicroBatch) {
  ScheduleCosts costs;
  costs.forward_seconds = {1, 2, 3, 4, 5, 6};
  costs.backward_seconds = {2, 1, 6, 1, 1, 3};
  const int m = 6;
  for (const char* kind : {"gpipe", "interleaved"}) {
    const Timeline timeline = Simulate(Make(kind, 3, 2, m), costs);
    for (int rank = 0; rank < 3; ++rank) {
      const double expected =
          m * (costs.forward_seconds[rank] + costs.backward_seconds[rank] +
               costs.forward_seconds[rank + 3] + costs.backward_seconds[rank + 3]);
      EXPECT_THAT(timeline.busy_seconds[rank], DoubleNear(expected, kRounding)) << kind;
      EXPECT_GE(timeline.step_seconds, timeline.busy_seconds[rank]);
    }
  }
}

TEST(ScheduleSimulatorTest, TimelinesRespectMessagesAndRunEachRankInOrder) {
  ScheduleCosts costs = EqualChunks(1.0, 2.0);
  costs.forward_seconds = {1, 3, 2, 1};  // uneven chunks
  costs.send_latency_seconds = 0.5;
  const Schedule schedule = Make("interleaved", 2, 2, 4);
  const Timeline timeline = Simulate(schedule, costs);
  int receives = 0, matched = 0;
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(schedule.ranks[r].size(), timeline.ranks[r].size());
    double previous_end = 0;
    for (const TimedInstr& timed : timeline.ranks[r]) {
      EXPECT_EQ(previous_end, timed.start_seconds) << ToString(timed.instr);
      EXPECT_LE(timed.start_seconds, timed.end_seconds);
      previous_end = timed.end_seconds;
      if (!timed.instr.is_recv()) continue;
      ++receives;
      // Its send, on the peer: the receive ends no earlier than it arrives.
      for (const TimedInstr& other : timeline.ranks[static_cast<size_t>(timed.instr.peer)]) {
        const bool activation = timed.instr.kind == InstrKind::kRecvActivation;
        const InstrKind send = activation ? InstrKind::kSendActivation : InstrKind::kSendGrad;
        if (other.instr.kind == send && other.instr.micro_batch == timed.instr.micro_batch &&
            other.instr.chunk == timed.instr.chunk) {
          EXPECT_GE(timed.end_seconds, other.start_seconds + 0.5) << ToString(timed.instr);
          ++matched;
        }
      }
    }
  }
  EXPECT_GT(receives, 0);
  EXPECT_EQ(receives, matched);
}

TEST(ScheduleSimulatorTest, RejectsBadCostsAndBrokenSchedules) {
  const Schedule schedule = Make("1f1b", 2, 1, 2);
  ScheduleCosts costs;
  costs.forward_seconds = {1, 2, 3};
  EXPECT_THAT(SimulateSchedule(schedule, costs).status().message(),
              HasSubstr("forward_seconds needs 1 or 2 entries, got 3"));
  costs = EqualChunks(1, -1);
  EXPECT_THAT(SimulateSchedule(schedule, costs).status().message(),
              HasSubstr("backward_seconds[0] must be finite and >= 0"));
  Schedule broken = schedule;
  broken.ranks[0].pop_back();
  EXPECT_THAT(SimulateSchedule(broken, {}).status().message(),
              HasSubstr("rank 0 does not end with the optimizer step"));
}

TEST(ScheduleDrawingTest, DrawsOneRowPerRankWithTheBubble) {
  Result<std::string> text = DrawScheduleText(Make("interleaved", 2, 2, 4), EqualChunks(1, 2));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("rank 0 | F0.0 F1.0 F0.2 F1.2"));
  EXPECT_THAT(*text, HasSubstr("rank 1 | .    F0.1"));
  EXPECT_THAT(*text, HasSubstr("bubble (idle / busy) 0.125, predicted (p-1)/(v*m) = 0.125"));
}

TEST(ScheduleDrawingTest, DrawsTheWeightGradientsOfAZeroBubbleSchedule) {
  // Default costs: backward 2 x forward, half of it the weight gradients.
  Result<std::string> text = DrawScheduleText(Make("zb-h1", 2, 1, 4));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("Wm.c: forward / input gradient / weight gradients"));
  EXPECT_THAT(*text, HasSubstr("rank 1 | .    F0.1 B0.1 F1.1 B1.1 W0.1 F2.1"));
  EXPECT_THAT(*text, HasSubstr("predicted (p-1)/(3m) = 0.08333"));
  EXPECT_THAT(*text, HasSubstr("bubble (idle / busy) 0.08333"));
}

}  // namespace
}  // namespace ember::pipeline
