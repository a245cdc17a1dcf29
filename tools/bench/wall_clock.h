#pragma once

// What the benchmarks that time calls themselves (outside Google Benchmark:
// programs under mpirun) share: a clock and the median of repeats.

#include <algorithm>
#include <chrono>
#include <vector>

namespace ember::bench {

// Seconds on a monotonic clock.
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The median of `values` (the upper one of an even count). REQUIRES: not empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace ember::bench
