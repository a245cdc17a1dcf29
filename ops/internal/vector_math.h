#pragma once

// Small vector loops shared by the CPU operators of ops/ (interactions,
// cross layers). In order, element by element, so that results do not
// depend on how the callers split their work.

#include <cstdint>

namespace ember::ops::internal {

// The sum of a[i] * b[i], added left to right.
inline float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// acc += scale * v
inline void Axpy(float scale, const float* v, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += scale * v[i];
}

}  // namespace ember::ops::internal
