#pragma once

// Small helpers the kernels of several operator files share.

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/op_registry.h"

namespace ember::ops {

// A batched tensor [B, shape...] viewed as [B, elements per example]
// (B may be 0).
inline Tensor Flat(const Tensor& t) {
  int64_t n = 1;
  for (int i = 1; i < t.ndim(); ++i) n *= t.dim(i);
  return t.Reshape({t.dim(0), n});
}

// The stream a CUDA kernel of `op` queues its work on: FailedPrecondition,
// naming the op, when the context has none.
inline Result<CudaStream*> StreamOf(const KernelContext& c, const char* op) {
  if (c.stream == nullptr) {
    return Status::FailedPrecondition("the CUDA kernel of ", op, " needs KernelContext::stream");
  }
  return c.stream;
}

}  // namespace ember::ops
