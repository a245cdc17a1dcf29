#pragma once

// Launchers of the elementwise and reduction kernels that the CUDA operators
// share (ops/cuda/elementwise.cu). Raw device pointers, queued on `stream`;
// n = 0 launches nothing. Callers check cudaGetLastError (CheckLaunch).

#include <cuda_runtime.h>

#include <cstdint>

namespace ember::ops::cuda {

// y = max(x, 0).
void LaunchRelu(const float* x, float* y, int64_t n, cudaStream_t stream);
// out = y > 0 ? dy : 0 (the gradient through a ReLU with output y).
void LaunchReluMask(const float* y, const float* dy, float* out, int64_t n, cudaStream_t stream);
// y = 1 / (1 + exp(-x)), without overflow for either sign.
void LaunchSigmoid(const float* x, float* y, int64_t n, cudaStream_t stream);
// dx = dy * y * (1 - y).
void LaunchSigmoidBackward(const float* y, const float* dy, float* dx, int64_t n,
                           cudaStream_t stream);
// out = a + b.
void LaunchAdd(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// dst += src.
void LaunchAccumulate(const float* src, float* dst, int64_t n, cudaStream_t stream);
// out = x0 * z + xl (the DCN-v2 cross layer's output from z = W xl + b).
void LaunchCrossOutput(const float* x0, const float* z, const float* xl, float* out, int64_t n,
                       cudaStream_t stream);
// dx0 = dout * z and g = dout * x0 (the cross layer's first gradients).
void LaunchCrossGradients(const float* dout, const float* z, const float* x0, float* dx0,
                          float* g, int64_t n, cudaStream_t stream);
// Round-to-nearest-even f32 -> bf16 / f16 (dst holds n 16-bit values).
void LaunchCastToBf16(const float* src, void* dst, int64_t n, cudaStream_t stream);
void LaunchCastToF16(const float* src, void* dst, int64_t n, cudaStream_t stream);

// out[c] = sum over r of m[r, c] for a row-major [rows, cols] matrix: each
// thread sums one column over a fixed chunk of rows in order, then the chunk
// sums are added in chunk order, so the result depends only on the data.
// `partial` is scratch of ColumnSumsScratch(rows, cols) floats. rows = 0
// writes zeros.
int64_t ColumnSumsScratch(int64_t rows, int64_t cols);
void LaunchColumnSums(const float* m, int64_t rows, int64_t cols, float* partial, float* out,
                      cudaStream_t stream);

}  // namespace ember::ops::cuda
