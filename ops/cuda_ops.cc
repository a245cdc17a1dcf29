// The CUDA kernels of the registry's operators: thin adapters from
// KernelContext to the functions of dense_ops_cuda.h, queued on c.stream,
// one for every operator RegisterCpuOps defines (the operators themselves,
// their shapes and costs, are registered there).

#include <utility>
#include <vector>

#include "ops/dense_ops_cuda.h"
#include "ops/kernel_helpers.h"
#include "ops/moe_routing_ops.h"
#include "ops/op_registry.h"

namespace ember::ops {
namespace {

// The elements of one example of [B, shape...]: the product of the shape,
// also for B = 0 (where numel / B would divide by zero).
int64_t PerExample(const Tensor& t) {
  int64_t n = 1;
  for (int i = 1; i < t.ndim(); ++i) n *= t.dim(i);
  return n;
}

// A device tensor of `shape` for the duration of one kernel call (an
// intermediate, or a gradient nobody asked for but that the kernel writes
// anyway), in the stream's stream-ordered memory: freeing it at the end of
// the call waits for nothing, and its reuse waits for the work queued on it.
Result<Tensor> TemporaryOfShape(std::vector<int64_t> shape, const CudaStream& stream) {
  return Tensor::Allocate(std::move(shape), DType::kF32, Device::Cuda(stream.device()),
                          stream.allocator());
}

Result<Tensor> Temporary(const Tensor& like, const CudaStream& stream) {
  return TemporaryOfShape(like.shape(), stream);
}

Activation ActivationOf(const OpAttrs& attrs) {
  return attrs.GetInt("activation", 0) == 1 ? Activation::kRelu : Activation::kNone;
}

Tensor As3d(const Tensor& t, const OpAttrs& attrs, int64_t fallback_features) {
  const int64_t f = attrs.GetInt("features", fallback_features);
  return t.Reshape({t.dim(0), f, PerExample(t) / f});
}

KernelPair FullyConnectedCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "fully_connected"));
    return FullyConnectedForwardCuda(Flat(*c.inputs[0]), *c.inputs[1], *c.inputs[2],
                                     ActivationOf(*c.attrs), c.outputs[0], *s, c.precision);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "fully_connected"));
    Tensor dx;
    if (c.input_grads[0] != nullptr) dx = Flat(*c.input_grads[0]);
    // The weight and bias gradients are always written.
    Tensor dw, db;
    if (c.input_grads[1] == nullptr) {
      EMBER_ASSIGN_OR_RETURN(dw, Temporary(*c.inputs[1], *s));
    }
    if (c.input_grads[2] == nullptr) {
      EMBER_ASSIGN_OR_RETURN(db, Temporary(*c.inputs[2], *s));
    }
    return FullyConnectedBackwardCuda(
        Flat(*c.inputs[0]), *c.inputs[1], *c.outputs[0], *c.output_grads[0], ActivationOf(*c.attrs),
        c.input_grads[0] != nullptr ? &dx : nullptr,
        c.input_grads[1] != nullptr ? c.input_grads[1] : &dw,
        c.input_grads[2] != nullptr ? c.input_grads[2] : &db, *s, c.precision);
  };
  return k;
}

KernelPair ConcatCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "concat"));
    std::vector<Tensor> parts;
    for (const Tensor* t : c.inputs) parts.push_back(Flat(*t));
    return ConcatColumnsCuda(parts, c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "concat"));
    std::vector<Tensor> parts;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.input_grads[i] != nullptr) {
        parts.push_back(Flat(*c.input_grads[i]));
      } else {
        // An input that needs no gradient still takes its columns somewhere.
        EMBER_ASSIGN_OR_RETURN(Tensor part, Temporary(Flat(*c.inputs[i]), *s));
        parts.push_back(part);
      }
    }
    return SplitColumnsCuda(*c.output_grads[0], &parts, *s);
  };
  return k;
}

KernelPair DotInteractionCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dot_interaction"));
    return DotInteractionForwardCuda(As3d(*c.inputs[0], *c.attrs, 2), c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dot_interaction"));
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dfeatures = As3d(*c.input_grads[0], *c.attrs, 2);
    return DotInteractionBackwardCuda(As3d(*c.inputs[0], *c.attrs, 2), *c.output_grads[0],
                                      &dfeatures, *s);
  };
  return k;
}

