// Inverted dropout with a mask recomputed from (seed, step, element index).

#include "ops/dropout.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/random.h"
#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Elements per parallel chunk: each costs a hash, so chunks can be smaller
// than for a plain elementwise loop.
constexpr int64_t kElementGrain = 1 << 13;

Status CheckRate(const char* op, const DropoutOptions& options) {
  if (options.rate >= 0.0 && options.rate < 1.0) return Status::OK();
  return Status::InvalidArgument(op, ": rate = ", options.rate, " is outside [0, 1)");
}

Status CheckInput(const char* op, const char* name, const Tensor& tensor) {
  if (tensor.defined() && tensor.dtype() == DType::kF32 && tensor.device().is_cpu()) {
    return Status::OK();
  }
  return Status::InvalidArgument(op, ": ", name, " must be an f32 tensor on cpu, got ",
                                 tensor.defined() ? tensor.DebugString() : "an undefined tensor");
}

// out = in * mask * scale; shared by forward and backward, which differ only
// in the names of their operands.
Status ApplyMask(const char* op, const char* in_name, const char* out_name, const Tensor& in,
                 const DropoutOptions& options, uint64_t step, Tensor* out) {
  EMBER_RETURN_IF_ERROR(CheckRate(op, options));
  EMBER_RETURN_IF_ERROR(CheckInput(op, in_name, in));
  EMBER_RETURN_IF_ERROR(CheckOutput(op, out_name, out, DType::kF32, in.shape()));
  const float* src = in.data<float>();
  float* dst = out->data<float>();
  const int64_t n = in.numel();
  if (options.rate == 0.0) {
    if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return Status::OK();
  }
  const float scale = static_cast<float>(1.0 / (1.0 - options.rate));
  const double rate = options.rate;
  const uint64_t seed = options.seed;
  ParallelFor(0, n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const bool keep = UniformAt(seed, step, static_cast<uint64_t>(i)) >= rate;
      dst[i] = keep ? src[i] * scale : 0.0f;
    }
  });
  return Status::OK();
}

}  // namespace

Status DropoutForward(const Tensor& x, const DropoutOptions& options, uint64_t step, Tensor* y) {
  return ApplyMask("DropoutForward", "x", "y", x, options, step, y);
}

Status DropoutBackward(const Tensor& dy, const DropoutOptions& options, uint64_t step, Tensor* dx) {
  return ApplyMask("DropoutBackward", "dy", "dx", dy, options, step, dx);
}

OpCost DropoutCost(int64_t num_elements) {
  const double n = static_cast<double>(num_elements);
  return {n, 8.0 * n};
}

}  // namespace ember::ops
