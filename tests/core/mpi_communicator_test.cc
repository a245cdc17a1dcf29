// The MPI backend (core/mpi_communicator.h): the Communicator contract with
// one rank per process, and what the backend promises beyond it. CTest runs
// this program under `mpirun -np 2` and `-np 3`, and once without mpirun (a
// world of one, where tests that need peers skip). Every process runs the
// same tests in the same order; rank 0 prints gtest's report, the other
// ranks print their failures only, and every process exits non-zero if any
// rank failed.

#include "core/mpi_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/communicator.h"
#include "tests/core/communicator_contract.h"

namespace ember::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Set by main before the tests are registered.
MpiWorld g_world;
// Keeps the processes in step between tests; made before any test's group.
Communicator* g_sync = nullptr;
std::string g_shared_dir;

// A failed step of a test must not leave the other processes waiting for
// minutes: bounds every test group's waits, whatever the test asked for.
constexpr double kMaxTestTimeoutSeconds = 30;

void SyncProcesses() {
  const Status status = g_sync->Barrier();
  ASSERT_TRUE(status.ok()) << "the processes lost step: " << status;
}

Result<Communicators> MakeMpiGroup(int ranks, const CommunicatorOptions& options) {
  CommunicatorOptions bounded = options;
  bounded.timeout_seconds = std::min(options.timeout_seconds, kMaxTestTimeoutSeconds);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, NewMpiCommunicator(bounded));
  if (comm->size() != ranks) {
    return Status::Internal("the MPI group has ", comm->size(), " ranks, the test expects ", ranks);
  }
  Communicators comms(ranks);
  const int rank = comm->rank();
  comms[rank] = std::move(comm);
  return comms;
}

std::vector<CommunicatorBackend> MpiBackends() {
  CommunicatorBackend backend;
  backend.name = "mpi_" + std::to_string(g_world.size);
  backend.ranks = g_world.size;
  backend.make = &MakeMpiGroup;
  if (g_world.size > 1) {
    backend.sync_processes = &SyncProcesses;
    backend.shared_dir = g_shared_dir;
  }
  return {backend};
}

INSTANTIATE_TEST_SUITE_P(Mpi, CommunicatorContractTest, ::testing::ValuesIn(MpiBackends()),
                         BackendName);

// The beyond-the-contract tests, on a group of the whole world.
class MpiCommunicatorTest : public ::testing::Test {
 protected:
  Communicators MakeGroup(double timeout_seconds = kMaxTestTimeoutSeconds) {
    CommunicatorOptions options;
    options.timeout_seconds = timeout_seconds;
    auto comms = MakeMpiGroup(g_world.size, options);
    EXPECT_TRUE(comms.ok()) << comms.status();
    return comms.ok() ? std::move(comms).value() : Communicators();
  }
  // Runs body on this process's rank, then waits for the other processes.
  void OnMyRank(const Communicators& comms, const std::function<void(Communicator&)>& body) {
    OnEveryRank(comms, body);
    if (g_world.size > 1) SyncProcesses();
  }
  int size() const { return g_world.size; }
};

TEST_F(MpiCommunicatorTest, InitMpiIsIdempotentAndGivesTheWorld) {
  auto again = InitMpi(nullptr, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(g_world.rank, again->rank);
  EXPECT_EQ(g_world.size, again->size);
  EXPECT_EQ(g_world.launched_by_mpirun, again->launched_by_mpirun);
}

TEST_F(MpiCommunicatorTest, RejectsBadTimeouts) {
  CommunicatorOptions options;
  options.timeout_seconds = 0;
  EXPECT_EQ(StatusCode::kInvalidArgument, NewMpiCommunicator(options).status().code());
}

TEST_F(MpiCommunicatorTest, DeviceBuffersAreInvalidArguments) {
  Communicators comms = MakeGroup();
  OnMyRank(comms, [&](Communicator& comm) {
    float value = 0.0f;
    const Status status = comm.AllReduce(ConstCommBuffer(&value, 1, Device::Cuda(0)),
                                         CommBuffer(&value, 1, Device::Cuda(0)));
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
    EXPECT_THAT(status.message(), HasSubstr("host buffers"));
  });
}

TEST_F(MpiCommunicatorTest, SendsDoNotWaitForRecvsAndRecvMatchesTagsOutOfOrder) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  OnMyRank(comms, &SendAroundTheRingThenRecvTagsOutOfOrder);
}

