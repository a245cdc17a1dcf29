// RegisterCudaOps in a build without CUDA: there are no CUDA kernels to add.
#include "ops/op_registry.h"

namespace ember::ops {

Status RegisterCudaOps(OpRegistry*) { return Status::OK(); }

}  // namespace ember::ops
