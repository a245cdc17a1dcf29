#include "ops/cuda/common.h"

#include <climits>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "ops/internal/tensor_checks.h"

namespace ember::ops::cuda {
namespace {

// Scratch freed back to the device's default pool stays there up to this
// many bytes instead of being returned to the driver at every synchronisation,
// so that per-call scratch costs no driver call in steady state.
constexpr uint64_t kPoolReleaseThresholdBytes = uint64_t{256} << 20;

void KeepPoolWarm(int device) {
  static std::mutex mu;
  static std::set<int> done;
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(device).second) return;
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  uint64_t threshold = kPoolReleaseThresholdBytes;
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) != cudaSuccess) {
    cudaGetLastError();
  }
}

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
  for (void* block : blocks_) cudaFreeAsync(block, stream_);
}

Result<void*> DeviceScratch::GetBytes(const char* op, size_t bytes) {
  int device = 0;
  EMBER_RETURN_IF_ERROR(CudaCall(cudaGetDevice(&device), op, "cudaGetDevice"));
  KeepPoolWarm(device);
  void* ptr = nullptr;
  // 256-byte granules keep every block aligned for vector loads and cuBLASLt.
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + 255) / 256 * 256;
  const cudaError_t error = cudaMallocAsync(&ptr, rounded, stream_);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::ResourceExhausted(op, ": ", bytes, " bytes of device scratch: ",
                                     cudaGetErrorString(error));
  }
  blocks_.push_back(ptr);
  return ptr;
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
