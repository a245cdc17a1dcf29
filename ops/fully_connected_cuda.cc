// FullyConnectedForwardCuda through cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "ops/bias_activation.cuh"
#include "ops/dense_ops_cuda.h"

namespace ember::ops {
namespace {

// One cuBLAS handle per device, created on first use and kept for the process.
Result<cublasHandle_t> HandleFor(int device) {
  static std::mutex mu;
  static std::map<int, cublasHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return Status::FailedPrecondition("cannot select cuda:", device);
  }
  cublasHandle_t handle = nullptr;
  const cublasStatus_t status = cublasCreate(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return Status::Internal("cublasCreate on cuda:", device, " failed with status ",
                            static_cast<int>(status));
  }
  handles[device] = handle;
  return handle;
}

bool OnDevice(const Tensor& t, int device) {
  return t.device() == Device::Cuda(device) && t.dtype() == DType::kF32;
}

}  // namespace

Status FullyConnectedForwardCuda(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 Activation activation, Tensor* y, CudaStream& stream) {
  const int device = stream.device();
  if (!OnDevice(x, device) || !OnDevice(weight, device) || !OnDevice(bias, device) ||
      !OnDevice(*y, device)) {
    return Status::InvalidArgument("FullyConnectedForwardCuda: every operand must be f32 on cuda:",
                                   device);
  }
  if (x.ndim() != 2 || weight.ndim() != 2 || bias.ndim() != 1 || y->ndim() != 2 ||
      weight.dim(1) != x.dim(1) || bias.dim(0) != weight.dim(0) || y->dim(0) != x.dim(0) ||
      y->dim(1) != weight.dim(0)) {
    return Status::InvalidArgument("FullyConnectedForwardCuda: shapes x ", x.DebugString(),
                                   ", weight ", weight.DebugString(), ", bias ",
                                   bias.DebugString(), ", y ", y->DebugString(),
                                   " do not fit y = x * weight^T + bias");
  }
  EMBER_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleFor(device));
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream.native());
  cublasSetStream(handle, cuda_stream);
  const int batch = static_cast<int>(x.dim(0));
  const int in = static_cast<int>(x.dim(1));
  const int out = static_cast<int>(weight.dim(0));
  const float one = 1.0f, zero = 0.0f;
  // Row-major y = x W^T is column-major y^T = W x^T, with W^T stored [in, out].
  const cublasStatus_t status =
      cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, &one,
                  weight.data<float>(), in, x.data<float>(), in, &zero, y->data<float>(), out);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return Status::Internal("cublasSgemm failed with status ", static_cast<int>(status));
  }
  LaunchBiasActivation(y->data<float>(), bias.data<float>(), batch, out,
                       activation == Activation::kRelu ? 1 : 0, cuda_stream);
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) {
    return Status::Internal("bias/activation kernel launch: ", cudaGetErrorString(launch));
  }
  return Status::OK();
}

}  // namespace ember::ops
