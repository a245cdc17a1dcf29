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
// With KernelContext::experts (expert parallelism, ops/expert_parallel.h)
// moe_expert_fc sends its rows to the experts' ranks and back over the dense
// communicator, on the device (NCCL), and computes its own experts' rows
// block by block as the CPU kernel does. Compiled, not yet run on a GPU.

#include <vector>

#include "core/tensor_copy.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"
#include "ops/expert_parallel.h"
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

// --- Expert parallelism (ops/expert_parallel.h): the rows of this rank's
// experts from every rank, block by block, as the CPU kernel computes them.

Status BlocksForwardCuda(const Tensor& x, const std::vector<ExpertBlock>& blocks,
                         const Tensor& weight, const Tensor& bias, const ExpertLayout& v,
                         ComputePrecision precision, CudaStream& s, Tensor* y) {
  for (const ExpertBlock& b : blocks) {
    if (b.end <= b.begin) continue;
    Tensor yb = y->Slice(b.begin, b.end);
    EMBER_RETURN_IF_ERROR(FullyConnectedForwardCuda(
        x.Slice(b.begin, b.end), ExpertWeight(weight, v, b.expert), ExpertBias(bias, v, b.expert),
        v.activation, &yb, s, precision));
  }
  return Status::OK();
}

// An expert's first block writes its parameter gradients, later blocks add
// to them in block order; an expert without a block gets zeros.
Status BlocksBackwardCuda(const Tensor& x, const Tensor& y, const Tensor& dy,
                          const std::vector<ExpertBlock>& blocks, const Tensor& weight,
                          const ExpertLayout& v, ComputePrecision precision, CudaStream& s,
                          Tensor* dx, Tensor* dweight, Tensor* dbias) {
  const Device device = Device::Cuda(s.device());
  std::vector<char> written(static_cast<size_t>(v.experts), 0);
  Tensor dw_more, db_more;
  for (const ExpertBlock& b : blocks) {
    const bool first = !written[b.expert];
    if (!first && b.end <= b.begin) continue;
    Tensor dwe = ExpertWeight(*dweight, v, b.expert);
    Tensor dbe = ExpertBias(*dbias, v, b.expert);
    if (!first && !dw_more.defined()) {
      EMBER_ASSIGN_OR_RETURN(dw_more,
                             Tensor::Allocate({v.out, v.in}, DType::kF32, device, s.allocator()));
      EMBER_ASSIGN_OR_RETURN(db_more, Tensor::Allocate({v.out}, DType::kF32, device, s.allocator()));
    }
    Tensor dxb;
    if (dx->defined()) dxb = dx->Slice(b.begin, b.end);
    EMBER_RETURN_IF_ERROR(FullyConnectedBackwardCuda(
        x.Slice(b.begin, b.end), ExpertWeight(weight, v, b.expert), y.Slice(b.begin, b.end),
        dy.Slice(b.begin, b.end), v.activation, dx->defined() ? &dxb : nullptr,
        first ? &dwe : &dw_more, first ? &dbe : &db_more, s, precision));
    if (!first) {
      EMBER_RETURN_IF_ERROR(AddCuda(dwe, dw_more, &dwe, s));
      EMBER_RETURN_IF_ERROR(AddCuda(dbe, db_more, &dbe, s));
    }
    written[b.expert] = 1;
  }
  for (int64_t e = 0; e < v.experts; ++e) {
    if (written[e]) continue;
    Tensor dwe = dweight->Slice(e, e + 1), dbe = dbias->Slice(e, e + 1);
    EMBER_RETURN_IF_ERROR(ZeroTensor(&dwe, &s));
    EMBER_RETURN_IF_ERROR(ZeroTensor(&dbe, &s));
  }
  return Status::OK();
}

Status ExpertFcForward(KernelContext& c) {
  EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_expert_fc"));
  const ExpertLayout v = ExpertLayoutOf(c);
  const Tensor x = c.inputs[0]->Reshape({v.rows, v.in});
  Tensor y = c.outputs[0]->Reshape({v.rows, v.out});
  if (c.experts != nullptr) {
    // Over NCCL, on the device (the dense communicator of a CUDA rank).
    std::vector<ExpertBlock> blocks;
    EMBER_ASSIGN_OR_RETURN(Tensor received,
                           c.experts->Dispatch(c.node, x, v.experts, v.capacity,
                                               /*backward=*/false, &blocks, s));
    EMBER_ASSIGN_OR_RETURN(Tensor computed,
                           Tensor::Allocate({received.dim(0), v.out}, DType::kF32,
                                            Device::Cuda(s->device()), s->allocator()));
    EMBER_RETURN_IF_ERROR(BlocksForwardCuda(received, blocks, *c.inputs[1], *c.inputs[2], v,
                                            c.precision, *s, &computed));
    EMBER_RETURN_IF_ERROR(c.experts->Combine(c.node, computed, /*backward=*/false, &y, s));
    c.experts->kept(c.node) = {received, computed};
    return ZeroPadding(y, v, *s);
  }
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
  if (c.experts != nullptr) {
    std::vector<ExpertBlock> blocks;
    EMBER_ASSIGN_OR_RETURN(Tensor received_dy,
                           c.experts->Dispatch(c.node, dy, v.experts, v.capacity,
                                               /*backward=*/true, &blocks, s));
    const std::vector<Tensor> kept = c.experts->kept(c.node);
    if (kept.size() != 2) {
      return Status::FailedPrecondition("the backward of an expert layer without its forward");
    }
    Tensor received_dx;
    if (dx.defined()) {
      EMBER_ASSIGN_OR_RETURN(received_dx, Tensor::Allocate({kept[0].dim(0), v.in}, DType::kF32,
                                                           device, s->allocator()));
    }
    EMBER_RETURN_IF_ERROR(BlocksBackwardCuda(kept[0], kept[1], received_dy, blocks, weight, v,
                                             c.precision, *s, &received_dx, &dweight, &dbias));
    if (dx.defined()) {
      EMBER_RETURN_IF_ERROR(c.experts->Combine(c.node, received_dx, /*backward=*/true, &dx, s));
    }
    c.experts->kept(c.node).clear();
    return dx.defined() ? ZeroPadding(dx, v, *s) : Status::OK();
  }
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
