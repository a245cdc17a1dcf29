#pragma once

// The contract of core/communicator.h as a value-parameterized suite: each
// backend (in-process here; NCCL in tests/gpu; MPI later) instantiates it
// with one line:
//
//   INSTANTIATE_TEST_SUITE_P(InProcess, CommunicatorContractTest,
//                            ::testing::ValuesIn(InProcessBackends()), BackendName);

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
  // Makes `ranks` communicators, entry r being rank r.
  std::function<Result<Communicators>(int ranks, const CommunicatorOptions& options)> make;
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

// Runs body(comm) for every rank at once, each on its own thread, and joins them.
void OnEveryRank(const Communicators& comms, const std::function<void(Communicator&)>& body);

class CommunicatorContractTest : public ::testing::TestWithParam<CommunicatorBackend> {
 protected:
  // Skips the test when the backend is unavailable here.
  void SetUp() override;
  // The group of the backend's size; fails the test (and returns an empty
  // vector) if it cannot be made.
  Communicators MakeGroup(const CommunicatorOptions& options = {});
  int ranks() const { return GetParam().ranks; }
};

}  // namespace ember::test
