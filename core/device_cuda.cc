// Device queries through the CUDA runtime.
#include <cuda_runtime.h>
#include <glog/logging.h>

#include <mutex>

#include "core/device.h"

namespace ember {

bool CudaCompiledIn() { return true; }

int CudaDeviceCount() {
  static int count = [] {
    int n = 0;
    const cudaError_t error = cudaGetDeviceCount(&n);
    if (error != cudaSuccess) {
      // cudaErrorInsufficientDriver (35) and cudaErrorNoDevice (100) are what a
      // machine without a driver or GPU reports; that means zero devices.
      VLOG(1) << "cudaGetDeviceCount: " << cudaGetErrorString(error)
              << " (" << static_cast<int>(error) << "); using no CUDA device";
      cudaGetLastError();  // Clear the sticky error.
      return 0;
    }
    return n;
  }();
  return count;
}

}  // namespace ember
