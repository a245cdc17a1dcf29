// Sigmoid and the sigmoid cross-entropy loss on logits.

#include "ops/dense_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Elements per parallel chunk of an elementwise loop.
constexpr int64_t kElementGrain = 1 << 14;

// exp() of a non-positive number only, so that neither branch overflows.
template <typename T>
T StableSigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// logits [B] or [B, 1].
Status CheckLogits(const char* op, const Tensor& logits) {
  const bool column = logits.ndim() == 2 && logits.dim(1) == 1;
  if (logits.defined() && logits.dtype() == DType::kF32 && logits.device().is_cpu() &&
      (logits.ndim() == 1 || column)) {
    return Status::OK();
  }
  return Status::InvalidArgument(op, ": logits must be f32[B] or f32[B, 1] on cpu, got ",
                                 logits.defined() ? logits.DebugString() : "an undefined tensor");
}

}  // namespace

Result<double> SigmoidCrossEntropyWithLogits(const Tensor& logits, const Tensor& labels,
                                             Tensor* dlogits, int64_t mean_over) {
  constexpr const char* kOp = "SigmoidCrossEntropyWithLogits";
  if (mean_over < 0) return Status::InvalidArgument(kOp, ": mean_over must be >= 0, got ", mean_over);
  EMBER_RETURN_IF_ERROR(CheckLogits(kOp, logits));
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "labels", labels, DType::kF32, logits.shape()));
  if (dlogits != nullptr) {
    EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dlogits", *dlogits, DType::kF32, logits.shape()));
  }
  const int64_t batch = logits.dim(0);
  if (batch == 0)
    return Status::InvalidArgument(kOp, ": the batch is empty; its mean is undefined");
  const float* z = logits.data<float>();
  const float* y = labels.data<float>();
  for (int64_t i = 0; i < batch; ++i) {
    if (!(y[i] >= 0.0f && y[i] <= 1.0f)) {
      return Status::InvalidArgument(kOp, ": labels[", i, "] = ", y[i], " is outside [0, 1]");
    }
  }
  // One sequential sum in double: the same bits for any thread count, and
  // exact enough for a mean over millions of samples.
  double total = 0.0;
  for (int64_t i = 0; i < batch; ++i) {
    const double zi = z[i];
    total += std::max(zi, 0.0) - zi * y[i] + std::log1p(std::exp(-std::abs(zi)));
  }
  if (dlogits != nullptr) {
    float* dz = dlogits->data<float>();
    const double inv_batch = 1.0 / static_cast<double>(mean_over > 0 ? mean_over : batch);
    for (int64_t i = 0; i < batch; ++i) {
      dz[i] = static_cast<float>((StableSigmoid<double>(z[i]) - y[i]) * inv_batch);
    }
  }
  return total / static_cast<double>(mean_over > 0 ? mean_over : batch);
}

Status Sigmoid(const Tensor& x, Tensor* out) {
  constexpr const char* kOp = "Sigmoid";
  if (!x.defined() || x.dtype() != DType::kF32 || !x.device().is_cpu()) {
    return Status::InvalidArgument(kOp, ": x must be an f32 tensor on cpu, got ",
                                   x.defined() ? x.DebugString() : "an undefined tensor");
  }
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, x.shape()));
  const float* src = x.data<float>();
  float* dst = out->data<float>();
  ParallelFor(0, x.numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = StableSigmoid<float>(src[i]);
  });
  return Status::OK();
}

}  // namespace ember::ops
