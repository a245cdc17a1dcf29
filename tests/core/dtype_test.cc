#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

TEST(DTypeTest, BFloat16RoundsTiesToEvenAndKeepsNanAndInfinity) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(1.0f, BFloat16ToFloat(FloatToBFloat16(1.0f + 0x1.0p-8f)));
  EXPECT_EQ(1.0f + 0x1.0p-6f, BFloat16ToFloat(FloatToBFloat16(1.0f + 0x1.8p-7f)));
  EXPECT_TRUE(
      std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the dropped bits stays a NaN, not infinity.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::infinity()))));
}

// The bulk conversion (vectorised) gives the bits of the scalar one for every
// value, special ones included, at lengths around a vector register's.
TEST(DTypeTest, FloatsToBFloat16GivesTheBitsOfFloatToBFloat16) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f + 0x1.0p-8f,
                               1.0f + 0x1.8p-8f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::bit_cast<float>(0x7f800001u),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::denorm_min()};
  for (uint32_t i = 0; i < 1000; ++i) values.push_back(std::bit_cast<float>(i * 4294967u + 12345u));
  for (size_t n : {values.size(), size_t{1}, size_t{15}, size_t{17}}) {
    std::vector<BFloat16> out(n, BFloat16{0xdead});
    FloatsToBFloat16(values.data(), static_cast<int64_t>(n), out.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(FloatToBFloat16(values[i]).bits, out[i].bits) << "value " << i << " of " << n;
    }
  }
}

}  // namespace
}  // namespace ember
