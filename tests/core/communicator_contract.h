#pragma once

// The contract of core/communicator.h as a value-parameterized suite: each
// backend (in-process here; NCCL in tests/gpu; MPI in mpi_communicator_test.cc)
// instantiates it with one line:
//
//   INSTANTIATE_TEST_SUITE_P(InProcess, CommunicatorContractTest,
//                            ::testing::ValuesIn(InProcessBackends()), BackendName);
//
// A backend's process may hold every rank of the group (in-process, NCCL on
// local devices: one thread per rank) or only some (MPI: one rank per
// process, every process running the same tests in the same order). Tests
// therefore run their per-rank code through OnEveryRank, compute what they
// check about a rank inside the body on that rank, and find a rank's
// communicator null when another process holds it.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"

namespace ember::test {

using Communicators = std::vector<std::unique_ptr<Communicator>>;

// One backend with a fixed number of ranks.
struct CommunicatorBackend {
  std::string name;  // A test-name suffix: letters, digits and '_'.
  int ranks = 1;
  // Makes a group of `ranks`: a vector of `ranks` entries, entry r being rank
  // r's communicator, or null where another process holds rank r.
  std::function<Result<Communicators>(int ranks, const CommunicatorOptions& options)> make;
  // For backends whose ranks live in several processes: returns once every
  // process has called it (a barrier outside the communicators under test),
  // as joining the rank threads does in one process. Null when this process
  // holds every rank.
  std::function<void()> sync_processes;
  // With sync_processes: a directory that every process of the group can
  // read and write, where tests leave marks that other ranks check.
  std::string shared_dir;
  // Why this host cannot run the backend ("needs 2 CUDA devices, 1 present"),
  // or empty when it can. Null: always available.
  std::function<std::string(int ranks)> unavailable;
  // Whether a collective's timeout names the rank that did not join (NCCL
  // cannot tell which rank is missing; a Recv's timeout always names its peer).
  bool timeout_names_missing_rank = true;
  // Whether peers of a rank that aborts fail at once with Unavailable, or
  // only at their own timeout (NCCL).
  bool abort_reaches_peers = true;
};

void PrintTo(const CommunicatorBackend& backend, std::ostream* out);
// The test-name suffix of an instantiation.
std::string BackendName(const ::testing::TestParamInfo<CommunicatorBackend>& info);

// Runs body(comm) for every rank this process holds (every non-null entry)
// at once, each on its own thread, and joins them.
void OnEveryRank(const Communicators& comms, const std::function<void(Communicator&)>& body);

// A body for OnEveryRank on backends whose Send does not wait for the
// matching Recv (in-process, MPI; NCCL's does): every rank sends two tagged
// messages to the next rank of the ring before it receives the previous
// rank's, the second tag first, and checks what arrives.
void SendAroundTheRingThenRecvTagsOutOfOrder(Communicator& comm);

class CommunicatorContractTest : public ::testing::TestWithParam<CommunicatorBackend> {
 protected:
  // Skips the test when the backend is unavailable here.
  void SetUp() override;
  // The group of the backend's size; fails the test (and returns an empty
  // vector) if it cannot be made.
  Communicators MakeGroup(const CommunicatorOptions& options = {});
  int ranks() const { return GetParam().ranks; }
  // The free OnEveryRank, then a wait for the other processes of the group
  // (sync_processes): tests call this one, so that no process destroys its
  // communicators while another still runs the body.
  void OnEveryRank(const Communicators& comms, const std::function<void(Communicator&)>& body);
};

}  // namespace ember::test
