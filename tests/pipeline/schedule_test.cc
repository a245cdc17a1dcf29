#include "pipeline/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/schedule_checker.h"
#include "pipeline/schedule_kinds.h"

namespace ember::pipeline {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Rank `rank`'s forwards and backwards, in order, as text.
std::vector<std::string> ComputeOf(const Schedule& schedule, int rank) {
  std::vector<std::string> out;
  for (const Instr& instr : schedule.ranks[static_cast<size_t>(rank)]) {
    if (instr.is_compute()) out.push_back(ToString(instr));
  }
  return out;
}

// How many forwards rank `rank` runs before its first backward.
int WarmupOf(const Schedule& schedule, int rank) {
  int warmup = 0;
  for (const Instr& instr : schedule.ranks[static_cast<size_t>(rank)]) {
    if (instr.kind == InstrKind::kBackward) break;
    warmup += instr.kind == InstrKind::kForward;
  }
  return warmup;
}

Schedule Make(const std::string& kind, int p, int v, int m) {
  Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *std::move(schedule);
}

TEST(ScheduleRegistryTest, KnowsTheBuiltinKindsByName) {
  EXPECT_THAT(BuiltinSchedules().names(), ElementsAre("1f1b", "gpipe", "interleaved", "zb-h1"));
}

TEST(ScheduleRegistryTest, UnknownKindIsNotFoundNamingTheKnownOnes) {
  Result<Schedule> schedule = BuiltinSchedules().Make("zero-bubble", {2, 1, 4});
  ASSERT_FALSE(schedule.ok());
  EXPECT_EQ(StatusCode::kNotFound, schedule.status().code());
  EXPECT_THAT(schedule.status().message(), HasSubstr("zero-bubble"));
  EXPECT_THAT(schedule.status().message(), HasSubstr("interleaved"));
}

TEST(ScheduleRegistryTest, RejectsATakenNameAndAddsANewKindWithOneCall) {
  ScheduleRegistry registry;
  RegisterBuiltinSchedules(registry);
  EXPECT_EQ(StatusCode::kAlreadyExists, registry.Add("gpipe", &GPipeOrder).code());
  // A kind is one function and one Add.
  ASSERT_TRUE(
      registry.Add("gpipe-again", [](const ScheduleShape& shape) { return GPipeOrder(shape); })
          .ok());
  Result<Schedule> schedule = registry.Make("gpipe-again", {2, 2, 2});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_TRUE(CheckSchedule(*schedule).ok());
}

TEST(ScheduleShapeTest, RejectsNonPositiveSizesNamingTheField) {
  for (const ScheduleShape& shape :
       {ScheduleShape{0, 1, 1}, ScheduleShape{1, 0, 1}, ScheduleShape{1, 1, 0}}) {
    const Status status = ValidateShape(shape);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << ToString(shape);
  }
  EXPECT_THAT(ValidateShape({1, 1, 0}).message(), HasSubstr("micro-batches"));
}

TEST(ScheduleShapeTest, ChunkCLivesOnRankCModP) {
  const ScheduleShape shape{3, 2, 6};
  EXPECT_EQ(6, shape.chunks());
  for (int c = 0; c < shape.chunks(); ++c) EXPECT_EQ(c % 3, shape.RankOf(c));
}

TEST(OneFOneBTest, WarmsUpWithPMinusRankMinusOneForwards) {
  for (int m : {1, 2, 4, 7}) {
    const Schedule schedule = Make("1f1b", 4, 1, m);
    for (int rank = 0; rank < 4; ++rank) {
      // p - rank - 1 warm-up forwards, then the first steady-state forward.
      EXPECT_EQ(std::min(4 - rank, m), WarmupOf(schedule, rank)) << "m=" << m << " rank " << rank;
    }
  }
}

TEST(OneFOneBTest, AlternatesForwardAndBackwardAfterWarmUp) {
  EXPECT_THAT(ComputeOf(Make("1f1b", 2, 1, 3), 0),
              ElementsAre("F0.0", "F1.0", "B0.0", "F2.0", "B1.0", "B2.0"));
  EXPECT_THAT(ComputeOf(Make("1f1b", 2, 1, 3), 1),
              ElementsAre("F0.1", "B0.1", "F1.1", "B1.1", "F2.1", "B2.1"));
}

TEST(OneFOneBTest, RequiresOneVirtualStage) {
  Result<Schedule> schedule = BuiltinSchedules().Make("1f1b", {2, 2, 4});
  ASSERT_FALSE(schedule.ok());
  EXPECT_THAT(schedule.status().message(), HasSubstr("interleaved"));
}

// ZB-H1: rank r warms up with p - r forwards, then runs B(k), W(k - r) and
// the next forward for each micro-batch k, then the r weight gradients left.
TEST(ZeroBubbleH1Test, LagsEachRanksWeightGradientsByItsRank) {
  const Schedule schedule = Make("zb-h1", 3, 1, 4);
  EXPECT_TRUE(schedule.splits_backward());
  EXPECT_EQ(InstrKind::kBackwardWeight, ReleaseKind(schedule));
  EXPECT_THAT(ComputeOf(schedule, 0), ElementsAre("F0.0", "F1.0", "F2.0", "B0.0", "W0.0", "F3.0",
                                                  "B1.0", "W1.0", "B2.0", "W2.0", "B3.0", "W3.0"));
  EXPECT_THAT(ComputeOf(schedule, 1), ElementsAre("F0.1", "F1.1", "B0.1", "F2.1", "B1.1", "W0.1",
                                                  "F3.1", "B2.1", "W1.1", "B3.1", "W2.1", "W3.1"));
  EXPECT_THAT(ComputeOf(schedule, 2), ElementsAre("F0.2", "B0.2", "F1.2", "B1.2", "F2.2", "B2.2",
                                                  "W0.2", "F3.2", "B3.2", "W1.2", "W2.2", "W3.2"));
  EXPECT_FALSE(Make("1f1b", 3, 1, 4).splits_backward());
  EXPECT_EQ(InstrKind::kBackward, ReleaseKind(Make("1f1b", 3, 1, 4)));
}

// Over p 2-8 and m 1-32: every rank holds at most p micro-batches'
// activations (from F to W, 1F1B's first rank's), and each chunk's weight
// gradients run in micro-batch order (the order 1F1B sums them in).
TEST(ZeroBubbleH1Test, HoldsAtMostPMicroBatchesAndSumsInMicroBatchOrder) {
  for (int p = 2; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const Schedule schedule = Make("zb-h1", p, 1, m);
      for (int rank = 0; rank < p; ++rank) {
        int held = 0, most = 0, next_w = 0;
        for (const Instr& instr : schedule.ranks[static_cast<size_t>(rank)]) {
          if (instr.kind == InstrKind::kForward) most = std::max(most, ++held);
          if (instr.kind != InstrKind::kBackwardWeight) continue;
          --held;
          EXPECT_EQ(next_w++, instr.micro_batch) << "p=" << p << " m=" << m << " rank " << rank;
        }
        EXPECT_EQ(std::min(p, m), most) << "p=" << p << " m=" << m << " rank " << rank;
        EXPECT_EQ(m, next_w);
      }
    }
  }
}

