#pragma once

// Mixture-of-experts routing on the CPU: a softmax gate, top-k routing with a
// capacity per expert (GShard, Lepikhin et al. 2020; Switch Transformer, Fedus
// et al. 2021), and the dispatch/combine that move token rows into per-expert
// buffers and back, each with its backward. Same conventions as
// ops/dense_ops.h: host f32 row-major tensors allocated by the caller, outputs
// overwritten, InvalidArgument naming the operand on a shape, dtype or value
// error, parallel work on the calling thread's oneTBB arena, and results that
// do not depend on the thread count.
//
// One step, with B tokens of width H and E experts:
//   probs = Softmax(logits)                          [B, E]
//   routing = RouteTopK(probs, options)              discrete; gate [B, k]
//   buffers = MoeDispatch(x, routing)                [E, capacity, H]
//   expert_out = each expert applied to its buffer   [E, capacity, H]
//   out = MoeCombine(expert_out, routing.gate)       [B, H]
// and backward: MoeCombineBackward gives d expert_out and dgate,
// MoeDispatchBackward gives dx, MoeGateBackward turns dgate into dprobs, and
// SoftmaxBackward turns dprobs into dlogits. The routing itself (which expert,
// which slot) is piecewise constant and has no gradient.

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_cost.h"

namespace ember::ops {

// probs[B, E] = softmax(logits[B, E]) along each row, computed as
// exp(z - max z) / sum exp(z - max z) so that no exp overflows.
Status SoftmaxForward(const Tensor& logits, Tensor* probs);
// dlogits[B, E] = probs * (dprobs - sum_e dprobs * probs), row by row, from
// the forward output `probs`.
Status SoftmaxBackward(const Tensor& probs, const Tensor& dprobs, Tensor* dlogits);

struct MoeRoutingOptions {
  // Experts per token. REQUIRES: 1 <= k <= E. Default: 1 (Switch).
  int k = 1;
  // Slots per expert = ceil(capacity_factor * k * B / E); see MoeCapacity.
  // REQUIRES: finite and > 0. Default: 1.25.
  double capacity_factor = 1.25;
  // When >= 0, the slots per expert, in place of capacity_factor's (which is
  // then not read): the graph operators (ops/moe_routing_ops.h) size the
  // buffers by the batch's rows. Default: -1, from capacity_factor.
  int64_t capacity = -1;
  // When true a token's gate weights are its top-k probabilities divided by
  // their sum (GShard's top-2 gate); the sum runs over all k choices, dropped
  // ones included, so a kept weight does not change when a sibling choice is
  // dropped. When false (default; Switch) the gate weight is the probability.
  bool normalize_gates = false;
};

// The routing of one batch: for token b and its j-th choice (j < k, choices in
// order of decreasing probability, ties to the lower expert index):
//   expert[b, j]  i32, the chosen expert, kept even when the choice is dropped
//                 so that load statistics see the demand;
//   slot[b, j]    i32, the row of the expert's buffer the token goes to, or -1
//                 when the expert was full and the choice is dropped;
//   gate[b, j]    f32, the weight of the expert's output in the token's
//                 output; 0 for a dropped choice.
// Every (expert, slot) pair with slot >= 0 appears at most once.
struct MoeRouting {
  int64_t num_experts = 0;
  int64_t capacity = 0;
  bool normalize_gates = false;
  Tensor expert;
  Tensor slot;
  Tensor gate;
  // Choices dropped for lack of capacity.
  int64_t num_dropped = 0;
};

// ceil(capacity_factor * k * num_tokens / num_experts): the buffer rows per
// expert. InvalidArgument for num_tokens < 0, num_experts < 1, k outside
// [1, num_experts] or a capacity_factor that is not finite and > 0.
Result<int64_t> MoeCapacity(int64_t num_tokens, int64_t num_experts, int k, double capacity_factor);
// The buffer rows per expert that RouteTopK gives `num_tokens` tokens:
// options.capacity when >= 0, else MoeCapacity's. The errors of MoeCapacity
// (k and the counts are checked either way).
Result<int64_t> MoeRoutingCapacity(int64_t num_tokens, int64_t num_experts,
                                   const MoeRoutingOptions& options);

// Routes each token of probs[B, E] to its top-k experts. Tokens claim slots in
// token order (token 0 first), and a token's choices in rank order; a choice
// whose expert already holds `capacity` tokens (MoeRoutingCapacity) is
// dropped. (GShard instead serves every token's first choice before any
// second choice; with k = 1 the two agree.) The returned tensors are new.
// InvalidArgument for options out of range and for probs that are negative or
// not finite (naming the element), and, with normalize_gates, for a token
// whose top-k probabilities sum to 0.
Result<MoeRouting> RouteTopK(const Tensor& probs, const MoeRoutingOptions& options);

// dprobs[B, E] from dgate[B, k], with the routing held fixed: the gradient of
// routing.gate as a function of probs (the dropped choices' gate is the
// constant 0, so their dgate is ignored). Zero for experts a token did not
// choose.
Status MoeGateBackward(const Tensor& probs, const MoeRouting& routing, const Tensor& dgate,
                       Tensor* dprobs);

// buffers[E, capacity, H]: buffers[expert[b, j], slot[b, j], :] = x[b, :] for
// every kept choice; rows no token claimed are zero. InvalidArgument also for
// a routing that is malformed (indices out of range, a slot used twice, or
// shapes that disagree with x).
Status MoeDispatch(const Tensor& x, const MoeRouting& routing, Tensor* buffers);
// dx[B, H] = sum over the kept choices of token b of dbuffers[expert, slot, :].
Status MoeDispatchBackward(const Tensor& dbuffers, const MoeRouting& routing, Tensor* dx);

// out[B, H] = sum over the kept choices j of token b of
// gate[b, j] * expert_out[expert[b, j], slot[b, j], :]. `gate` is f32[B, k],
// normally routing.gate; it is an argument of its own so that its gradient can
// be taken. Dropped choices contribute nothing whatever their gate.
Status MoeCombine(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                  Tensor* out);
// Gradients of MoeCombine from dout[B, H]: dexpert_out[E, capacity, H] =
// gate * dout of the slot's token (zero for unclaimed slots) and dgate[B, k] =
// <dout[b], expert_out[expert, slot]> (zero for dropped choices). Either
// output may be null when its gradient is not needed.
Status MoeCombineBackward(const Tensor& expert_out, const Tensor& gate, const MoeRouting& routing,
                          const Tensor& dout, Tensor* dexpert_out, Tensor* dgate);

// The soft mixture of Multi-gate Mixture-of-Experts (MMoE; Ma et al. 2018):
// every expert's output weighted by a dense gate, no routing.
// out[B, H] = sum over e of gate[b, e] * experts[b, e, :], where experts is
// [B, E, H] or, side by side, [B, E * H] (H = columns / E).
Status MixtureForward(const Tensor& gate, const Tensor& experts, Tensor* out);
// From dout[B, H]: dgate[b, e] = <dout[b], experts[b, e, :]> and
// dexperts[b, e, :] = gate[b, e] * dout[b]. Either output may be null.
Status MixtureBackward(const Tensor& gate, const Tensor& experts, const Tensor& dout,
                       Tensor* dgate, Tensor* dexperts);

// Costs, with exp counted as one flop and a compare as none; i32 indices are
// 4 bytes. The dispatch/combine costs assume every choice is kept (the upper
// bound), and C is the capacity.
// Softmax forward: max, subtract, exp, add, divide per element:
//   flops = 4 * B * E, bytes = 8 * B * E.
OpCost SoftmaxForwardCost(int64_t batch, int64_t experts);
// Softmax backward: multiply-add for the dot, subtract and multiply:
//   flops = 4 * B * E, bytes = 12 * B * E.
OpCost SoftmaxBackwardCost(int64_t batch, int64_t experts);
// RouteTopK: the selection is compares only; normalising costs k adds and k
// divides per token:  flops = (normalize ? 2 : 0) * B * k,
//   bytes = 4 * B * E + 12 * B * k.
OpCost RouteTopKCost(int64_t batch, int64_t experts, int64_t k, bool normalize_gates);
// MoeGateBackward: per token, with normalising, the dot of dgate and gate (2k)
// and per choice a subtract and a divide (2k):  flops = (normalize ? 4 : 0) * B * k,
//   bytes = 4 * B * E (dprobs) + 4 * B * k * (normalize ? 4 : 3).
OpCost MoeGateBackwardCost(int64_t batch, int64_t experts, int64_t k, bool normalize_gates);
// MoeDispatch: copies only:  flops = 0,
//   bytes = 4 * B * H + 4 * E * C * H + 8 * B * k.
OpCost MoeDispatchCost(int64_t batch, int64_t experts, int64_t capacity, int64_t k, int64_t hidden);
// MoeDispatchBackward: one add per element of each kept choice:
//   flops = B * k * H, bytes = 4 * B * k * H + 4 * B * H + 8 * B * k.
OpCost MoeDispatchBackwardCost(int64_t batch, int64_t k, int64_t hidden);
// MoeCombine: a multiply-add per element of each kept choice:
//   flops = 2 * B * k * H, bytes = 4 * B * k * H + 4 * B * H + 12 * B * k.
OpCost MoeCombineCost(int64_t batch, int64_t k, int64_t hidden);
// MoeCombineBackward: a multiply (dexpert_out) and a multiply-add (dgate) per
// element of each kept choice:  flops = 3 * B * k * H,
//   bytes = 4 * B * H + 4 * B * k * H + 4 * E * C * H + 16 * B * k.
OpCost MoeCombineBackwardCost(int64_t batch, int64_t experts, int64_t capacity, int64_t k,
                              int64_t hidden);

// Mixture forward: a multiply-add per expert element: flops = 2 * B * E * H,
//   bytes = 4 * (B * E * H + B * E + B * H). Backward: a multiply-add for
//   dgate and a multiply for dexperts per expert element: flops = 3 * B * E * H,
//   bytes = 4 * (2 * B * E * H + 2 * B * E + B * H).
OpCost MixtureCost(int64_t batch, int64_t experts, int64_t hidden, bool backward);

}  // namespace ember::ops
