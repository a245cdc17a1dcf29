#pragma once

#include <cuda_runtime.h>

namespace ember::ops {

// y[b, o] = act(y[b, o] + bias[o]) for a row-major [rows, cols] matrix;
// relu != 0 selects ReLU, otherwise the identity.
void LaunchBiasActivation(float* y, const float* bias, long long rows, int cols, int relu,
                          cudaStream_t stream);

}  // namespace ember::ops
