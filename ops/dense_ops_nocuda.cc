// The CUDA operators of dense_ops_cuda.h in a build without CUDA: each
// returns FailedPrecondition, so that callers link and fail cleanly.
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

Status NoCuda(const char* op) {
  return Status::FailedPrecondition(op, ": Ember was built without CUDA");
}

}  // namespace

Status FullyConnectedForwardCuda(const Tensor&, const Tensor&, const Tensor&, Activation, Tensor*,
                                 CudaStream&, ComputePrecision) {
  return NoCuda("FullyConnectedForwardCuda");
}
Status FullyConnectedBackwardCuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  Activation, Tensor*, Tensor*, Tensor*, CudaStream&,
                                  ComputePrecision) {
  return NoCuda("FullyConnectedBackwardCuda");
}
Status ReluForwardCuda(const Tensor&, Tensor*, CudaStream&) { return NoCuda("ReluForwardCuda"); }
Status ReluBackwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("ReluBackwardCuda");
}
Status SigmoidCuda(const Tensor&, Tensor*, CudaStream&) { return NoCuda("SigmoidCuda"); }
Status SigmoidBackwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("SigmoidBackwardCuda");
}
Status AddCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) { return NoCuda("AddCuda"); }
Status EmbeddingBagForwardCuda(const Tensor&, const Tensor&, const Tensor&, Pooling, Tensor*,
                               CudaStream&) {
  return NoCuda("EmbeddingBagForwardCuda");
}
Status EmbeddingBagBackwardCuda(const Tensor&, const Tensor&, const Tensor&, Pooling, Tensor*,
                                CudaStream&) {
  return NoCuda("EmbeddingBagBackwardCuda");
}
Status ConcatColumnsCuda(const std::vector<Tensor>&, Tensor*, CudaStream&) {
  return NoCuda("ConcatColumnsCuda");
}
Status SplitColumnsCuda(const Tensor&, std::vector<Tensor>*, CudaStream&) {
  return NoCuda("SplitColumnsCuda");
}
Status DotInteractionForwardCuda(const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("DotInteractionForwardCuda");
}
Status DotInteractionBackwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("DotInteractionBackwardCuda");
}
Status FmInteractionForwardCuda(const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("FmInteractionForwardCuda");
}
Status FmInteractionBackwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("FmInteractionBackwardCuda");
}
Result<double> SigmoidCrossEntropyWithLogitsCuda(const Tensor&, const Tensor&, Tensor*,
                                                 CudaStream&) {
  return NoCuda("SigmoidCrossEntropyWithLogitsCuda");
}
Status CrossLayerForwardCuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor*,
                             CudaStream&, Tensor*) {
  return NoCuda("CrossLayerForwardCuda");
}
Status CrossLayerBackwardCuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, Tensor*, Tensor*, Tensor*, Tensor*, CudaStream&,
                              const Tensor*) {
  return NoCuda("CrossLayerBackwardCuda");
}
Status LowRankCrossLayerForwardCuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const Tensor&, Tensor*, CudaStream&, Tensor*, Tensor*) {
  return NoCuda("LowRankCrossLayerForwardCuda");
}
Status LowRankCrossLayerBackwardCuda(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     const Tensor&, const Tensor&, Tensor*, Tensor*, Tensor*,
                                     Tensor*, Tensor*, CudaStream&, const Tensor*, const Tensor*) {
  return NoCuda("LowRankCrossLayerBackwardCuda");
}
Status SoftmaxForwardCuda(const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("SoftmaxForwardCuda");
}
Status SoftmaxBackwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("SoftmaxBackwardCuda");
}
Result<MoeRouting> RouteTopKCuda(const Tensor&, const MoeRoutingOptions&, CudaStream&) {
  return NoCuda("RouteTopKCuda");
}
Status MoeGateBackwardCuda(const Tensor&, const MoeRouting&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("MoeGateBackwardCuda");
}
Status MoeDispatchCuda(const Tensor&, const MoeRouting&, Tensor*, CudaStream&) {
  return NoCuda("MoeDispatchCuda");
}
Status MoeDispatchBackwardCuda(const Tensor&, const MoeRouting&, Tensor*, CudaStream&) {
  return NoCuda("MoeDispatchBackwardCuda");
}
Status MoeCombineCuda(const Tensor&, const Tensor&, const MoeRouting&, Tensor*, CudaStream&) {
  return NoCuda("MoeCombineCuda");
}
Status MoeCombineBackwardCuda(const Tensor&, const Tensor&, const MoeRouting&, const Tensor&,
                              Tensor*, Tensor*, CudaStream&) {
  return NoCuda("MoeCombineBackwardCuda");
}
Status MixtureForwardCuda(const Tensor&, const Tensor&, Tensor*, CudaStream&) {
  return NoCuda("MixtureForwardCuda");
}
Status MixtureBackwardCuda(const Tensor&, const Tensor&, const Tensor&, Tensor*, Tensor*,
                           CudaStream&) {
  return NoCuda("MixtureBackwardCuda");
}
Status DropoutForwardCuda(const Tensor&, const DropoutOptions&, uint64_t, Tensor*, CudaStream&) {
  return NoCuda("DropoutForwardCuda");
}
Status DropoutBackwardCuda(const Tensor&, const DropoutOptions&, uint64_t, Tensor*, CudaStream&) {
  return NoCuda("DropoutBackwardCuda");
}
Result<DenseOptimizerSlot> NewDenseOptimizerSlotCuda(const DenseOptimizerOptions&, const Tensor&,
                                                     CudaStream&) {
  return NoCuda("NewDenseOptimizerSlotCuda");
}
Status DenseOptimizerStepCuda(const DenseOptimizerOptions&, int64_t, const Tensor&, Tensor*,
                              DenseOptimizerSlot*, CudaStream&) {
  return NoCuda("DenseOptimizerStepCuda");
}
Result<double> GlobalNormCuda(const std::vector<Tensor>&, CudaStream&) {
  return NoCuda("GlobalNormCuda");
}
Result<double> ClipByGlobalNormCuda(double, std::vector<Tensor>*, CudaStream&) {
  return NoCuda("ClipByGlobalNormCuda");
}

}  // namespace ember::ops
