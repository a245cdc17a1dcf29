#pragma once

// Helpers for the tests of ops/: random tensors, double-precision copies, and
// central finite differences on double-precision reference implementations.
//
// The pattern: an op's backward (float) is compared with the finite-difference
// gradient of the scalar objective sum(w * f_ref(x)) where f_ref is a plain
// double implementation of the forward and w a random weighting (the `dy`
// given to the backward). Separately the float forward is compared with f_ref.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace ember::ops::testing {

// Uniform values in [lo, hi).
Tensor RandomTensor(const std::vector<int64_t>& shape, RandomStream& rng, double lo = -1.0,
                    double hi = 1.0);

std::vector<double> ToDouble(const Tensor& tensor);

// sum_i weights[i] * values[i].
double WeightedSum(const std::vector<double>& weights, const std::vector<double>& values);

// d objective / d point[i] for every i, by central differences with step h.
std::vector<double> NumericGradient(
    const std::function<double(const std::vector<double>&)>& objective, std::vector<double> point,
    double h = 1e-4);

// Expects |actual[i] - expected[i]| <= tolerance * (1 + |expected[i]|) for
// every element, reporting the first few mismatches under the name `what`.
void ExpectAllClose(const std::vector<double>& expected, const Tensor& actual, double tolerance,
                    const std::string& what);

}  // namespace ember::ops::testing
