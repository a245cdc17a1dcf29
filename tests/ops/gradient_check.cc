#include "tests/ops/gradient_check.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ember::ops::testing {

Tensor RandomTensor(const std::vector<int64_t>& shape, RandomStream& rng, double lo, double hi) {
  Tensor tensor = Tensor::Empty(shape);
  float* data = tensor.data<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = static_cast<float>(rng.Uniform(lo, hi));
  return tensor;
}

std::vector<double> ToDouble(const Tensor& tensor) {
  const float* data = tensor.data<float>();
  return std::vector<double>(data, data + tensor.numel());
}

double WeightedSum(const std::vector<double>& weights, const std::vector<double>& values) {
  EXPECT_EQ(weights.size(), values.size());
  double sum = 0.0;
  for (size_t i = 0; i < weights.size() && i < values.size(); ++i) sum += weights[i] * values[i];
  return sum;
}

std::vector<double> NumericGradient(
    const std::function<double(const std::vector<double>&)>& objective, std::vector<double> point,
    double h) {
  std::vector<double> gradient(point.size());
  for (size_t i = 0; i < point.size(); ++i) {
    const double saved = point[i];
    point[i] = saved + h;
    const double plus = objective(point);
    point[i] = saved - h;
    const double minus = objective(point);
    point[i] = saved;
    gradient[i] = (plus - minus) / (2.0 * h);
  }
  return gradient;
}

void ExpectAllClose(const std::vector<double>& expected, const Tensor& actual, double tolerance,
                    const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.numel()) << what;
  const float* data = actual.data<float>();
  int reported = 0;
  int mismatches = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double error = std::abs(static_cast<double>(data[i]) - expected[i]);
    if (!(error <= tolerance * (1.0 + std::abs(expected[i])))) {
      ++mismatches;
      if (reported++ < 5) {
        ADD_FAILURE() << what << "[" << i << "]: expected " << expected[i] << ", got " << data[i];
      }
    }
  }
  EXPECT_EQ(0, mismatches) << what << ": elements outside tolerance " << tolerance;
}

}  // namespace ember::ops::testing
