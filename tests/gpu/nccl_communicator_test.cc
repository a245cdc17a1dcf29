#include "pipeline/nccl_communicator.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/device.h"

namespace ember::pipeline {
namespace {

TEST(LocalNcclCommunicatorTest, AllReduceSumsAcrossEveryLocalDevice) {
  const int n = CudaDeviceCount();
  if (n == 0) GTEST_SKIP() << "needs a CUDA device (none present)";
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  auto comm = LocalNcclCommunicator::Create(devices);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<std::unique_ptr<CudaStream>> owned;
  std::vector<CudaStream*> streams;
  std::vector<Tensor> buffers;
  const int64_t count = 1000;
  for (int d = 0; d < n; ++d) {
    auto stream = CudaStream::Create(d);
    ASSERT_TRUE(stream.ok());
    streams.push_back(stream->get());
    owned.push_back(std::move(*stream));
    Tensor host = Tensor::Empty({count});
    for (int64_t i = 0; i < count; ++i) host.data<float>()[i] = static_cast<float>(d + 1) * i;
    auto buffer = Tensor::Allocate({count}, DType::kF32, Device::Cuda(d));
    ASSERT_TRUE(buffer.ok());
    ASSERT_TRUE(streams[d]->CopyToDevice(host.raw_data(), buffer->raw_data(), host.nbytes()).ok());
    buffers.push_back(*buffer);
  }
  ASSERT_TRUE((*comm)->AllReduceSum(buffers, streams).ok());
  const float factor = n * (n + 1) / 2.0f;
  for (int d = 0; d < n; ++d) {
    Tensor host = Tensor::Empty({count});
    ASSERT_TRUE(streams[d]->CopyToHost(buffers[d].raw_data(), host.raw_data(), host.nbytes()).ok());
    ASSERT_TRUE(streams[d]->Synchronize().ok());
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(factor * i, host.data<float>()[i]);
  }
}

TEST(LocalNcclCommunicatorTest, AbsentDeviceIsFailedPrecondition) {
  auto comm = LocalNcclCommunicator::Create({CudaDeviceCount()});
  EXPECT_EQ(StatusCode::kFailedPrecondition, comm.status().code());
}

}  // namespace
}  // namespace ember::pipeline
