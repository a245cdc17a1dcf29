#include "pipeline/schedule_checker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule.h"

namespace ember::pipeline {
namespace {

using ::testing::HasSubstr;

Schedule Make(const std::string& kind, int p, int v, int m) {
  Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *std::move(schedule);
}

// The index of `text` (ToString of an instruction) in rank `rank`'s list.
size_t IndexOf(const Schedule& schedule, int rank, const std::string& text) {
  const std::vector<Instr>& list = schedule.ranks[static_cast<size_t>(rank)];
  for (size_t i = 0; i < list.size(); ++i) {
    if (ToString(list[i]) == text) return i;
  }
  ADD_FAILURE() << "rank " << rank << " has no " << text;
  return 0;
}

void Erase(Schedule& schedule, int rank, const std::string& text) {
  std::vector<Instr>& list = schedule.ranks[static_cast<size_t>(rank)];
  list.erase(list.begin() + static_cast<std::ptrdiff_t>(IndexOf(schedule, rank, text)));
}

std::string Rejection(const Schedule& schedule) {
  const Status status = CheckSchedule(schedule);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  return status.message();
}

TEST(ScheduleCheckerTest, AcceptsEveryBuiltinScheduleOverAGrid) {
  int checked = 0;
  for (const std::string& kind : BuiltinSchedules().names()) {
    for (int p = 1; p <= 4; ++p) {
      for (int v = 1; v <= 3; ++v) {
        for (int m = 1; m <= 12; ++m) {
          Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
          if (!schedule.ok()) {
            // Only the documented requirements may refuse a shape.
            EXPECT_TRUE(((kind == "1f1b" || kind == "zb-h1") && v != 1) ||
                        (kind == "interleaved" && m % p != 0))
                << kind << " " << ToString(ScheduleShape{p, v, m}) << ": " << schedule.status();
            continue;
          }
          EXPECT_TRUE(CheckSchedule(*schedule).ok()) << CheckSchedule(*schedule);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(3 * 4 * 12 /*gpipe*/ + 4 * 12 /*1f1b*/ + 3 * (12 + 6 + 4 + 3) /*interleaved*/ +
                4 * 12 /*zb-h1*/,
            checked);
}

// In a schedule that splits its backwards, each backward needs its weight
// gradients, after it, once.
TEST(ScheduleCheckerTest, WeightGradientsComeAfterTheirBackwardOnceEach) {
  Schedule missing = Make("zb-h1", 2, 1, 3);
  Erase(missing, 1, "W2.1");
  EXPECT_THAT(Rejection(missing), HasSubstr("rank 1 never runs W2.1"));

  Schedule early = Make("zb-h1", 2, 1, 3);
  std::vector<Instr>& list = early.ranks[0];
  const size_t w = IndexOf(early, 0, "W1.0"), b = IndexOf(early, 0, "B1.0");
  std::swap(list[w], list[b]);
  EXPECT_THAT(Rejection(early), HasSubstr("(W1.0): runs before B1.0"));

  Schedule twice = Make("zb-h1", 2, 1, 3);
  twice.ranks[1].insert(twice.ranks[1].end() - 1, Instr::BackwardWeight(0, 1));
  EXPECT_THAT(Rejection(twice), HasSubstr("duplicate of instruction"));

  Schedule elsewhere = Make("zb-h1", 2, 1, 3);
  elsewhere.ranks[0].insert(elsewhere.ranks[0].end() - 1, Instr::BackwardWeight(0, 1));
  EXPECT_THAT(Rejection(elsewhere), HasSubstr("chunk 1 lives on rank 1"));
}

TEST(ScheduleCheckerTest, SendBeforeReceiveSwappedIsADeadlockNamingEachStuckRank) {
  Schedule schedule = Make("1f1b", 2, 1, 1);
  // Rank 0 now waits for the gradient before it sends the activation that
  // rank 1 needs to make it.
  std::swap(schedule.ranks[0][1], schedule.ranks[0][2]);
  const std::string message = Rejection(schedule);
  EXPECT_THAT(message, HasSubstr("deadlock"));
  EXPECT_THAT(message, HasSubstr("rank 0 waits at instruction 1 (RecvGrad(0.1<r1))"));
  EXPECT_THAT(message, HasSubstr("rank 1 waits at instruction 0 (RecvAct(0.0<r0))"));
}

TEST(ScheduleCheckerTest, ReceivesInAnotherOrderThanTheSendsAreRejected) {
  // Rank 1 receives micro-batch 1's activation first; rank 0 sent 0 first.
  Schedule schedule = Make("gpipe", 2, 1, 2);
  const size_t first = IndexOf(schedule, 1, "RecvAct(0.0<r0)");
  const size_t second = IndexOf(schedule, 1, "RecvAct(1.0<r0)");
  std::vector<Instr>& rank1 = schedule.ranks[1];
  const Instr moved = rank1[second];
  rank1.erase(rank1.begin() + static_cast<std::ptrdiff_t>(second));
  rank1.insert(rank1.begin() + static_cast<std::ptrdiff_t>(first), moved);
  EXPECT_THAT(Rejection(schedule),
              HasSubstr("rank 1 instruction 0 (RecvAct(1.0<r0)): the next message from rank 0 "
                        "is SendAct(0.0>r1): sends and receives are in different orders"));
}

TEST(ScheduleCheckerTest, AMissingBackwardIsRejectedNamingTheRank) {
  Schedule schedule = Make("1f1b", 2, 1, 4);
  Erase(schedule, 0, "B1.0");
  EXPECT_THAT(Rejection(schedule), HasSubstr("rank 0 never runs B1.0"));
}

TEST(ScheduleCheckerTest, ASendOfAMissingBackwardRunsBeforeIt) {
  Schedule schedule = Make("interleaved", 2, 2, 4);
  Erase(schedule, 1, "B2.1");
  const size_t send = IndexOf(schedule, 1, "SendGrad(2.1>r0)");
  EXPECT_THAT(Rejection(schedule), HasSubstr("rank 1 instruction " + std::to_string(send) +
                                             " (SendGrad(2.1>r0)): runs before B2.1"));
}

TEST(ScheduleCheckerTest, ADuplicateForwardIsRejectedNamingBothPlaces) {
  Schedule schedule = Make("interleaved", 2, 2, 4);
  const size_t first = IndexOf(schedule, 0, "F2.2");
  std::vector<Instr>& rank0 = schedule.ranks[0];
  rank0.insert(rank0.end() - 1, rank0[first]);
  EXPECT_THAT(Rejection(schedule),
              HasSubstr("rank 0 instruction " + std::to_string(rank0.size() - 2) +
                        " (F2.2): duplicate of instruction " + std::to_string(first)));
}

TEST(ScheduleCheckerTest, BackwardsOutOfReverseChunkOrderAreRejected) {
  // One rank, two chunks: B0.0 needs B0.1's gradient first.
  Schedule schedule = Make("gpipe", 1, 2, 1);
  ASSERT_EQ("B0.1", ToString(schedule.ranks[0][2]));
  std::swap(schedule.ranks[0][2], schedule.ranks[0][3]);
  EXPECT_THAT(Rejection(schedule), HasSubstr("rank 0 instruction 2 (B0.0): runs before B0.1"));
}

TEST(ScheduleCheckerTest, ABackwardBeforeItsForwardIsRejected) {
  Schedule schedule = Make("1f1b", 1, 1, 2);
  std::swap(schedule.ranks[0][0], schedule.ranks[0][1]);  // B0.0 F0.0
  EXPECT_THAT(Rejection(schedule), HasSubstr("rank 0 instruction 0 (B0.0): runs before F0.0"));
}

TEST(ScheduleCheckerTest, ComputeOnTheWrongRankIsRejected) {
  Schedule schedule = Make("1f1b", 2, 1, 1);
  schedule.ranks[0].insert(schedule.ranks[0].begin(), Instr::Forward(0, 1));
  EXPECT_THAT(Rejection(schedule),
              HasSubstr("rank 0 instruction 0 (F0.1): chunk 1 lives on rank 1"));
}

TEST(ScheduleCheckerTest, AMessageToTheWrongPeerIsRejected) {
  Schedule schedule = Make("1f1b", 3, 1, 1);
  Instr& send = schedule.ranks[0][IndexOf(schedule, 0, "SendAct(0.0>r1)")];
  send.peer = 2;
  EXPECT_THAT(Rejection(schedule), HasSubstr("(SendAct(0.0>r2)): the peer must be rank 1"));
}

TEST(ScheduleCheckerTest, TheOptimizerStepMustComeLastAndOnce) {
  Schedule early = Make("1f1b", 2, 1, 2);
  early.ranks[1].insert(early.ranks[1].begin(), Instr::OptimizerStep());
  EXPECT_THAT(Rejection(early),
              HasSubstr("rank 1 instruction 0 (Step): the optimizer step must be the rank's last"));
  Schedule missing = Make("1f1b", 2, 1, 2);
  missing.ranks[1].pop_back();
  EXPECT_THAT(Rejection(missing), HasSubstr("rank 1 does not end with the optimizer step"));
}

TEST(ScheduleCheckerTest, AReceiveWhoseSendIsMissingLeavesItsRankStuck) {
  Schedule schedule = Make("1f1b", 2, 1, 2);
  Erase(schedule, 0, "SendAct(1.0>r1)");
  const std::string message = Rejection(schedule);
  EXPECT_THAT(message, HasSubstr("deadlock"));
  EXPECT_THAT(message, HasSubstr("rank 1 waits at instruction " +
                                 std::to_string(IndexOf(schedule, 1, "RecvAct(1.0<r0)")) +
                                 " (RecvAct(1.0<r0))"));
}

TEST(ScheduleCheckerTest, WrongNumberOfRanksIsRejected) {
  Schedule schedule = Make("gpipe", 2, 1, 1);
  schedule.ranks.pop_back();
  EXPECT_THAT(Rejection(schedule), HasSubstr("1 instruction lists for 2 ranks"));
}

// With sends that wait for their receive (NCCL), grouped as the executor
// posts them: every schedule with one chunk per rank finishes, over a grid;
// some with more do not (tests/pipeline/stage_executor_test.cc runs both
// kinds over such a backend).
TEST(ScheduleCheckerTest, RendezvousSendsFinishWithOneChunkPerRank) {
  int refused = 0;
  for (const std::string kind : {"gpipe", "1f1b", "interleaved"}) {
    for (int p = 1; p <= 4; ++p) {
      for (int v = 1; v <= 3; ++v) {
        for (int m = 1; m <= 12; ++m) {
          Result<Schedule> schedule = BuiltinSchedules().Make(kind, {p, v, m});
          if (!schedule.ok()) continue;
          const Status status = CheckRendezvous(*schedule);
          if (p == 1 || v == 1) {
            EXPECT_TRUE(status.ok()) << kind << " p=" << p << " v=" << v << " m=" << m << ": "
                                     << status;
          }
          refused += !status.ok();
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_FALSE(CheckRendezvous(*BuiltinSchedules().Make("gpipe", {2, 2, 4})).ok());
  EXPECT_TRUE(CheckRendezvous(*BuiltinSchedules().Make("interleaved", {2, 2, 2})).ok());
}

TEST(ScheduleCheckerTest, ARendezvousDeadlockNamesEveryStuckGroup) {
  const Schedule schedule = *BuiltinSchedules().Make("interleaved", {2, 2, 4});
  ASSERT_TRUE(CheckSchedule(schedule).ok());
  const Status status = CheckRendezvous(schedule);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("with sends that wait for their receive, deadlock"));
  EXPECT_THAT(status.message(), HasSubstr("rank 0 at instructions"));
  EXPECT_THAT(status.message(), HasSubstr("rank 1 at instructions"));
}

}  // namespace
}  // namespace ember::pipeline
