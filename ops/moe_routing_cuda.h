#pragma once

// The routing of the graph operators (ops/moe_routing_ops.h) on CUDA: the
// conversions between a MoeRouting's i32 experts and slots and the f32
// routing value [B, 2, k] that the operators pass between them, and the
// auxiliary load-balancing loss of moe_balance (ops/moe_expert_ops.h). The
// other CUDA routing functions are in ops/dense_ops_cuda.h.

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/moe_routing.h"

namespace ember::ops {

class OpRegistry;  // ops/op_registry.h

// encoded[b, 0, j] = routing.expert[b, j] and encoded[b, 1, j] =
// routing.slot[b, j], as f32, queued on `stream`; every tensor on its
// device.
Status EncodeMoeRoutingCuda(const MoeRouting& routing, Tensor* encoded, CudaStream& stream);

// The inverse: routing->expert and routing->slot, i32 [B, k], allocated here
// from the stream's memory, from encoded [B, 2, k] (rounded to the nearest
// integer, saturating); nothing else of *routing is set. Indices out of
// range are left to the routing kernels, which skip them.
Status DecodeMoeRoutingCuda(const Tensor& encoded, MoeRouting* routing, CudaStream& stream);

// moe_balance's forward on probs f32 [B, E] (E >= 1): out = probs and
// share[b] = (E / L) * sum_e f_e * probs[b, e], f_e the fraction of the B
// examples whose largest probability is e's (ties to the lower index) and
// L = max(loss_examples, B), the examples the objective is a mean over
// (KernelContext::loss_examples; 0: the batch). The f64 arithmetic is the CPU
// kernel's (the same bits). out [B, E] and share [B] f32; every tensor on
// the stream's device. InvalidArgument naming the operand that does not fit.
Status MoeBalanceForwardCuda(const Tensor& probs, int64_t loss_examples, Tensor* out, Tensor* share,
                             CudaStream& stream);

// Its backward: dprobs = dout + f32(weight * E * f_e / L), L as above;
// dprobs [B, E] is overwritten. The B examples are one group: f is over all
// of them. InvalidArgument also for a weight that is negative or not finite.
Status MoeBalanceBackwardCuda(const Tensor& probs, const Tensor& dout, double weight,
                              int64_t loss_examples, Tensor* dprobs, CudaStream& stream);

// Registers the CUDA kernels of moe_expert_fc and moe_balance
// (ops/moe_expert_ops_cuda.cc; RegisterMoeRoutingCudaKernels calls it).
// The operators must be registered already; AlreadyExists when the kernels
// are.
Status RegisterMoeExpertCudaKernels(OpRegistry* registry);

}  // namespace ember::ops
