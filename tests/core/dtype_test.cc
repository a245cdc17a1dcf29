#include "core/dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(DTypeTest, SizesMatchTheirElementTypes) {
  EXPECT_EQ(4u, DTypeSize(DType::kF32));
  EXPECT_EQ(2u, DTypeSize(DType::kF16));
  EXPECT_EQ(2u, DTypeSize(DType::kBF16));
  EXPECT_EQ(4u, DTypeSize(DType::kI32));
  EXPECT_EQ(8u, DTypeSize(DType::kI64));
}

TEST(DTypeTest, HalfRoundTripsExactlyRepresentableValues) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.96046448e-8f}) {
    EXPECT_EQ(v, HalfToFloat(FloatToHalf(v))) << v;
  }
}

TEST(DTypeTest, HalfRoundsToNearestEvenAndSaturatesToInfinity) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even 1.
  EXPECT_EQ(1.0f, HalfToFloat(FloatToHalf(1.0f + 0x1.0p-11f)));
  EXPECT_EQ(1.0f + 0x1.0p-10f, HalfToFloat(FloatToHalf(1.0f + 0x1.8p-11f)));
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DTypeTest, BFloat16KeepsEightBitsOfMantissa) {
  EXPECT_EQ(1.0f, BFloat16ToFloat(FloatToBFloat16(1.0f)));
  EXPECT_EQ(-3.0f, BFloat16ToFloat(FloatToBFloat16(-3.0f)));
  const float x = 1.0f + 0x1.0p-7f + 0x1.0p-8f + 0x1.0p-10f;  // Past halfway: up to 1 + 2^-6.
  EXPECT_EQ(1.0f + 0x1.0p-6f, BFloat16ToFloat(FloatToBFloat16(x)));
  EXPECT_EQ(1.0f + 0x1.0p-7f, BFloat16ToFloat(FloatToBFloat16(1.0f + 0x1.0p-7f + 0x1.0p-9f)));
  EXPECT_NEAR(3.14159f, BFloat16ToFloat(FloatToBFloat16(3.14159f)), 0.01f);
}

}  // namespace
}  // namespace ember
