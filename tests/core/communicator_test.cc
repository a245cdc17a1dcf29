// The in-process backend: the Communicator contract with 1, 2 and 4 ranks,
// and what the backend promises beyond it (core/in_process_communicator.h).

#include "core/in_process_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "tests/core/communicator_contract.h"

namespace ember::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<CommunicatorBackend> InProcessBackends() {
  std::vector<CommunicatorBackend> backends;
  for (int ranks : {1, 2, 4}) {
    CommunicatorBackend backend;
    backend.name = "in_process_" + std::to_string(ranks);
    backend.ranks = ranks;
    backend.make = [](int n, const CommunicatorOptions& options) {
      return NewInProcessCommunicators(n, options);
    };
    backends.push_back(backend);
  }
  return backends;
}

INSTANTIATE_TEST_SUITE_P(InProcess, CommunicatorContractTest,
                         ::testing::ValuesIn(InProcessBackends()), BackendName);

Communicators MakeGroup(int ranks, double timeout_seconds = 120) {
  CommunicatorOptions options;
  options.timeout_seconds = timeout_seconds;
  auto comms = NewInProcessCommunicators(ranks, options);
  EXPECT_TRUE(comms.ok()) << comms.status();
  return comms.ok() ? std::move(comms).value() : Communicators();
}

TEST(InProcessCommunicatorTest, RejectsAnEmptyGroupAndBadTimeouts) {
  EXPECT_EQ(StatusCode::kInvalidArgument, NewInProcessCommunicators(0).status().code());
  for (double timeout : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN()}) {
    CommunicatorOptions options;
    options.timeout_seconds = timeout;
    EXPECT_EQ(StatusCode::kInvalidArgument, NewInProcessCommunicators(2, options).status().code())
        << timeout;
  }
}

TEST(InProcessCommunicatorTest, RecvMatchesTagsOutOfOrderAndSendsDoNotWaitForRecvs) {
  Communicators comms = MakeGroup(3);
  OnEveryRank(comms, &SendAroundTheRingThenRecvTagsOutOfOrder);
}

TEST(InProcessCommunicatorTest, RecvOfAnotherSizeOrDTypeNamesBoth) {
  Communicators comms = MakeGroup(2);
  ASSERT_TRUE(comms[0]->Send(std::vector<float>(3), 1, 0).ok());
  ASSERT_TRUE(comms[0]->Send(std::vector<float>(3), 1, 0).ok());
  std::vector<float> four(4);
  const Status wrong_count = comms[1]->Recv(four, 0, 0);
  EXPECT_EQ(StatusCode::kInvalidArgument, wrong_count.code());
  EXPECT_THAT(wrong_count.message(), HasSubstr("rank 0 sent 3 f32 but rank 1 expects 4 f32"));
  std::vector<int32_t> three(3);
  EXPECT_THAT(comms[1]->Recv(three, 0, 0).message(), HasSubstr("expects 3 i32"));
}

TEST(InProcessCommunicatorTest, DifferentCollectivesAtOnePositionFailOnEveryRank) {
  Communicators comms = MakeGroup(2);
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<float> data(4, 1.0f), gathered(8);
    const Status status =
        comm.rank() == 0 ? comm.AllReduce(data, data) : comm.AllGather(data, gathered);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    EXPECT_THAT(status.message(),
                AllOf(HasSubstr("all_reduce of 4 f32"), HasSubstr("all_gather of 4 f32")));
    // Both consumed collective #1, so they are still in step.
    EXPECT_TRUE(comm.Barrier().ok());
  });
}

TEST(InProcessCommunicatorTest, DifferentCountsOrRootsAreMismatches) {
  Communicators comms = MakeGroup(2);
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<double> data(comm.rank() == 0 ? 2 : 3);
    const Status count = comm.AllReduce(data, data);
    EXPECT_EQ(StatusCode::kInvalidArgument, count.code()) << count;
    EXPECT_THAT(count.message(), HasSubstr("all_reduce #1: rank"));
    const Status root = comm.Broadcast(data, comm.rank());
    EXPECT_EQ(StatusCode::kInvalidArgument, root.code()) << root;
    EXPECT_THAT(root.message(), HasSubstr("from root"));
  });
}

