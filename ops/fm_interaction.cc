// FM second-order interaction through the identity
//   sum_{i<j} <x_i, x_j> = 0.5 * sum_d ((sum_f x_fd)^2 - sum_f x_fd^2)
// (Rendle 2010, eq. 4), which costs O(F * D) per sample instead of O(F^2 * D).

#include "ops/fm_interaction.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/threads.h"
#include "ops/internal/tensor_checks.h"

namespace ember::ops {
namespace {

// Samples per parallel chunk so that a chunk holds about this many elements.
constexpr int64_t kWorkPerChunk = 1 << 16;

int64_t SampleGrain(int64_t num_features, int64_t dim) {
  return std::max<int64_t>(1, kWorkPerChunk / std::max<int64_t>(1, num_features * dim));
}

// sum[d] = sum_f sample[f, d]. Fields outer so both loops stream contiguously.
void FieldSum(const float* sample, int64_t num_features, int64_t dim, float* sum) {
  std::fill(sum, sum + dim, 0.0f);
  for (int64_t f = 0; f < num_features; ++f) {
    const float* row = sample + f * dim;
    for (int64_t d = 0; d < dim; ++d) sum[d] += row[d];
  }
}

}  // namespace

Status FmInteractionForward(const Tensor& features, Tensor* out) {
  constexpr const char* kOp = "FmInteractionForward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  EMBER_RETURN_IF_ERROR(CheckOutput(kOp, "out", out, DType::kF32, {batch, 1}));
  const float* x = features.data<float>();
  float* o = out->data<float>();
  ParallelFor(0, batch, SampleGrain(num_features, dim), [&](int64_t begin, int64_t end) {
    std::vector<float> sum(static_cast<size_t>(dim)), sum_sq(static_cast<size_t>(dim));
    for (int64_t b = begin; b < end; ++b) {
      const float* sample = x + b * num_features * dim;
      FieldSum(sample, num_features, dim, sum.data());
      std::fill(sum_sq.begin(), sum_sq.end(), 0.0f);
      for (int64_t f = 0; f < num_features; ++f) {
        const float* row = sample + f * dim;
        for (int64_t d = 0; d < dim; ++d) sum_sq[d] += row[d] * row[d];
      }
      float total = 0.0f;
      for (int64_t d = 0; d < dim; ++d) total += sum[d] * sum[d] - sum_sq[d];
      o[b] = 0.5f * total;
    }
  });
  return Status::OK();
}

Status FmInteractionBackward(const Tensor& features, const Tensor& dout, Tensor* dfeatures) {
  constexpr const char* kOp = "FmInteractionBackward";
  EMBER_RETURN_IF_ERROR(CheckRank(kOp, "features", features, DType::kF32, 3));
  const int64_t batch = features.dim(0), num_features = features.dim(1), dim = features.dim(2);
  EMBER_RETURN_IF_ERROR(CheckTensor(kOp, "dout", dout, DType::kF32, {batch, 1}));
  EMBER_RETURN_IF_ERROR(
      CheckOutput(kOp, "dfeatures", dfeatures, DType::kF32, {batch, num_features, dim}));
  const float* x = features.data<float>();
  const float* g = dout.data<float>();
  float* dx = dfeatures->data<float>();
  ParallelFor(0, batch, SampleGrain(num_features, dim), [&](int64_t begin, int64_t end) {
    std::vector<float> sum(static_cast<size_t>(dim));
    for (int64_t b = begin; b < end; ++b) {
      const float* sample = x + b * num_features * dim;
      float* dsample = dx + b * num_features * dim;
      FieldSum(sample, num_features, dim, sum.data());
      // d/dx_fd of 0.5 * (s_d^2 - sum_f x_fd^2) is s_d - x_fd.
      for (int64_t f = 0; f < num_features; ++f) {
        const float* row = sample + f * dim;
        float* drow = dsample + f * dim;
        for (int64_t d = 0; d < dim; ++d) drow[d] = g[b] * (sum[d] - row[d]);
      }
    }
  });
  return Status::OK();
}

OpCost FmInteractionForwardCost(int64_t batch, int64_t num_features, int64_t dim) {
  const double b = static_cast<double>(batch), f = static_cast<double>(num_features),
               d = static_cast<double>(dim);
  return OpCost{.flops = b * d * (3.0 * f + 3.0) + b, .bytes = 4.0 * (b * f * d + b)};
}

OpCost FmInteractionBackwardCost(int64_t batch, int64_t num_features, int64_t dim) {
  const double b = static_cast<double>(batch), f = static_cast<double>(num_features),
               d = static_cast<double>(dim);
  return OpCost{.flops = 3.0 * b * f * d, .bytes = 4.0 * (2.0 * b * f * d + b)};
}

}  // namespace ember::ops
