// The NCCL backend (core/nccl_communicator.h): the Communicator contract
// with one rank per local GPU, device tensors, and creation over a bootstrap
// communicator. Tests that need more GPUs than present skip, saying so.

#include "core/nccl_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/in_process_communicator.h"
#include "core/tensor.h"
#include "tests/core/communicator_contract.h"

namespace ember::test {
namespace {

using ::testing::HasSubstr;

std::vector<int> FirstDevices(int n) {
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  return devices;
}

std::string NeedsDevices(int n) {
  const int present = CudaDeviceCount();
  if (present >= n) return "";
  return "needs " + std::to_string(n) + " CUDA device(s), " + std::to_string(present) + " present";
}

std::vector<CommunicatorBackend> NcclBackends() {
  std::vector<CommunicatorBackend> backends;
  for (int ranks : {1, 2, 4}) {
    CommunicatorBackend backend;
    backend.name = "nccl_" + std::to_string(ranks);
    backend.ranks = ranks;
    backend.make = [](int n, const CommunicatorOptions& options) {
      NcclCommunicatorOptions nccl;
      nccl.communicator = options;
      return NewLocalNcclCommunicators(FirstDevices(n), nccl);
    };
    backend.unavailable = &NeedsDevices;
    backend.timeout_names_missing_rank = false;
    backend.abort_reaches_peers = false;
    backends.push_back(backend);
  }
  return backends;
}

INSTANTIATE_TEST_SUITE_P(Nccl, CommunicatorContractTest, ::testing::ValuesIn(NcclBackends()),
                         BackendName);

TEST(NcclCommunicatorTest, AllReducesDeviceTensorsOfEveryLocalDeviceInRankOrder) {
  const int n = CudaDeviceCount();
  // With one rank an all-reduce is the identity, which an all-reduce that
  // does nothing passes too.
  if (n < 2) GTEST_SKIP() << "needs two CUDA devices (" << n << " present)";
  auto comms = NewLocalNcclCommunicators(FirstDevices(n));
  ASSERT_TRUE(comms.ok()) << comms.status();
  constexpr int64_t kCount = 1000;
  auto value = [](int rank, int64_t i) { return (i % 2 ? 1e8f : 1.0f) * (rank + 1) + i; };
  OnEveryRank(*comms, [&](Communicator& comm) {
    const int d = comm.rank();
    auto stream = CudaStream::Create(d);
    ASSERT_TRUE(stream.ok()) << stream.status();
    Tensor host = Tensor::Empty({kCount});
    for (int64_t i = 0; i < kCount; ++i) host.data<float>()[i] = value(d, i);
    auto buffer = Tensor::Allocate({kCount}, DType::kF32, Device::Cuda(d));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE((*stream)->CopyToDevice(host.raw_data(), buffer->raw_data(), host.nbytes()).ok());
    ASSERT_TRUE((*stream)->Synchronize().ok());  // Inputs must be ready before the call.
    ASSERT_TRUE(comm.AllReduce(*buffer, *buffer).ok());
    ASSERT_TRUE((*stream)->CopyToHost(buffer->raw_data(), host.raw_data(), host.nbytes()).ok());
    ASSERT_TRUE((*stream)->Synchronize().ok());
    for (int64_t i = 0; i < kCount; ++i) {
      float expected = value(0, i);
      for (int r = 1; r < n; ++r) expected += value(r, i);
      ASSERT_EQ(0, std::memcmp(&expected, host.data<float>() + i, sizeof(float)))
          << "element " << i << " on cuda:" << d;
    }
  });
}

TEST(NcclCommunicatorTest, ABootstrapCommunicatorCarriesTheNcclId) {
  const int n = CudaDeviceCount();
  if (n == 0) GTEST_SKIP() << "needs a CUDA device (none present)";
  auto bootstrap = NewInProcessCommunicators(n);
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  OnEveryRank(*bootstrap, [&](Communicator& boot) {
    auto comm = NewNcclCommunicator(boot, /*device=*/boot.rank());
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ(boot.rank(), (*comm)->rank());
    EXPECT_EQ(n, (*comm)->size());
    std::vector<int64_t> sum = {boot.rank() + 1};
    ASSERT_TRUE((*comm)->AllReduce(sum, sum).ok());
    EXPECT_EQ(std::vector<int64_t>{int64_t{n} * (n + 1) / 2}, sum);
  });
}

TEST(NcclCommunicatorTest, AnAbsentDeviceIsFailedPrecondition) {
  auto comms = NewLocalNcclCommunicators({CudaDeviceCount()});
  EXPECT_EQ(StatusCode::kFailedPrecondition, comms.status().code()) << comms.status();
}

TEST(NcclCommunicatorTest, ARankWithoutItsDeviceFailsEveryRankOfTheBootstrap) {
  auto bootstrap = NewInProcessCommunicators(2);
  ASSERT_TRUE(bootstrap.ok()) << bootstrap.status();
  OnEveryRank(*bootstrap, [&](Communicator& boot) {
    // Rank 1 asks for a device that is not there.
    const int device = boot.rank() == 0 ? 0 : CudaDeviceCount();
    auto comm = NewNcclCommunicator(boot, device);
    EXPECT_EQ(StatusCode::kFailedPrecondition, comm.status().code()) << comm.status();
    if (CudaCompiledIn() && CudaDeviceCount() > 0 && boot.rank() == 0) {
      EXPECT_THAT(comm.status().message(), HasSubstr("rank 1 cannot use its CUDA device"));
    }
  });
}

TEST(NcclCommunicatorTest, WithoutCudaEveryFactorySaysSo) {
  if (CudaCompiledIn()) GTEST_SKIP() << "Ember was built with CUDA";
  auto comms = NewLocalNcclCommunicators({0});
  EXPECT_EQ(StatusCode::kFailedPrecondition, comms.status().code());
  EXPECT_THAT(comms.status().message(), HasSubstr("built without CUDA"));
}

TEST(NcclCommunicatorTest, RejectsRepeatedDevicesAndBadTimeouts) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "needs a CUDA device (none present)";
  EXPECT_EQ(StatusCode::kInvalidArgument, NewLocalNcclCommunicators({0, 0}).status().code());
  NcclCommunicatorOptions options;
  options.communicator.timeout_seconds = 0;
  EXPECT_EQ(StatusCode::kInvalidArgument, NewLocalNcclCommunicators({0}, options).status().code());
}

}  // namespace
}  // namespace ember::test