TEST(ZeroBubbleH1Test, RequiresOneVirtualStage) {
  Result<Schedule> schedule = BuiltinSchedules().Make("zb-h1", {2, 2, 4});
  ASSERT_FALSE(schedule.ok());
  EXPECT_THAT(schedule.status().message(), HasSubstr("zb-h1 needs 1 virtual stage"));
}

TEST(GPipeTest, RunsEveryForwardBeforeAnyBackward) {
  EXPECT_THAT(ComputeOf(Make("gpipe", 2, 2, 2), 1),
              ElementsAre("F0.1", "F1.1", "F0.3", "F1.3", "B0.3", "B1.3", "B0.1", "B1.1"));
}

TEST(InterleavedTest, WarmsUpAsMegatronDoes) {
  for (const auto& [p, v, m] : {std::tuple{2, 2, 4}, {4, 2, 8}, {4, 3, 8}, {2, 3, 6}}) {
    const Schedule schedule = Make("interleaved", p, v, m);
    for (int rank = 0; rank < p; ++rank) {
      const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, v * m);
      // The first steady-state step is a forward too.
      EXPECT_EQ(std::min(warmup + 1, v * m), WarmupOf(schedule, rank))
          << ToString(schedule.shape) << " rank " << rank;
    }
  }
}

TEST(InterleavedTest, TakesMicroBatchesInGroupsOfPPerChunk) {
  // p = 2, v = 2, m = 4: rank 0 holds chunks 0 and 2.
  EXPECT_THAT(ComputeOf(Make("interleaved", 2, 2, 4), 0),
              ElementsAre("F0.0", "F1.0", "F0.2", "F1.2",  // warm-up
                          "F2.0", "B0.2", "F3.0", "B1.2", "F2.2", "B0.0", "F3.2", "B1.0",  // 1F1B
                          "B2.2", "B3.2", "B2.0", "B3.0"));
}

// Megatron's order since November 2024: with m = p the first ranks run
// every forward first, the later ones start 1F1B (fewer activations held).
TEST(InterleavedTest, StartsOneFOneBOnTheLaterRanksWhenMEqualsP) {
  const Schedule schedule = Make("interleaved", 3, 2, 3);
  // Warm-ups min(6, 2(3 - r - 1) + 3) = 6, 5, 3, and the first steady forward.
  EXPECT_EQ(6, WarmupOf(schedule, 0));
  EXPECT_EQ(6, WarmupOf(schedule, 1));
  EXPECT_EQ(4, WarmupOf(schedule, 2));
}

