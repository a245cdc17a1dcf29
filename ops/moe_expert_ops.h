#pragma once

// The operators that make a routed mixture-of-experts layer out of the
// routing of ops/moe_routing_ops.h: the experts themselves (a fully connected
// layer per expert over its buffer), the auxiliary load-balancing loss on the
// gate, and the per-step statistics a trainer reports.
//
// A layer with E experts over tokens x [H]:
//
//   probs  = softmax(fully_connected(x; gate weight [E, H]))          [E]
//   probs', aux = moe_balance(probs)                                  [E], [1]
//   gate, routing = moe_route(probs')                                  [k], [2, k]
//   buffers = moe_dispatch(x, routing)                                 [S, H]
//   h_l = moe_expert_fc(h_{l-1}; weight [E, H_l, H_{l-1}], bias [E, H_l])  [S, H_l]
//   out = moe_combine(h_last, gate, routing)                           [H_last]
//
// * moe_expert_fc (inputs: buffers [S, in] batched, weight [E, out, in] and
//   bias [E, out] parameters; attrs "activation" 0 none / 1 relu, and the
//   "slots"/"k"/"capacity_factor" of its layer's routing, which fix the
//   capacity C = MoeNodeCapacity(B, E, S, k, attrs)): expert e's rows
//   [e * C, (e + 1) * C) of the batch's buffers viewed as [B * S, in] go
//   through act(x W_e^T + b_e); the padding rows after E * C are zero, in the
//   output and in the gradient of the input. Unclaimed rows of an expert's
//   buffer (zeros in) are computed too (act(b_e) out) and, since moe_combine
//   reads none of them, get no gradient. S must be the buffers' first
//   dimension.
// * moe_balance (input: probs [E]; attrs "weight" w >= 0): output 0 is probs
//   unchanged; output 1 is each example's share of the auxiliary loss
//   aux = E * sum_e f_e * P_e (GShard, Lepikhin et al. 2020, eq. 4; Switch,
//   Fedus et al. 2021, eq. 4), f_e the fraction of the batch whose most
//   probable expert is e (ties to the lower index) and P_e the mean of
//   probs[:, e], both over the group of rows the kernel is given: example b
//   holds E * sum_e f_e * probs[b, e] / L, L the examples the objective is a
//   mean over (KernelContext::loss_examples, at least the group), so that a
//   group's sum is aux * group / L and the sum over the groups of a batch is
//   their weighted mean (1 when the load is uniform). The backward adds
//   w * E * f_e / L to the gradient of probs (f held fixed, as both papers
//   do); the gradient reaching output 1 is ignored. The loss thus enters
//   training through the gradient alone: a model's objective is its logits'
//   mean loss + w * the groups' mean aux, however the batch is split into
//   row ranges or ranks.
//
// Neither computes a row from that row alone (the capacity and f depend on
// the batch), so neither is rows_independent; both compute over the rows they
// are given as one group (rows_grouped).
//
// Expert parallelism: with KernelContext::experts set, moe_expert_fc sends
// its rows to the ranks that own their experts and back
// (ops/expert_parallel.h); without it every expert runs here.

#include <cstdint>
#include <functional>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"
#include "ops/graph.h"
#include "ops/op_registry.h"

namespace ember::ops {

// How a moe_expert_fc kernel sees its buffers (for the CPU and the CUDA
// kernels alike): `experts` x `capacity` rows of expert rows first (expert
// e's at [e * capacity, (e + 1) * capacity)), then padding up to `rows`
// (batch x slots), `in` floats wide in and `out` wide out.
struct ExpertLayout {
  int64_t experts = 0, capacity = 0, rows = 0, in = 0, out = 0;
  Activation activation = Activation::kNone;
};
ExpertLayout ExpertLayoutOf(const KernelContext& c);

// Registers moe_expert_fc and moe_balance with their CPU kernels
// (RegisterMoeRoutingOps calls it). AlreadyExists when they already are.
Status RegisterMoeExpertOps(OpRegistry* registry);

// What the MoE layers of a graph did in one forward, summed over the layers.
struct MoeStepStats {
  // Layers (moe_route nodes) in the graph.
  int layers = 0;
  // Routed choices (B * k per layer) and those dropped because their expert
  // was full (moe_route's slot -1).
  int64_t choices = 0;
  int64_t dropped_choices = 0;
  // Examples that lost at least one choice, per layer, summed over the
  // layers (such an example's output misses that expert's share; with
  // k = 1, the whole MoE output, which is then zero).
  int64_t dropped_examples = 0;
  // The auxiliary losses of the moe_balance nodes, unweighted (1 when the
  // load is uniform), summed over them.
  double aux_loss = 0.0;
  // Bytes this rank's expert layers sent to other ranks, and the seconds of
  // their exchanges (expert parallelism, ops/expert_parallel.h; 0 without
  // it), forward and backward.
  int64_t exchanged_bytes = 0;
  double exchange_seconds = 0.0;
};

// The statistics of `graph`'s last forward. `value(id)` gives the host
// tensor [B, ...] of activation `id` from that forward (the routing output
// of each moe_route node, output 1 of each moe_balance node), or null when it
// is not available (its layer is then not counted). A graph without MoE
// layers gives zeros.
MoeStepStats CollectMoeStats(const Graph& graph,
                             const std::function<const Tensor*(int value_id)>& value);

}  // namespace ember::ops
