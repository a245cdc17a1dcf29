// The CUDA kernels of moe_route, moe_dispatch and moe_combine
// (ops/moe_routing_ops.h): thin adapters from KernelContext to the functions
// of ops/dense_ops_cuda.h, queued on c.stream. The operators themselves,
// their shapes and costs, are registered with their CPU kernels. Those of
// moe_expert_fc and moe_balance are in ops/moe_expert_ops_cuda.cc.

#include <utility>
#include <vector>

#include "core/tensor_copy.h"
#include "ops/dense_ops_cuda.h"
#include "ops/kernel_helpers.h"
#include "ops/moe_routing.h"
#include "ops/moe_routing_cuda.h"
#include "ops/moe_routing_ops.h"

namespace ember::ops {
namespace {

// An f32 holds every integer of magnitude below 2^24 exactly (as in
// moe_routing_ops.cc).
constexpr int64_t kMaxIndex = int64_t{1} << 24;

Result<int64_t> Capacity(int64_t batch, int64_t experts, int64_t slots, int64_t k,
                         const OpAttrs& attrs) {
  const int64_t capacity = MoeNodeCapacity(batch, experts, slots, k, attrs);
  if (capacity >= kMaxIndex) {
    return Status::InvalidArgument("a batch of ", batch, " tokens gives ", capacity,
                                   " slots per expert, more than a routing value holds (",
                                   kMaxIndex, ")");
  }
  return capacity;
}

// The routing value `encoded` [B, 2, k] as a MoeRouting on the device.
Result<MoeRouting> Decode(const Tensor& encoded, int64_t experts, int64_t capacity, bool normalize,
                          CudaStream& stream) {
  MoeRouting routing;
  routing.num_experts = experts;
  routing.capacity = capacity;
  routing.normalize_gates = normalize;
  EMBER_RETURN_IF_ERROR(DecodeMoeRoutingCuda(encoded, &routing, stream));
  return routing;
}

// The experts' buffers [E, capacity, H] at the front of the batch's [B, S, H].
Tensor Buffers(const Tensor& batch_rows, int64_t experts, int64_t capacity) {
  const int64_t hidden = batch_rows.dim(2);
  return batch_rows.Reshape({batch_rows.dim(0) * batch_rows.dim(1), hidden})
      .Slice(0, experts * capacity)
      .Reshape({experts, capacity, hidden});
}

// Zeroes the rows of [B, S, H] after the experts' buffers.
Status ZeroPadding(Tensor* batch_rows, int64_t experts, int64_t capacity, CudaStream& stream) {
  const int64_t rows = batch_rows->dim(0) * batch_rows->dim(1);
  Tensor padding = batch_rows->Reshape({rows, batch_rows->dim(2)}).Slice(experts * capacity, rows);
  return ZeroTensor(&padding, &stream);
}

Status ZeroIfWanted(Tensor* grad, CudaStream& stream) {
  return grad != nullptr ? ZeroTensor(grad, &stream) : Status::OK();
}

KernelPair RouteCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_route"));
    const Tensor probs = Flat(*c.inputs[0]);
    MoeRoutingOptions options;
    options.k = static_cast<int>(c.attrs->GetInt("k", 1));
    options.normalize_gates = c.attrs->GetInt("normalize", 0) == 1;
    EMBER_ASSIGN_OR_RETURN(options.capacity, Capacity(probs.dim(0), probs.dim(1),
                                                      c.attrs->GetInt("slots", options.k),
                                                      options.k, *c.attrs));
    // Synchronises the stream (to report bad probabilities); the routing's
    // tensors are freed with cudaFree, after the copies below.
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing, RouteTopKCuda(probs, options, *s));
    Tensor gate = Flat(*c.outputs[0]);
    EMBER_RETURN_IF_ERROR(CopyTensor(routing.gate, &gate, s));
    return EncodeMoeRoutingCuda(routing, c.outputs[1], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    if (c.input_grads[0] == nullptr) return Status::OK();
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_route"));
    const Tensor probs = Flat(*c.inputs[0]);
    const int64_t k_choices = c.attrs->GetInt("k", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity, Capacity(probs.dim(0), probs.dim(1),
                                                            c.attrs->GetInt("slots", k_choices),
                                                            k_choices, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(
        const MoeRouting routing,
        Decode(*c.outputs[1], probs.dim(1), capacity, c.attrs->GetInt("normalize", 0) == 1, *s));
    Tensor dprobs = Flat(*c.input_grads[0]);
    return MoeGateBackwardCuda(probs, routing, Flat(*c.output_grads[0]), &dprobs, *s);
  };
  return k;
}

KernelPair DispatchCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_dispatch"));
    const Tensor x = Flat(*c.inputs[0]);
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(x.dim(0), experts, c.attrs->GetInt("slots", 1),
                                    Flat(*c.inputs[1]).dim(1) / 2, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           Decode(*c.inputs[1], experts, capacity, false, *s));
    Tensor buffers = Buffers(*c.outputs[0], experts, capacity);
    EMBER_RETURN_IF_ERROR(MoeDispatchCuda(x, routing, &buffers, *s));
    return ZeroPadding(c.outputs[0], experts, capacity, *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_dispatch"));
    EMBER_RETURN_IF_ERROR(ZeroIfWanted(c.input_grads[1], *s));
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dx = Flat(*c.input_grads[0]);
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(dx.dim(0), experts, c.attrs->GetInt("slots", 1),
                                    Flat(*c.inputs[1]).dim(1) / 2, *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           Decode(*c.inputs[1], experts, capacity, false, *s));
    return MoeDispatchBackwardCuda(Buffers(*c.output_grads[0], experts, capacity), routing, &dx,
                                   *s);
  };
  return k;
}

KernelPair CombineCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_combine"));
    const Tensor& expert_out = *c.inputs[0];
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(expert_out.dim(0), experts, expert_out.dim(1),
                                    Flat(*c.inputs[1]).dim(1), *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           Decode(*c.inputs[2], experts, capacity, false, *s));
    Tensor out = Flat(*c.outputs[0]);
    return MoeCombineCuda(Buffers(expert_out, experts, capacity), Flat(*c.inputs[1]), routing, &out,
                          *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "moe_combine"));
    EMBER_RETURN_IF_ERROR(ZeroIfWanted(c.input_grads[2], *s));
    const Tensor& expert_out = *c.inputs[0];
    const int64_t experts = c.attrs->GetInt("experts", 1);
    EMBER_ASSIGN_OR_RETURN(const int64_t capacity,
                           Capacity(expert_out.dim(0), experts, expert_out.dim(1),
                                    Flat(*c.inputs[1]).dim(1), *c.attrs));
    EMBER_ASSIGN_OR_RETURN(const MoeRouting routing,
                           Decode(*c.inputs[2], experts, capacity, false, *s));
    Tensor dexpert_out, dgate;
    if (c.input_grads[0] != nullptr) {
      dexpert_out = Buffers(*c.input_grads[0], experts, capacity);
      EMBER_RETURN_IF_ERROR(ZeroPadding(c.input_grads[0], experts, capacity, *s));
    }
    if (c.input_grads[1] != nullptr) dgate = Flat(*c.input_grads[1]);
    return MoeCombineBackwardCuda(Buffers(expert_out, experts, capacity), Flat(*c.inputs[1]),
                                  routing, Flat(*c.output_grads[0]),
                                  c.input_grads[0] != nullptr ? &dexpert_out : nullptr,
                                  c.input_grads[1] != nullptr ? &dgate : nullptr, *s);
  };
  return k;
}

}  // namespace

Status RegisterMoeRoutingCudaKernels(OpRegistry* registry) {
  constexpr DeviceType kCuda = DeviceType::kCuda;
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_route", kCuda, RouteCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_dispatch", kCuda, DispatchCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("moe_combine", kCuda, CombineCuda()));
  // The experts and the balance loss that make a layer of the routing.
  return RegisterMoeExpertCudaKernels(registry);
}

}  // namespace ember::ops
