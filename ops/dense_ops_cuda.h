#pragma once

// Dense operators on CUDA devices. Tensors live on the stream's device, f32,
// row-major; shapes as for the CPU operators of dense_ops.h, which are the
// reference the GPU tests compare against. Work is queued on `stream`; call
// stream.Synchronize() before reading results on the host. In a build without
// CUDA every function returns FailedPrecondition.

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_ops.h"

namespace ember::ops {

// y[B, out] = act(x[B, in] * weight[out, in]^T + bias[out]): one cuBLAS SGEMM,
// then a fused bias + activation kernel.
Status FullyConnectedForwardCuda(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 Activation activation, Tensor* y, CudaStream& stream);

}  // namespace ember::ops
