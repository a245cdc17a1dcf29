#pragma once

// Inverted dropout (Srivastava et al. 2014) with a counter-based mask: element
// i of call `step` is kept iff UniformAt(seed, step, i) >= rate (core/random.h),
// so the mask depends only on (seed, step, i) — never on the thread count or
// on earlier calls — and the backward recomputes it instead of storing it.
// Same conventions as ops/dense_ops.h: host f32 tensors allocated by the
// caller, outputs overwritten, InvalidArgument naming the operand.

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"

namespace ember::ops {

struct DropoutOptions {
  // Probability of zeroing an element. REQUIRES: 0 <= rate < 1; 0 makes the
  // op an exact copy. Default: 0.
  double rate = 0.0;
  // Seed of the masks; give each dropout layer of a model its own.
  uint64_t seed = 0;
};

// y = x * mask / (1 - rate) elementwise, for x and y of any (equal) shape,
// with the mask of `step` (normally the training step, so that each step
// draws a new mask). `y` may be the same tensor as x. Kept values are scaled
// by the float nearest 1 / (1 - rate).
Status DropoutForward(const Tensor& x, const DropoutOptions& options, uint64_t step, Tensor* y);

// dx = dy * mask / (1 - rate) with the mask of the forward with the same
// options and step. `dx` may be the same tensor as dy.
Status DropoutBackward(const Tensor& dy, const DropoutOptions& options, uint64_t step, Tensor* dx);

// Forward and backward alike: one multiply per element (the mask's hash,
// about 20 integer operations, is not counted): flops = n, bytes = 8 * n.
OpCost DropoutCost(int64_t num_elements);

}  // namespace ember::ops