TEST_F(MpiCommunicatorTest, RecvOfAnotherSizeOrDTypeNamesBothAndDropsTheMessage) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  OnMyRank(comms, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      ASSERT_TRUE(comm.Send(std::vector<float>(3), 1, 0).ok());
      ASSERT_TRUE(comm.Send(std::vector<float>(3), 1, 0).ok());
      ASSERT_TRUE(comm.Send(std::vector<float>{7.0f}, 1, 0).ok());
    } else if (comm.rank() == 1) {
      std::vector<float> four(4);
      const Status wrong_count = comm.Recv(four, 0, 0);
      EXPECT_EQ(StatusCode::kInvalidArgument, wrong_count.code());
      EXPECT_THAT(
          wrong_count.message(),
          HasSubstr("recv from rank 0 (tag 0): rank 0 sent 3 f32 but rank 1 expects 4 f32"));
      std::vector<int32_t> three(3);
      EXPECT_THAT(comm.Recv(three, 0, 0).message(), HasSubstr("expects 3 i32"));
      std::vector<float> one(1);
      ASSERT_TRUE(comm.Recv(one, 0, 0).ok());
      EXPECT_EQ(std::vector<float>{7.0f}, one);
    }
  });
}

TEST_F(MpiCommunicatorTest, DifferentCollectivesAtOnePositionFailOnEveryRankNamingBoth) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  OnMyRank(comms, [&](Communicator& comm) {
    std::vector<float> data(4, 1.0f), gathered(4 * comm.size());
    const Status status =
        comm.rank() == 0 ? comm.AllReduce(data, data) : comm.AllGather(data, gathered);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("#1: rank"), HasSubstr("all_reduce of 4 f32"),
                                        HasSubstr("all_gather of 4 f32")));
    // Every rank consumed collective #1, so they are still in step.
    EXPECT_TRUE(comm.Barrier().ok());
    std::vector<double> other(comm.rank() == 0 ? 2 : 3);
    const Status count = comm.AllReduce(other, other);
    EXPECT_EQ(StatusCode::kInvalidArgument, count.code()) << count;
    EXPECT_THAT(count.message(), HasSubstr("all_reduce #3: rank"));
    const Status root = comm.Broadcast(other, comm.rank() == 0 ? 0 : 1);
    EXPECT_EQ(StatusCode::kInvalidArgument, root.code()) << root;
    EXPECT_THAT(root.message(), HasSubstr("from root"));
  });
}

TEST_F(MpiCommunicatorTest, InvalidArgumentsOnOneRankFailItsPeersNamingIt) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  const int bad = size() - 1;
  OnMyRank(comms, [&](Communicator& comm) {
    std::vector<float> in(4), out(comm.rank() == bad ? 5 : 4 * comm.size());
    const Status status = comm.AllGather(in, out);
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
    if (comm.rank() == bad) {
      EXPECT_EQ("all_gather #1: out (5 f32 on cpu) must hold " + std::to_string(comm.size()) +
                    " x in (4 f32 on cpu)",
                status.message());
    } else {
      EXPECT_THAT(status.message(), HasSubstr("all_gather #1: rank " + std::to_string(bad) +
                                              " passed invalid arguments"));
    }
    EXPECT_TRUE(comm.Barrier().ok()) << "the ranks stay in step";
  });
}

TEST_F(MpiCommunicatorTest, AllToAllVCountsThatDoNotPairUpFailOnTheReceiver) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  OnMyRank(comms, [&](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    // Every rank sends one element to every rank; rank 1 expects two from rank 0.
    std::vector<int64_t> in(n, r), send_counts(n, 1), recv_counts(n, 1);
    if (r == 1) recv_counts[0] = 2;
    std::vector<int64_t> out(r == 1 ? n + 1 : n);
    const Status status = comm.AllToAllV(in, send_counts, out, recv_counts);
    if (r == 1) {
      EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
      EXPECT_THAT(status.message(),
                  HasSubstr("rank 0 sends 1 elements to rank 1 but rank 1 expects 2"));
    }
  });
}

TEST_F(MpiCommunicatorTest, CommunicatorsOnSeveralThreadsAreIndependentChannels) {
  // As a training step uses them: the exchanges on one thread, the dense
  // all-reduce on another, concurrently.
  Communicators keys = MakeGroup();
  Communicators dense = MakeGroup();
  const int n = size();
  ASSERT_EQ(static_cast<size_t>(n), keys.size());
  Communicator& key_comm = *keys[g_world.rank];
  Communicator& dense_comm = *dense[g_world.rank];
  const int r = g_world.rank;
  std::thread key_thread([&] {
    for (int step = 0; step < 100; ++step) {
      std::vector<uint64_t> mine(n, static_cast<uint64_t>(r * 1000 + step)), theirs(n);
      const std::vector<int64_t> ones(n, 1);
      ASSERT_TRUE(key_comm.AllToAllV(mine, ones, theirs, ones).ok()) << step;
      for (int q = 0; q < n; ++q) ASSERT_EQ(static_cast<uint64_t>(q * 1000 + step), theirs[q]);
    }
  });
  std::thread dense_thread([&] {
    for (int step = 0; step < 100; ++step) {
      std::vector<double> grads = {1.0 * r, 0.5 * step};
      ASSERT_TRUE(dense_comm.AllReduce(grads, grads).ok()) << step;
      ASSERT_EQ(0.5 * n * (n - 1), grads[0]);
      ASSERT_EQ(0.5 * step * n, grads[1]);
    }
  });
  key_thread.join();
  dense_thread.join();
  if (n > 1) SyncProcesses();
}

