#include "core/tensor_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/threads.h"

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

TEST(TensorCopyTest, LargeHostTensorsCopyAndClearWholeInParallelChunks) {
  // Over a megabyte, with an odd length: several chunks on several threads,
  // and a last chunk that is not a whole one.
  const int64_t n = (int64_t{3} << 18) + 7;
  Tensor src = Tensor::Empty({n});
  for (int64_t i = 0; i < n; ++i) src.data<float>()[i] = static_cast<float>(i % 1009) - 500.0f;
  Tensor dst = Tensor::Empty({n});
  for (int64_t i = 0; i < n; ++i) dst.data<float>()[i] = -1.0f;
  ThreadArena(4).Execute([&] {
    ASSERT_TRUE(CopyTensor(src, &dst, nullptr).ok());
    EXPECT_EQ(Values(src), Values(dst));
    ASSERT_TRUE(ZeroTensor(&dst, nullptr).ok());
  });
  EXPECT_EQ(std::vector<float>(n, 0.0f), Values(dst));
}

}  // namespace
}  // namespace ember
