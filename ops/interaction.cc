// DLRM's dot interaction (Naumov et al. 2019): the dot product of every pair
// of distinct feature vectors of a sample, strictly lower triangle row by row.

#include "ops/dense_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/threads.h"
#include "ops/internal/tensor_checks.h"
#include "ops/internal/vector_math.h"

namespace ember::ops {
namespace {

using internal::Axpy;
using internal::Dot;

// Samples per parallel chunk so that a chunk holds about this many multiply-adds.
constexpr int64_t kWorkPerChunk = 1 << 16;

int64_t SampleGrain(int64_t num_features, int64_t dim) {
  return std::max<int64_t>(1,
                           kWorkPerChunk / std::max<int64_t>(1, num_features * num_features * dim));
}

}  // namespace

Status DotInteractionForward(const Tensor& features, Tensor* out) {
  constexpr const char* kOp = "DotInteractionForward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  const int64_t pairs = num_features * (num_features - 1) / 2;
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, pairs}));
  const float* f = features.data<float>();
  float* o = out->data<float>();
  ParallelFor(0, batch, SampleGrain(num_features, dim), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* sample = f + b * num_features * dim;
      float* dst = o + b * pairs;
      for (int64_t i = 1; i < num_features; ++i) {
        for (int64_t j = 0; j < i; ++j) *dst++ = Dot(sample + i * dim, sample + j * dim, dim);
      }
    }
  });
  return Status::OK();
}

Status DotInteractionBackward(const Tensor& features, const Tensor& dout, Tensor* dfeatures) {
  constexpr const char* kOp = "DotInteractionBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  const int64_t pairs = num_features * (num_features - 1) / 2;
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, pairs}));
  EMBER_RETURN_IF_ERROR(
      CheckOutput(kOp, "dfeatures", dfeatures, DType::kF32, {batch, num_features, dim}));
  const float* f = features.data<float>();
  const float* g = dout.data<float>();
  float* df = dfeatures->data<float>();
  ParallelFor(0, batch, SampleGrain(num_features, dim), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* sample = f + b * num_features * dim;
      const float* grad = g + b * pairs;
      float* dsample = df + b * num_features * dim;
      std::memset(dsample, 0, static_cast<size_t>(num_features * dim) * sizeof(float));
      // out_ij = <F_i, F_j>, so dF_i += dout_ij * F_j and dF_j += dout_ij * F_i.
      for (int64_t i = 1; i < num_features; ++i) {
        for (int64_t j = 0; j < i; ++j) {
          const float gij = *grad++;
          Axpy(gij, sample + j * dim, dim, dsample + i * dim);
          Axpy(gij, sample + i * dim, dim, dsample + j * dim);
        }
      }
    }
  });
  return Status::OK();
}

}  // namespace ember::ops
