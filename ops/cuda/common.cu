#include "ops/cuda/common.h"

#include <climits>
#include <sstream>
#include <string>

#include "ops/internal/tensor_checks.h"

namespace ember::ops::cuda {
namespace {

std::string Describe(DType dtype, const std::vector<int64_t>& shape, const Device& device) {
  return std::string(DTypeName(dtype)) + ShapeString(shape) + " on " + device.ToString();
}

std::string Describe(const Tensor& tensor) {
  return tensor.defined() ? tensor.DebugString() : std::string("an undefined tensor");
}

bool IsUsable(const Tensor& tensor, DType dtype, const Device& device) {
  return tensor.defined() && tensor.dtype() == dtype && tensor.device() == device;
}

}  // namespace

Status CudaCall(cudaError_t error, const char* op, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  cudaGetLastError();
  if (error == cudaErrorMemoryAllocation) {
    return Status::ResourceExhausted(op, ": ", what, ": ", cudaGetErrorString(error));
  }
  return Status::Internal(op, ": ", what, ": ", cudaGetErrorString(error));
}

Status CheckLaunch(const char* op, const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::OK();
  return Status::Internal(op, ": launching ", kernel, ": ", cudaGetErrorString(error));
}

Status UseDevice(const char* op, CudaStream& stream) {
  return CudaCall(cudaSetDevice(stream.device()), op, "cudaSetDevice");
}

int GridFor(int64_t n, int threads) {
  // 132 SMs (H100) x 16 resident blocks of 256 threads is ~2000 blocks; past
  // that the grid-stride loops take over.
  constexpr int64_t kMaxBlocks = 4096;
  const int64_t wanted = (n + threads - 1) / threads;
  return static_cast<int>(wanted < 1 ? 1 : (wanted > kMaxBlocks ? kMaxBlocks : wanted));
}

DeviceScratch::~DeviceScratch() {
  for (void* block : blocks_) allocator_->Deallocate(block);
}

Result<void*> DeviceScratch::GetBytes(const char* op, size_t bytes) {
  Result<void*> ptr = allocator_->Allocate(bytes);
  if (!ptr.ok()) return ptr.status().WithContext(std::string(op) + ": device scratch");
  blocks_.push_back(*ptr);
  return *ptr;
}

Status CheckDeviceTensor(const char* op, const char* name, const Tensor& tensor, DType dtype,
                         const std::vector<int64_t>& shape, const Device& device) {
  if (IsUsable(tensor, dtype, device) && tensor.shape() == shape) return Status::OK();
  return Status::InvalidArgument(op, ": ", name, " must be ", Describe(dtype, shape, device),
                                 ", got ", Describe(tensor));
}

Status CheckDeviceRank(const char* op, const char* name, const Tensor& tensor, DType dtype,
                       int rank, const Device& device) {
  if (IsUsable(tensor, dtype, device) && tensor.ndim() == rank) return Status::OK();
  return Status::InvalidArgument(op, ": ", name, " must be a ", rank, "-d ", DTypeName(dtype),
                                 " tensor on ", device.ToString(), ", got ", Describe(tensor));
}

Status CheckDeviceOutput(const char* op, const char* name, const Tensor* tensor, DType dtype,
                         const std::vector<int64_t>& shape, const Device& device) {
  if (tensor == nullptr) {
    return Status::InvalidArgument(op, ": ", name, " is null; expected ",
                                   Describe(dtype, shape, device));
  }
  return CheckDeviceTensor(op, name, *tensor, dtype, shape, device);
}

Status CheckDeviceAny(const char* op, const char* name, const Tensor& tensor, DType dtype,
                      const Device& device) {
  if (IsUsable(tensor, dtype, device)) return Status::OK();
  return Status::InvalidArgument(op, ": ", name, " must be a ", DTypeName(dtype), " tensor on ",
                                 device.ToString(), ", got ", Describe(tensor));
}

Status CheckFitsInt(const char* op, const char* what, int64_t value) {
  if (value >= 0 && value <= INT_MAX) return Status::OK();
  return Status::InvalidArgument(op, ": ", what, " = ", value, " does not fit the 32-bit sizes ",
                                 "of the CUDA kernels");
}

}  // namespace ember::ops::cuda
