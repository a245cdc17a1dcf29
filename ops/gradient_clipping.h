#pragma once

// Gradient clipping by global norm (Pascanu et al. 2013): every gradient of a
// step is scaled by one factor so that their joint L2 norm is at most
// max_norm. Host f32 tensors, InvalidArgument naming the operand, as in
// ops/dense_ops.h.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"

namespace ember::ops {

// sqrt(sum over every element of every tensor of g^2). The squares are summed
// in double over fixed blocks of each tensor and the block sums added in
// order, so the result is the same bits for any thread count. An empty list
// has norm 0. InvalidArgument, naming grads[i], for a tensor that is not f32
// on the host.
Result<double> GlobalNorm(const std::vector<Tensor>& grads);

// Scales every tensor of *grads in place by max_norm / max(norm, max_norm),
// where norm = GlobalNorm(*grads), and returns that norm (before clipping).
// When norm <= max_norm nothing is changed. When the norm is not
// finite (an inf or NaN gradient) nothing is scaled and the norm is returned
// as is: callers typically skip the step. InvalidArgument for grads null, for
// max_norm not finite and > 0, and as GlobalNorm.
Result<double> ClipByGlobalNorm(double max_norm, std::vector<Tensor>* grads);

// For n elements in all: a multiply-add per element for the norm and, when
// clipping, a multiply per element: flops = 3 * n, bytes = 12 * n (read for
// the norm, read and write for the scaling).
OpCost ClipByGlobalNormCost(int64_t num_elements);

}  // namespace ember::ops
