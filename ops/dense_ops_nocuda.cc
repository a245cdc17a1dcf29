// CUDA dense operators in a build without CUDA.
#include "ops/dense_ops_cuda.h"

namespace ember::ops {

Status FullyConnectedForwardCuda(const Tensor&, const Tensor&, const Tensor&, Activation,
                                 Tensor*, CudaStream&) {
  return Status::FailedPrecondition("FullyConnectedForwardCuda: Ember was built without CUDA");
}

}  // namespace ember::ops
