#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

Tensor RandomHost(std::vector<int64_t> shape, RandomStream& random) {
  Tensor t = Tensor::Empty(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(random.Normal());
  return t;
}

Tensor ToDevice(const Tensor& host, CudaStream& stream) {
  Result<Tensor> device = Tensor::Allocate(host.shape(), DType::kF32, Device::Cuda(stream.device()));
  CHECK(device.ok()) << device.status();
  CHECK(stream.CopyToDevice(host.raw_data(), device->raw_data(), host.nbytes()).ok());
  return *device;
}

class FullyConnectedCudaTest : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(FullyConnectedCudaTest, ForwardMatchesTheCpuKernel) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "needs a CUDA device (none present)";
  const auto [batch, in, out, relu] = GetParam();
  const Activation act = relu ? Activation::kRelu : Activation::kNone;
  RandomStream random(batch * 1000 + in * 10 + out);
  Tensor x = RandomHost({batch, in}, random);
  Tensor w = RandomHost({out, in}, random);
  Tensor b = RandomHost({out}, random);
  Tensor expected = Tensor::Empty({batch, out});
  ASSERT_TRUE(FullyConnectedForward(x, w, b, act, &expected).ok());

  auto stream = CudaStream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Tensor dx = ToDevice(x, **stream), dw = ToDevice(w, **stream), db = ToDevice(b, **stream);
  Result<Tensor> dy = Tensor::Allocate({batch, out}, DType::kF32, Device::Cuda(0));
  ASSERT_TRUE(dy.ok());
  Tensor y_device = *dy;
  ASSERT_TRUE(FullyConnectedForwardCuda(dx, dw, db, act, &y_device, **stream).ok());
  Tensor actual = Tensor::Empty({batch, out});
  ASSERT_TRUE((*stream)->CopyToHost(y_device.raw_data(), actual.raw_data(), actual.nbytes()).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const float e = expected.data<float>()[i];
    ASSERT_NEAR(e, actual.data<float>()[i], 1e-4f * (1.0f + std::fabs(e)) * std::sqrt(in)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FullyConnectedCudaTest,
                         ::testing::Values(std::make_tuple(1, 13, 512, true),
                                           std::make_tuple(17, 5, 3, false),
                                           std::make_tuple(2048, 512, 256, true)));

TEST(FullyConnectedCudaTest, OperandsOnTheHostAreInvalidArgument) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "needs a CUDA device (none present)";
  auto stream = CudaStream::Create(0);
  ASSERT_TRUE(stream.ok());
  Tensor x = Tensor::Zeros({2, 3}), w = Tensor::Zeros({4, 3}), b = Tensor::Zeros({4});
  Tensor y = Tensor::Zeros({2, 4});
  EXPECT_EQ(StatusCode::kInvalidArgument,
            FullyConnectedForwardCuda(x, w, b, Activation::kNone, &y, **stream).code());
}

TEST(CudaStreamTest, MissingDeviceIsFailedPreconditionNotACrash) {
  auto stream = CudaStream::Create(CudaDeviceCount());
  EXPECT_EQ(StatusCode::kFailedPrecondition, stream.status().code());
}

}  // namespace
}  // namespace ember::ops
