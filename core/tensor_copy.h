#pragma once

// Copies and fills of whole tensors on any device: between host tensors
// directly, and through a CudaStream wherever a CUDA device is involved.

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember {

// Copies every byte of `src` into `dst`: the same dtype and element count
// (shapes may differ), each on the host or on the device of `stream`. A copy
// involving a device is queued on `stream` and not waited for: call
// stream->Synchronize() before reading a host destination or changing a
// pinned host source (a pageable one is staged before the call returns). Host to host copies run at
// once and need no stream. InvalidArgument naming both tensors on a mismatch, a missing stream or a
// tensor on another device.
Status CopyTensor(const Tensor& src, Tensor* dst, CudaStream* stream);

// Sets every byte of `tensor` to zero: at once on the host, queued on
// `stream` on its device. InvalidArgument as CopyTensor.
Status ZeroTensor(Tensor* tensor, CudaStream* stream);

}  // namespace ember