TEST(InterleavedTest, TakesMicroBatchesInGroupsOfG) {
  // p = 2, v = 2, m = 6, G = 3: micro-batches 0-2 through chunk 0 then 2 on
  // rank 0, then 3-5; warm-up 2 + 3 = 5.
  const Schedule schedule = *BuiltinSchedules().Make("interleaved", {2, 2, 6, 3});
  const std::vector<std::string> order = ComputeOf(schedule, 0);
  EXPECT_THAT(std::vector<std::string>(order.begin(), order.begin() + 7),
              ElementsAre("F0.0", "F1.0", "F2.0", "F0.2", "F1.2", "F2.2", "B0.2"));
  EXPECT_EQ(6, WarmupOf(schedule, 0));
  EXPECT_EQ(4, WarmupOf(schedule, 1));
  EXPECT_EQ("p=2 v=2 m=6 G=3", ToString(schedule.shape));
}

// Megatron's conditions: p <= G <= m, and m mod G either 0 or >= p.
TEST(InterleavedTest, AcceptsTheGroupsMegatronAcceptsAndRefusesTheOthersWithTheReason) {
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 12; ++m) {
      for (int g = 0; g <= m + 1; ++g) {
        const ScheduleShape shape{p, 2, m, g};
        const int group = g > 0 ? g : p;
        const bool accepted = p <= group && group <= m && (m % group == 0 || m % group >= p);
        Result<Schedule> schedule = BuiltinSchedules().Make("interleaved", shape);
        ASSERT_EQ(accepted, schedule.ok()) << ToString(shape) << ": " << schedule.status();
        if (!accepted) {
          EXPECT_THAT(schedule.status().message(),
                      AnyOf(HasSubstr("must lie in [p, m]"), HasSubstr("last group")))
              << ToString(shape);
          continue;
        }
        EXPECT_TRUE(CheckSchedule(*schedule).ok()) << ToString(shape) << ": "
                                                   << CheckSchedule(*schedule);
      }
    }
  }
  Result<Schedule> small = BuiltinSchedules().Make("interleaved", {4, 2, 8, 3});
  EXPECT_THAT(small.status().message(), HasSubstr("which must lie in [p, m] = [4, 8]"));
  Result<Schedule> remainder = BuiltinSchedules().Make("interleaved", {4, 2, 6});
  EXPECT_THAT(remainder.status().message(),
              HasSubstr("the last group of micro-batches (m mod G = 2) must be empty or at least "
                        "the ranks (4)"));
  EXPECT_FALSE(BuiltinSchedules().Make("interleaved", {2, 2, 4, -1}).ok());
}

TEST(LoweringTest, SendsFollowTheirComputeAndReceivesPrecedeIt) {
  const Schedule schedule = Make("1f1b", 2, 1, 1);
  std::vector<std::string> rank0, rank1;
  for (const Instr& instr : schedule.ranks[0]) rank0.push_back(ToString(instr));
  for (const Instr& instr : schedule.ranks[1]) rank1.push_back(ToString(instr));
  EXPECT_THAT(rank0, ElementsAre("F0.0", "SendAct(0.0>r1)", "RecvGrad(0.1<r1)", "B0.0", "Step"));
  EXPECT_THAT(rank1, ElementsAre("RecvAct(0.0<r0)", "F0.1", "B0.1", "SendGrad(0.1>r0)", "Step"));
}

TEST(LoweringTest, OneRankNeedsNoMessages) {
  for (const std::string& kind : BuiltinSchedules().names()) {
    const Schedule schedule = Make(kind, 1, kind == "1f1b" || kind == "zb-h1" ? 1 : 3, 4);
    for (const Instr& instr : schedule.ranks[0]) {
      EXPECT_FALSE(instr.is_send() || instr.is_recv()) << kind << ": " << ToString(instr);
    }
  }
}

TEST(LoweringTest, ComputeNeedingAMessageNobodySendsIsInternal) {
  // Rank 0 runs B0.0, but rank 1 never runs B0.1 to send its gradient.
  Result<Schedule> schedule =
      LowerToInstructions("broken", {2, 1, 1}, {{Instr::Backward(0, 0)}, {Instr::Forward(0, 1)}});
  ASSERT_FALSE(schedule.ok());
  EXPECT_EQ(StatusCode::kInternal, schedule.status().code());
  EXPECT_THAT(schedule.status().message(), HasSubstr("rank 0 instruction 0 (B0.0)"));
  EXPECT_THAT(schedule.status().message(), HasSubstr("RecvGrad(0.1<r1)"));
}

}  // namespace
}  // namespace ember::pipeline
