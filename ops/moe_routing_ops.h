#pragma once

// The mixture-of-experts routing of ops/moe_routing.h as registry operators
// (ops/op_registry.h), so that a model graph can route tokens to experts. A
// graph value is f32 and per example, so the routing and the expert buffers
// travel in that form:
//
//   probs [E] --moe_route--> gate [k], routing [2, k]
//   x [H], routing --moe_dispatch--> buffers [S, H]
//   expert_out [S, H], gate, routing --moe_combine--> out [H]
//
//  * routing [2, k] of token b: row 0 its k experts, row 1 their slots (-1
//    for a choice dropped for lack of capacity), as f32 holding exact
//    integers (MoeRouting's expert and slot). It has no gradient: the ops
//    that read it give it zeros, and moe_route ignores what reaches it.
//  * buffers [S, H] per token (attr "slots" S): the batch's B * S rows hold
//    the experts' buffers [E, capacity, H] first, capacity =
//    MoeSlotCapacity(B, E, S), then zero rows up to B * S. An expert's
//    buffer is thus rows [e * capacity, (e + 1) * capacity) of the batch's
//    buffers viewed as [B * S, H]; an op that applies the experts reads them
//    there, and expert_out follows the same layout (its padding rows are
//    not read).
//
// The attrs: moe_route "k" (experts per token, 1 <= k <= E; default 1),
// "slots" (S >= 1; default k) and "normalize" (1: GShard's normalised gates,
// MoeRoutingOptions::normalize_gates; default 0); moe_dispatch "experts" (E)
// and "slots" (S, those of its moe_route); moe_combine "experts" (E). Each
// of the three also takes "capacity_factor" (0, the default: none; else
// finite and > 0), which bounds the capacity as MoeNodeCapacity says; the
// three nodes of one layer must give it the same value.
// The capacity depends on the batch and slots are claimed in token order, so
// none of the three computes a row from that row alone (not rows_independent);
// each routes the rows it is given as one group (rows_grouped): run in row
// ranges, each range is routed with its own capacity, as GShard's groups.
// Costs are those of ops/moe_routing.h at the batch's capacity, plus the
// padding rows written.

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_registry.h"

namespace ember::ops {

// floor(batch * slots / experts): the buffer rows per expert when a batch of
// `batch` tokens keeps `slots` rows per token for `experts` experts, so that
// the experts' buffers fit in the batch's rows (a capacity factor of
// slots / k, rounded down; 0 when the batch has fewer rows than experts).
// REQUIRES: batch >= 0, slots >= 1, experts >= 1.
int64_t MoeSlotCapacity(int64_t batch, int64_t experts, int64_t slots);

// The buffer rows per expert of a batch of `batch` tokens with `k` choices
// each, for the routing ops of a node with `attrs` that keep `slots` rows per
// token for `experts` experts: MoeSlotCapacity(batch, experts, slots), or,
// when attr "capacity_factor" c is > 0, the smaller of that and
// ceil(c * k * batch / experts) (GShard's and Switch's capacity). With
// slots >= ceil(c * k) the bound is exact up to the rounding of batch * slots
// / experts, so a fractional factor such as 1.25 is the capacity it names.
// REQUIRES: as MoeSlotCapacity; k >= 1.
int64_t MoeNodeCapacity(int64_t batch, int64_t experts, int64_t slots, int64_t k,
                        const OpAttrs& attrs);

// Inference. A forward with KernelContext::training false (evaluation,
// prediction, serving) routes without capacity, so that an example's output
// depends on it alone, not on what else is in its batch: moe_route keeps
// every example's first min(k, S) choices (all k when capacity_factor >= 1),
// with slot j for choice j; the buffers are token-major, token b's choice
// with slot s in row b * S + s of [B * S, H] (the other rows zero);
// moe_expert_fc reads each row's expert from the routing (its optional 4th
// input) and moe_combine sums the kept rows by their gates. Training (and
// the CUDA kernels, whose inference is training's) uses the capacity layout
// above. An inference forward has no backward (FailedPrecondition).
struct MoeChoice {
  int64_t token = 0, choice = 0, expert = 0, row = 0;
};
// The kept choices (slot in [0, slots)) of `routing` [B, 2, k] in the
// token-major layout of `slots` rows per token, in token and choice order.
std::vector<MoeChoice> MoeKeptChoices(const Tensor& routing, int64_t slots);

// Registers moe_route, moe_dispatch and moe_combine with their CPU kernels
// (RegisterCpuOps calls it), then the experts' operators
// (RegisterMoeExpertOps, ops/moe_expert_ops.h). AlreadyExists when they already are.
Status RegisterMoeRoutingOps(OpRegistry* registry);

// Registers their CUDA kernels (RegisterCudaOps calls it in a CUDA build);
// RegisterMoeRoutingOps must have run first.
Status RegisterMoeRoutingCudaKernels(OpRegistry* registry);

}  // namespace ember::ops
