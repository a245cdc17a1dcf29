// Clipping by global norm, with a norm that does not depend on the thread count.

#include "ops/gradient_clipping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/threads.h"

namespace ember::ops {
namespace {

// Elements per block of the norm. Blocks are fixed by the data alone (not by
// the scheduler), which is what makes the sum reproducible.
constexpr int64_t kBlock = 1 << 14;

// Elements per parallel chunk of the scaling.
constexpr int64_t kElementGrain = 1 << 14;

// Sum of squares of one tensor, in double, block sums added in block order.
double SumOfSquares(const float* data, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
  ParallelFor(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t lo = block * kBlock, hi = std::min(n, lo + kBlock);
      double sum = 0.0;
      for (int64_t i = lo; i < hi; ++i) sum += static_cast<double>(data[i]) * data[i];
      partial[static_cast<size_t>(block)] = sum;
    }
  });
  double total = 0.0;
  for (double sum : partial) total += sum;
  return total;
}

}  // namespace

Result<double> GlobalNorm(const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || g.dtype() != DType::kF32 || !g.device().is_cpu()) {
      return Status::InvalidArgument("GlobalNorm: grads[", i,
                                     "] must be an f32 tensor on cpu, got ",
                                     g.defined() ? g.DebugString() : "an undefined tensor");
    }
  }
  double total = 0.0;
  for (const Tensor& g : grads) total += SumOfSquares(g.data<float>(), g.numel());
  return std::sqrt(total);
}

Result<double> ClipByGlobalNorm(double max_norm, std::vector<Tensor>* grads) {
  constexpr const char* kOp = "ClipByGlobalNorm";
  if (grads == nullptr) return Status::InvalidArgument(kOp, ": grads is null");
  if (!(max_norm > 0.0) || !std::isfinite(max_norm)) {
    return Status::InvalidArgument(kOp, ": max_norm = ", max_norm, "; expected finite and > 0");
  }
  Result<double> norm_or = GlobalNorm(*grads);
  if (!norm_or.ok()) return norm_or.status().WithContext(kOp);
  const double norm = *norm_or;
  if (!std::isfinite(norm) || norm <= max_norm) return norm;
  const float scale = static_cast<float>(max_norm / norm);
  for (Tensor& g : *grads) {
    float* data = g.data<float>();
    ParallelFor(0, g.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] *= scale;
    });
  }
  return norm;
}

OpCost ClipByGlobalNormCost(int64_t num_elements) {
  const double n = static_cast<double>(num_elements);
  return {3.0 * n, 12.0 * n};
}

}  // namespace ember::ops
