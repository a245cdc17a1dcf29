#pragma once

// cuBLAS access for the CUDA operators of ops/ (defined in
// ops/fully_connected_cuda.cc): per-thread handles, a row-major SGEMM, and the
// fully connected layer on raw device pointers, which the composite
// operators (cross layers) build on.

#include <cublas_v2.h>

#include <cstdint>

#include "core/cuda_stream.h"
#include "core/status.h"
#include "ops/dense_ops.h"
#include "ops/dense_ops_cuda.h"

namespace ember::ops::cuda {

// OK for CUBLAS_STATUS_SUCCESS, else Internal naming `op` and `what`.
Status CublasCall(cublasStatus_t status, const char* op, const char* what);

// The calling thread's cuBLAS handle for the stream's device, bound to the
// stream. cuBLAS handles are not for concurrent use, hence one per thread.
Result<cublasHandle_t> CublasFor(const char* op, CudaStream& stream);

// Row-major f32 C[m, n] = alpha * op(A) op(B) + beta * C, op(A) [m, k] and
// op(B) [k, n]; A is stored [m, k] (or [k, m] when trans_a), B [k, n] (or
// [n, k] when trans_b), all dense. REQUIRES: beta is 0 or 1; sizes checked
// with CheckFitsInt.
Status RowMajorSgemm(const char* op, CudaStream& stream, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const float* a, const float* b,
                     float beta, float* c);

// FullyConnectedForwardCuda / BackwardCuda without the argument checks.
// dx may be null. REQUIRES: the stream's device is current.
Status FullyConnectedForwardRaw(const char* op, CudaStream& stream, const float* x,
                                const float* weight, const float* bias, int64_t batch, int64_t in,
                                int64_t out, Activation activation, ComputePrecision precision,
                                float* y);
Status FullyConnectedBackwardRaw(const char* op, CudaStream& stream, const float* x,
                                 const float* weight, const float* y, const float* dy,
                                 int64_t batch, int64_t in, int64_t out, Activation activation,
                                 ComputePrecision precision, float* dx, float* dweight,
                                 float* dbias);

}  // namespace ember::ops::cuda