TEST(InProcessCommunicatorTest, AllToAllVCountsThatDoNotPairUpNameSenderAndReceiver) {
  Communicators comms = MakeGroup(2);
  OnEveryRank(comms, [&](Communicator& comm) {
    // Rank 0 sends 1 element to rank 1, which expects 2.
    std::vector<int64_t> in(2), out(comm.rank() == 0 ? 1 : 3);
    const std::vector<int64_t> send_counts = {1, 1};
    const std::vector<int64_t> recv_counts =
        comm.rank() == 0 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{2, 1};
    const Status status = comm.AllToAllV(in, send_counts, out, recv_counts);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    EXPECT_THAT(status.message(),
                HasSubstr("rank 0 sends 1 elements to rank 1 but rank 1 expects 2"));
  });
}

TEST(InProcessCommunicatorTest, InvalidArgumentsOnOneRankFailItsPeersAtOnceNamingIt) {
  Communicators comms = MakeGroup(3);
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<float> in(4), out(comm.rank() == 2 ? 5 : 12);
    const Status status = comm.AllGather(in, out);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    if (comm.rank() == 2) {
      EXPECT_EQ("all_gather #1: out (5 f32 on cpu) must hold 3 x in (4 f32 on cpu)",
                status.message());
    } else {
      EXPECT_THAT(status.message(), HasSubstr("all_gather #1: rank 2 passed invalid arguments"));
    }
  });
}

TEST(InProcessCommunicatorTest, DeviceBuffersAreInvalidArguments) {
  Communicators comms = MakeGroup(1);
  float value = 0.0f;
  const Status status = comms[0]->AllReduce(ConstCommBuffer(&value, 1, Device::Cuda(0)),
                                            CommBuffer(&value, 1, Device::Cuda(0)));
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), HasSubstr("host buffers"));
}

TEST(InProcessCommunicatorTest, ATimeoutSaysWhatTheMissingRankIsDoing) {
  Communicators comms = MakeGroup(2, 0.5);
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<float> data(2);
    // A deadlock: rank 0 waits in a collective, rank 1 for a message.
    const Status status = comm.rank() == 0 ? comm.AllReduce(data, data) : comm.Recv(data, 0, 3);
    EXPECT_EQ(StatusCode::kDeadlineExceeded, status.code()) << status;
    if (comm.rank() == 0) {
      // Rank 1 may have given up already: "is waiting in" or "last called".
      EXPECT_THAT(status.message(), HasSubstr("rank 1 did not answer within 0.5 s (rank 1 "));
      EXPECT_THAT(status.message(), HasSubstr(" recv from rank 0 (tag 3))"));
    } else {
      EXPECT_THAT(status.message(), HasSubstr("recv from rank 0 (tag 3): rank 0 did not answer"));
    }
  });
}

TEST(InProcessCommunicatorTest, ALateRankGetsTheTimeoutAndLaterCollectivesSucceed) {
  Communicators comms = MakeGroup(2, 0.5);
  std::vector<int64_t> data = {1};
  const Status early = comms[0]->AllReduce(data, data);
  EXPECT_EQ(StatusCode::kDeadlineExceeded, early.code()) << early;
  OnEveryRank(comms, [&](Communicator& comm) {
    std::vector<int64_t> mine = {comm.rank() + 1};
    if (comm.rank() == 1) {
      EXPECT_EQ(early, comm.AllReduce(mine, mine)) << "rank 1 reaches all_reduce #1 too late";
    }
    ASSERT_TRUE(comm.AllReduce(mine, mine).ok());
    EXPECT_EQ(std::vector<int64_t>{3}, mine);
  });
}

TEST(InProcessCommunicatorTest, SendToARankThatLeftIsUnavailable) {
  Communicators comms = MakeGroup(2);
  comms[1]->Abort(Status::Internal("out of memory"));
  const Status status = comms[0]->Send(std::vector<float>(1), 1, 0);
  EXPECT_EQ(StatusCode::kUnavailable, status.code());
  EXPECT_THAT(status.message(),
              HasSubstr("send to rank 1 (tag 0): rank 1 left the group: Internal: out of memory"));
}

}  // namespace
}  // namespace ember::test