// DLRM's interaction layer as the concat, dot interaction and concat it
// stands for (a fused kernel is left for when a GPU can measure it).
KernelPair DlrmInteractionCuda() {
  struct Shape {
    int64_t batch, dim, features, pairs;
  };
  auto shape_of = [](const Tensor& direct, const Tensor& pooled) {
    const int64_t dim = direct.dim(1), features = pooled.dim(1) / dim + 1;
    return Shape{direct.dim(0), dim, features, features * (features - 1) / 2};
  };
  KernelPair k;
  k.forward = [shape_of](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dlrm_interaction"));
    const Tensor direct = Flat(*c.inputs[0]), pooled = Flat(*c.inputs[1]);
    const Shape n = shape_of(direct, pooled);
    EMBER_ASSIGN_OR_RETURN(Tensor features, TemporaryOfShape({n.batch, n.features * n.dim}, *s));
    EMBER_RETURN_IF_ERROR(ConcatColumnsCuda({direct, pooled}, &features, *s));
    EMBER_ASSIGN_OR_RETURN(Tensor dots, TemporaryOfShape({n.batch, n.pairs}, *s));
    EMBER_RETURN_IF_ERROR(
        DotInteractionForwardCuda(features.Reshape({n.batch, n.features, n.dim}), &dots, *s));
    return ConcatColumnsCuda({direct, dots}, c.outputs[0], *s);
  };
  k.backward = [shape_of](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dlrm_interaction"));
    const Tensor direct = Flat(*c.inputs[0]), pooled = Flat(*c.inputs[1]);
    const Shape n = shape_of(direct, pooled);
    EMBER_ASSIGN_OR_RETURN(Tensor features, TemporaryOfShape({n.batch, n.features * n.dim}, *s));
    EMBER_RETURN_IF_ERROR(ConcatColumnsCuda({direct, pooled}, &features, *s));
    EMBER_ASSIGN_OR_RETURN(Tensor dpassed, Temporary(direct, *s));
    EMBER_ASSIGN_OR_RETURN(Tensor ddots, TemporaryOfShape({n.batch, n.pairs}, *s));
    std::vector<Tensor> dout_parts = {dpassed, ddots};
    EMBER_RETURN_IF_ERROR(SplitColumnsCuda(*c.output_grads[0], &dout_parts, *s));
    EMBER_ASSIGN_OR_RETURN(Tensor dfeatures, Temporary(features, *s));
    Tensor dfeatures_3d = dfeatures.Reshape({n.batch, n.features, n.dim});
    EMBER_RETURN_IF_ERROR(DotInteractionBackwardCuda(features.Reshape({n.batch, n.features, n.dim}),
                                                     ddots, &dfeatures_3d, *s));
    EMBER_ASSIGN_OR_RETURN(Tensor ddirect_dots, Temporary(direct, *s));
    Tensor dpooled;
    if (c.input_grads[1] != nullptr) {
      dpooled = Flat(*c.input_grads[1]);
    } else {
      EMBER_ASSIGN_OR_RETURN(dpooled, Temporary(pooled, *s));
    }
    std::vector<Tensor> feature_parts = {ddirect_dots, dpooled};
    EMBER_RETURN_IF_ERROR(SplitColumnsCuda(dfeatures, &feature_parts, *s));
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor ddirect = Flat(*c.input_grads[0]);
    return AddCuda(ddirect_dots, dpassed, &ddirect, *s);
  };
  return k;
}

KernelPair AddCudaKernels() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "add"));
    return AddCuda(*c.inputs[0], *c.inputs[1], c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "add"));
    for (Tensor* d : c.input_grads) {
      // A copy through the dropout kernel at rate 0 (a device-to-device copy).
      if (d == nullptr) continue;
      EMBER_RETURN_IF_ERROR(DropoutForwardCuda(*c.output_grads[0], DropoutOptions{}, 0, d, *s));
    }
    return Status::OK();
  };
  return k;
}

KernelPair FmInteractionCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "fm_interaction"));
    return FmInteractionForwardCuda(As3d(*c.inputs[0], *c.attrs, 1), c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "fm_interaction"));
    if (c.input_grads[0] == nullptr) return Status::OK();
    Tensor dfeatures = As3d(*c.input_grads[0], *c.attrs, 1);
    return FmInteractionBackwardCuda(As3d(*c.inputs[0], *c.attrs, 1), *c.output_grads[0],
                                     &dfeatures, *s);
  };
  return k;
}

