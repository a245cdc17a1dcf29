#pragma once

// Helpers for the tests of ops/ that make, read and compare tensors. Random
// tensors and double-precision copies are in tests/ops/gradient_check.h.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ember::ops::testing {

// The elements of a tensor of T (float by default), in order.
template <typename T = float>
std::vector<T> Values(const Tensor& tensor) {
  const T* data = tensor.data<T>();
  return std::vector<T>(data, data + tensor.numel());
}

// A float tensor of `shape` with every element `value`.
inline Tensor Filled(const std::vector<int64_t>& shape, float value) {
  Tensor tensor = Tensor::Empty(shape);
  float* data = tensor.data<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = value;
  return tensor;
}

// A float tensor of `shape` full of NaN: an output that an op must overwrite
// entirely, or the NaN shows in the result.
inline Tensor NanFilled(const std::vector<int64_t>& shape) {
  return Filled(shape, std::numeric_limits<float>::quiet_NaN());
}

// Whether `a` and `b` hold the same bytes: bit-identical results.
inline bool SameBits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Expects `code` with a message that contains `message_part`.
inline void ExpectStatus(const Status& status, StatusCode code, const std::string& message_part) {
  EXPECT_EQ(code, status.code()) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr(message_part));
}

// Expects InvalidArgument with a message that contains `message_part`.
inline void ExpectInvalid(const Status& status, const std::string& message_part) {
  ExpectStatus(status, StatusCode::kInvalidArgument, message_part);
}

}  // namespace ember::ops::testing
