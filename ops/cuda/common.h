#pragma once

// Host-side helpers shared by the CUDA operators of ops/: errors as Status,
// launch geometry, stream-ordered scratch memory and the argument checks for
// device tensors. Private to ops/ (CUDA builds only).

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/cuda_stream.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember::ops::cuda {

inline cudaStream_t Native(CudaStream& stream) {
  return static_cast<cudaStream_t>(stream.native());
}

// OK for cudaSuccess; otherwise Internal naming `op` and `what`, with the
// error cleared so that later calls do not report it again.
Status CudaCall(cudaError_t error, const char* op, const char* what);

// The result of the last kernel launch (cudaGetLastError), as CudaCall.
Status CheckLaunch(const char* op, const char* kernel);

// Makes the stream's device current for the calling thread: kernels must be
// launched on the device their stream belongs to.
Status UseDevice(const char* op, CudaStream& stream);

// Blocks of `threads` for a grid-stride loop over n items, at least 1 and at
// most a bound that keeps every SM busy without huge grids.
int GridFor(int64_t n, int threads);

// Device memory that lives until the end of the work queued so far on a
// stream: allocated and freed with cudaMallocAsync / cudaFreeAsync on that
// stream, so freeing right after queueing the kernels that use it is safe.
// Thread safety: one thread at a time.
class DeviceScratch {
 public:
  explicit DeviceScratch(CudaStream& stream) : allocator_(stream.allocator()) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // `count` elements of T (a valid pointer also for count 0), or
  // ResourceExhausted naming `op`.
  template <typename T>
  Result<T*> Get(const char* op, int64_t count) {
    EMBER_ASSIGN_OR_RETURN(void* ptr, GetBytes(op, static_cast<size_t>(count) * sizeof(T)));
    return static_cast<T*>(ptr);
  }

 private:
  Result<void*> GetBytes(const char* op, size_t bytes);
  Allocator* allocator_;  // The stream's (stream-ordered).
  std::vector<void*> blocks_;
};

// The argument checks of ops/internal/tensor_checks.h for tensors on `device`:
// InvalidArgument naming the operator, the operand and both the expected and
// the actual dtype, shape and device, e.g.
//   "ReluForwardCuda: y must be f32[2, 3] on cuda:0, got f32[2, 3] on cpu".
Status CheckDeviceTensor(const char* op, const char* name, const Tensor& tensor, DType dtype,
                         const std::vector<int64_t>& shape, const Device& device);
Status CheckDeviceRank(const char* op, const char* name, const Tensor& tensor, DType dtype,
                       int rank, const Device& device);
Status CheckDeviceOutput(const char* op, const char* name, const Tensor* tensor, DType dtype,
                         const std::vector<int64_t>& shape, const Device& device);
// Any shape.
Status CheckDeviceAny(const char* op, const char* name, const Tensor& tensor, DType dtype,
                      const Device& device);

// InvalidArgument when a dimension does not fit the int of cuBLAS and of the
// kernels' per-row indices.
Status CheckFitsInt(const char* op, const char* what, int64_t value);

}  // namespace ember::ops::cuda
