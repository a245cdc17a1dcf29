#include "core/tensor.h"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(TensorTest, EmptyHasShapeDtypeAndAlignedStorage) {
  Tensor t = Tensor::Empty({3, 5}, DType::kF32);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(2, t.ndim());
  EXPECT_EQ(15, t.numel());
  EXPECT_EQ(60u, t.nbytes());
  EXPECT_EQ(Device::Cpu(), t.device());
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(t.raw_data()) % kHostAlignment);
}

TEST(TensorTest, ZerosIsZeroFilled) {
  Tensor t = Tensor::Zeros({4, 4}, DType::kI64);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(0, t.data<int64_t>()[i]);
}

TEST(TensorTest, CopiesShareStorageAndCloneDoesNot) {
  Tensor a = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  Tensor shared = a;
  Tensor copy = a.Clone();
  a.data<float>()[0] = 9;
  EXPECT_EQ(9, shared.data<float>()[0]);
  EXPECT_EQ(1, copy.data<float>()[0]);
}

TEST(TensorTest, ReshapeAndSliceAreViews) {
  Tensor a = Tensor::FromVector({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor rows = a.Slice(1, 3);
  EXPECT_EQ((std::vector<int64_t>{2, 2}), rows.shape());
  EXPECT_EQ(2, rows.data<float>()[0]);
  Tensor flat = a.Reshape({6});
  flat.data<float>()[5] = 50;
  EXPECT_EQ(50, rows.data<float>()[3]);
}

TEST(TensorTest, AllocateOnAbsentCudaDeviceFailsWithStatus) {
  Result<Tensor> t = Tensor::Allocate({2}, DType::kF32, Device::Cuda(CudaDeviceCount()));
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, t.status().code());
}

TEST(TensorTest, NegativeDimensionIsInvalidArgument) {
  Result<Tensor> t = Tensor::Allocate({2, -1}, DType::kF32, Device::Cpu());
  EXPECT_EQ(StatusCode::kInvalidArgument, t.status().code());
}

TEST(TensorTest, DebugStringNamesDtypeShapeAndDevice) {
  EXPECT_EQ("bf16[2, 3] on cpu", Tensor::Empty({2, 3}, DType::kBF16).DebugString());
}

TEST(TensorDeathTest, DataWithWrongTypeIsABrokenInvariant) {
  Tensor t = Tensor::Empty({2}, DType::kI32);
  EXPECT_DEATH(t.data<float>(), "on a i32 tensor");
}

}  // namespace
}  // namespace ember