TEST_F(MpiCommunicatorTest, ARankThatLeavesAfterSendingDoesNotFailItsPeer) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  if (g_world.rank == 0) {
    ASSERT_TRUE(comms[0]->Send(std::vector<float>{1.0f, 2.0f}, 1, 4).ok());
    ASSERT_TRUE(comms[0]->Barrier().ok());
    comms[0].reset();  // Leaves while rank 1 has not received yet.
  }
  if (g_world.rank == 1) {
    ASSERT_TRUE(comms[1]->Barrier().ok());
    std::vector<float> data(2);
    const Status first = comms[1]->Recv(data, 0, 4);
    ASSERT_TRUE(first.ok()) << first;
    EXPECT_EQ((std::vector<float>{1.0f, 2.0f}), data);
    const Status second = comms[1]->Recv(data, 0, 4);
    EXPECT_EQ(StatusCode::kUnavailable, second.code()) << second;
    EXPECT_THAT(second.message(),
                HasSubstr("recv from rank 0 (tag 4): rank 0 left the group: Cancelled: its "
                          "communicator was destroyed"));
  }
  if (g_world.rank > 1) {
    ASSERT_TRUE(comms[g_world.rank]->Barrier().ok());
  }
  SyncProcesses();
}

TEST_F(MpiCommunicatorTest, TagsAboveTheLimitAreInvalidArguments) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  Communicators comms = MakeGroup();
  OnMyRank(comms, [&](Communicator& comm) {
    const Status status = comm.Send(std::vector<float>(1), (comm.rank() + 1) % comm.size(),
                                    std::numeric_limits<int>::max());
    EXPECT_EQ(StatusCode::kInvalidArgument, status.code()) << status;
  });
}

// Shows every failure of a rank other than 0, prefixed with its rank, where
// gtest's own report would interleave with rank 0's.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(),
                   info.name());
    }
  }

 private:
  const int rank_;
};

// Rank 0 makes a directory every rank can see (the ranks share a host in
// tests) and sends them its name.
Result<std::string> MakeSharedDir(Communicator& sync) {
  constexpr int kMaxPath = 512;
  std::vector<int32_t> name(kMaxPath, 0);
  if (sync.rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ember_mpi_test_XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr || pattern.size() >= kMaxPath) {
      return Status::IOError("cannot make a temporary directory from ", pattern);
    }
    std::copy(pattern.begin(), pattern.end(), name.begin());
  }
  EMBER_RETURN_IF_ERROR(sync.Broadcast(name, 0));
  std::string dir;
  for (int32_t c : name) {
    if (c == 0) break;
    dir.push_back(static_cast<char>(c));
  }
  return dir;
}

int RunTests(int argc, char** argv) {
  auto world = InitMpi(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "InitMpi: %s\n", world.status().ToString().c_str());
    return 2;
  }
  g_world = *world;
  CommunicatorOptions sync_options;
  sync_options.timeout_seconds = 60;
  auto sync = NewMpiCommunicator(sync_options);
  if (!sync.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g_world.rank, sync.status().ToString().c_str());
    return 2;
  }
  g_sync = sync->get();
  if (g_world.size > 1) {
    auto dir = MakeSharedDir(**sync);
    if (!dir.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", g_world.rank, dir.status().ToString().c_str());
      return 2;
    }
    g_shared_dir = *dir;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (g_world.rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(g_world.rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every process learns which ranks failed, and exits non-zero if any did.
  std::vector<int32_t> failures(g_world.size, 0);
  Status gathered = (*sync)->AllGather(std::vector<int32_t>{failed}, failures);
  int any = failed;
  std::string failed_ranks;
  if (!gathered.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g_world.rank, gathered.ToString().c_str());
    any = 1;
  }
  for (int r = 0; r < g_world.size; ++r) {
    if (failures[r] == 0) continue;
    any = 1;
    failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  if (g_world.rank == 0) {
    if (!failed_ranks.empty()) std::fprintf(stderr, "FAILED on rank(s) %s\n", failed_ranks.c_str());
    if (!g_shared_dir.empty()) std::filesystem::remove_all(g_shared_dir);
  }
  g_sync = nullptr;
  sync->reset();
  if (Status status = FinalizeMpi(); !status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", g_world.rank, status.ToString().c_str());
    return 2;
  }
  return any;
}

}  // namespace
}  // namespace ember::test

int main(int argc, char** argv) { return ember::test::RunTests(argc, argv); }
