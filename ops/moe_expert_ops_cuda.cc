// The CUDA kernels of moe_expert_fc and moe_balance (ops/moe_expert_ops.h),
// queued on c.stream. The operators themselves, their shapes and costs, are
// registered with their CPU kernels.
//
// moe_expert_fc is the CUDA fully connected layer (ops/dense_ops_cuda.h) once
// per expert, on that expert's rows of the buffers and its slice of the
// weight and bias: the fused cuBLASLt paths and c.precision come with it. One
// GEMM per expert rather than one strided-batched GEMM: E is small (the
// experts of a layer, not the examples), and a batched GEMM would give up the
// fused bias, ReLU and bias gradient epilogues. moe_balance is in
// ops/cuda/moe_expert.cu.
//
// KernelContext::experts (expert parallelism) is not read: these kernels run
// every expert on this device.

#include "core/tensor_copy.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"
#include "ops/kernel_helpers.h"
#include "ops/moe_expert_ops.h"
#include "ops/moe_routing_cuda.h"
#include "ops/moe_routing_ops.h"
#include "ops/op_registry.h"

namespace ember::ops {
namespace {

// --- moe_expert_fc: buffers [S, in], weight [E, out, in], bias [E, out] -> [S, out]

// Expert e's rows of a [rows, width] view of the buffers.
Tensor ExpertRows(const Tensor& rows, const ExpertLayout& v, int64_t e) {
  return rows.Slice(e * v.capacity, (e + 1) * v.capacity);
}

// Expert e's [out, in] weight or [out] bias.
Tensor ExpertWeight(const Tensor& weight, const ExpertLayout& v, int64_t e) {
  return weight.Slice(e, e + 1).Reshape({v.out, v.in});
}
Tensor ExpertBias(const Tensor& bias, const ExpertLayout& v, int64_t e) {
  return bias.Slice(e, e + 1).Reshape({v.out});
}

// Zeroes the rows of `rows` [rows, width] after the experts' E * C.
Status ZeroPadding(const Tensor& rows, const ExpertLayout& v, CudaStream& stream) {
  Tensor padding = rows.Slice(v.experts * v.capacity, v.rows);
  return ZeroTensor(&padding, &stream);
}

Status ExpertFcForward(KernelContext& c) {
  EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_expert_fc"));
  const ExpertLayout v = ExpertLayoutOf(c);
  const Tensor x = c.inputs[0]->Reshape({v.rows, v.in});
  const Tensor y = c.outputs[0]->Reshape({v.rows, v.out});
  for (int64_t e = 0; v.capacity > 0 && e < v.experts; ++e) {
    Tensor ye = ExpertRows(y, v, e);
    EMBER_RETURN_IF_ERROR(FullyConnectedForwardCuda(
        ExpertRows(x, v, e), ExpertWeight(*c.inputs[1], v, e), ExpertBias(*c.inputs[2], v, e),
        v.activation, &ye, *s, c.precision));
  }
  return ZeroPadding(y, v, *s);
}

Status ExpertFcBackward(KernelContext& c) {
  EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_expert_fc"));
  const ExpertLayout v = ExpertLayoutOf(c);
  const Tensor x = c.inputs[0]->Reshape({v.rows, v.in});
  const Tensor y = c.outputs[0]->Reshape({v.rows, v.out});
  const Tensor dy = c.output_grads[0]->Reshape({v.rows, v.out});
  const Tensor& weight = *c.inputs[1];
  const Device device = Device::Cuda(s->device());
  // The parameters' gradients are wanted in every graph that trains them;
  // stream-ordered scratch stands in for one that is not.
  Tensor dweight, dbias;
  if (c.input_grads[1] != nullptr) {
    dweight = *c.input_grads[1];
  } else {
    EMBER_ASSIGN_OR_RETURN(dweight,
                           Tensor::Allocate(weight.shape(), DType::kF32, device, s->allocator()));
  }
  if (c.input_grads[2] != nullptr) {
    dbias = *c.input_grads[2];
  } else {
    EMBER_ASSIGN_OR_RETURN(
        dbias, Tensor::Allocate(c.inputs[2]->shape(), DType::kF32, device, s->allocator()));
  }
  if (v.capacity == 0) {
    // No expert has a row: nothing reaches the parameters.
    EMBER_RETURN_IF_ERROR(ZeroTensor(&dweight, s));
    EMBER_RETURN_IF_ERROR(ZeroTensor(&dbias, s));
  }
  Tensor dx;
  if (c.input_grads[0] != nullptr) dx = c.input_grads[0]->Reshape({v.rows, v.in});
  for (int64_t e = 0; v.capacity > 0 && e < v.experts; ++e) {
    Tensor dwe = ExpertWeight(dweight, v, e);
    Tensor dbe = ExpertBias(dbias, v, e);
    Tensor dxe;
    if (dx.defined()) dxe = ExpertRows(dx, v, e);
    EMBER_RETURN_IF_ERROR(FullyConnectedBackwardCuda(
        ExpertRows(x, v, e), ExpertWeight(weight, v, e), ExpertRows(y, v, e), ExpertRows(dy, v, e),
        v.activation, dx.defined() ? &dxe : nullptr, &dwe, &dbe, *s, c.precision));
  }
  return dx.defined() ? ZeroPadding(dx, v, *s) : Status::OK();
}

// --- moe_balance: probs [E] -> probs [E], aux share [1] ------------------------------

Status BalanceForward(KernelContext& c) {
  EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_balance"));
  const Tensor probs = Flat(*c.inputs[0]);
  Tensor out = Flat(*c.outputs[0]);
  Tensor share = c.outputs[1]->Reshape({probs.dim(0)});
  return MoeBalanceForwardCuda(probs, c.loss_examples, &out, &share, *s);
}

// The kernel's rows are one group: f is over all of them; the shares and
// the gradient are scaled by c.loss_examples (at least the rows).
Status BalanceBackward(KernelContext& c) {
  if (c.input_grads[0] == nullptr) return Status::OK();
  EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_balance"));
  Tensor dprobs = Flat(*c.input_grads[0]);
  return MoeBalanceBackwardCuda(Flat(*c.inputs[0]), Flat(*c.output_grads[0]),
                                c.attrs->Get("weight", 0.0), c.loss_examples, &dprobs, *s);
}

}  // namespace

Status RegisterMoeExpertCudaKernels(OpRegistry* registry) {
  constexpr DeviceType kCuda = DeviceType::kCuda;
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_expert_fc", kCuda,
                                                 KernelPair{ExpertFcForward, ExpertFcBackward}));
  return registry->RegisterKernel("moe_balance", kCuda,
                                  KernelPair{BalanceForward, BalanceBackward});
}

}  // namespace ember::ops
