#pragma once

// The second-order term of a factorisation machine as used by DeepFM (Guo et
// al. 2017), with forward, backward and cost model. Same conventions as
// ops/dense_ops.h: host f32 row-major tensors allocated by the caller, outputs
// overwritten, InvalidArgument naming the operand on a shape or dtype
// mismatch, parallel over the batch on the calling thread's oneTBB arena.

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"

namespace ember::ops {

// For features[B, F, D]: out[B, 1] = 0.5 * sum_d ((sum_f x_fd)^2 - sum_f x_fd^2),
// the sum of <x_i, x_j> over every pair of distinct fields i < j.
Status FmInteractionForward(const Tensor& features, Tensor* out);

// dfeatures[B, F, D] (overwritten) from dout[B, 1]:
// dfeatures_bfd = dout_b * (sum_g x_bgd - x_bfd).
Status FmInteractionBackward(const Tensor& features, const Tensor& dout, Tensor* dfeatures);

// Forward: per input element an add to the field sum, a square and an add to
// the sum of squares (3); per (sample, d) squaring the sum, the subtraction
// and the add to the total (3); per sample the halving (1):
//   flops = B * D * (3F + 3) + B,  bytes = 4 * (B*F*D + B).
// REQUIRES: batch, num_features, dim >= 0.
OpCost FmInteractionForwardCost(int64_t batch, int64_t num_features, int64_t dim);

// Backward: the field sums (1 per input element), then a subtract and a
// multiply per output element (2):
//   flops = 3 * B * F * D,  bytes = 4 * (2*B*F*D + B).
OpCost FmInteractionBackwardCost(int64_t batch, int64_t num_features, int64_t dim);

}  // namespace ember::ops