KernelPair CrossLayerCuda(bool low_rank) {
  KernelPair k;
  k.forward = [low_rank](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "cross_layer"));
    const Tensor x0 = Flat(*c.inputs[0]), xl = Flat(*c.inputs[1]);
    // Outputs 1 (and 2) are the intermediates saved for the backward
    // (ops/cpu_ops.cc, CrossLayerDef).
    if (low_rank) {
      return LowRankCrossLayerForwardCuda(x0, xl, *c.inputs[2], *c.inputs[3], *c.inputs[4],
                                          c.outputs[0], *s, c.outputs[1], c.outputs[2]);
    }
    return CrossLayerForwardCuda(x0, xl, *c.inputs[2], *c.inputs[3], c.outputs[0], *s,
                                 c.outputs[1]);
  };
  k.backward = [low_rank](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "cross_layer"));
    const Tensor x0 = Flat(*c.inputs[0]), xl = Flat(*c.inputs[1]);
    const Tensor* saved_z = c.outputs[low_rank ? 2 : 1];
    // The kernel writes every gradient: unneeded ones go to temporaries.
    std::vector<Tensor> grads;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (c.input_grads[i] != nullptr) {
        grads.push_back(*c.input_grads[i]);
      } else {
        EMBER_ASSIGN_OR_RETURN(Tensor grad, Temporary(*c.inputs[i], *s));
        grads.push_back(grad);
      }
    }
    Tensor dx0 = Flat(grads[0]), dxl = Flat(grads[1]);
    if (low_rank) {
      return LowRankCrossLayerBackwardCuda(x0, xl, *c.inputs[2], *c.inputs[3], *c.inputs[4],
                                           *c.output_grads[0], &dx0, &dxl, &grads[2], &grads[3],
                                           &grads[4], *s, c.outputs[1], saved_z);
    }
    return CrossLayerBackwardCuda(x0, xl, *c.inputs[2], *c.inputs[3], *c.output_grads[0], &dx0,
                                  &dxl, &grads[2], &grads[3], *s, saved_z);
  };
  return k;
}

DropoutOptions DropoutOptionsOf(const KernelContext& c) {
  DropoutOptions options;
  options.rate = c.training ? c.attrs->Get("rate", 0.0) : 0.0;
  options.seed = static_cast<uint64_t>(c.attrs->GetInt("seed", 0));
  return options;
}

KernelPair DropoutCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dropout"));
    return DropoutForwardCuda(*c.inputs[0], DropoutOptionsOf(c), static_cast<uint64_t>(c.step),
                              c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "dropout"));
    if (c.input_grads[0] == nullptr) return Status::OK();
    return DropoutBackwardCuda(*c.output_grads[0], DropoutOptionsOf(c),
                               static_cast<uint64_t>(c.step), c.input_grads[0], *s);
  };
  return k;
}

KernelPair SoftmaxCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "softmax"));
    return SoftmaxForwardCuda(*c.inputs[0], c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "softmax"));
    if (c.input_grads[0] == nullptr) return Status::OK();
    return SoftmaxBackwardCuda(*c.outputs[0], *c.output_grads[0], c.input_grads[0], *s);
  };
  return k;
}

KernelPair MixtureCuda() {
  KernelPair k;
  k.forward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "mixture"));
    return MixtureForwardCuda(*c.inputs[0], *c.inputs[1], c.outputs[0], *s);
  };
  k.backward = [](KernelContext& c) -> Status {
    EMBER_ASSIGN_OR_RETURN(CudaStream * s, StreamOf(c, "mixture"));
    return MixtureBackwardCuda(*c.inputs[0], *c.inputs[1], *c.output_grads[0], c.input_grads[0],
                               c.input_grads[1], *s);
  };
  return k;
}

}  // namespace

Status RegisterCudaOps(OpRegistry* registry) {
  const DeviceType kCuda = DeviceType::kCuda;
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("fully_connected", kCuda, FullyConnectedCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("concat", kCuda, ConcatCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("dot_interaction", kCuda, DotInteractionCuda()));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("dlrm_interaction", kCuda, DlrmInteractionCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("add", kCuda, AddCudaKernels()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("fm_interaction", kCuda, FmInteractionCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("cross_layer", kCuda, CrossLayerCuda(false)));
  EMBER_RETURN_IF_ERROR(
      registry->RegisterKernel("cross_layer_low_rank", kCuda, CrossLayerCuda(true)));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("dropout", kCuda, DropoutCuda()));
  EMBER_RETURN_IF_ERROR(registry->RegisterKernel("softmax", kCuda, SoftmaxCuda()));
  // MMoE's mixture is newer than the other operators: registered with it.
  if (registry->FindOp("mixture").ok()) {
    EMBER_RETURN_IF_ERROR(registry->RegisterKernel("mixture", kCuda, MixtureCuda()));
  }
  // The routing operators, likewise (ops/moe_routing_ops_cuda.cc).
  if (registry->FindOp("moe_route").ok()) {
    EMBER_RETURN_IF_ERROR(RegisterMoeRoutingCudaKernels(registry));
  }
  return Status::OK();
}

}  // namespace ember::ops
