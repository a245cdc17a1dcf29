#include "core/tensor_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace ember {
namespace {

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(TensorCopyTest, HostTensorsCopyWithoutAStreamWhateverTheirShapes) {
  const Tensor src = Tensor::FromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dst = Tensor::Zeros({3, 2});
  ASSERT_TRUE(CopyTensor(src, &dst, nullptr).ok());
  EXPECT_EQ(Values(src), Values(dst));
}

TEST(TensorCopyTest, MismatchedTensorsAreInvalidArgumentNamingBoth) {
  const Tensor src = Tensor::FromVector({1, 2, 3}, {3});
  Tensor shorter = Tensor::Zeros({2});
  const Status status = CopyTensor(src, &shorter, nullptr);
  EXPECT_EQ(StatusCode::kInvalidArgument, status.code());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("f32[3]"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("f32[2]"));
  Tensor other_type = Tensor::Zeros({3}, DType::kI32);
  EXPECT_EQ(StatusCode::kInvalidArgument, CopyTensor(src, &other_type, nullptr).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, CopyTensor(src, nullptr, nullptr).code());
  Tensor undefined;
  EXPECT_EQ(StatusCode::kInvalidArgument, CopyTensor(undefined, &shorter, nullptr).code());
}

TEST(TensorCopyTest, ZeroTensorClearsAHostTensor) {
  Tensor t = Tensor::FromVector({1, -2, 3}, {3});
  ASSERT_TRUE(ZeroTensor(&t, nullptr).ok());
  EXPECT_EQ((std::vector<float>{0, 0, 0}), Values(t));
  Tensor undefined;
  EXPECT_EQ(StatusCode::kInvalidArgument, ZeroTensor(&undefined, nullptr).code());
}

}  // namespace
}  // namespace ember
