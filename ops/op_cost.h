#pragma once

namespace ember::ops {

// Work of one call of an operator, for cost models and roofline estimates.
// `flops` counts every floating-point add, multiply and subtract of the
// algorithm (a multiply-add is 2); `bytes` is the minimum traffic: every
// operand read once and every output written once, 4 bytes per f32 element.
struct OpCost {
  double flops = 0.0;
  double bytes = 0.0;
};

}  // namespace ember::ops
