// Device queries for a build without CUDA.
#include "core/device.h"

namespace ember {

bool CudaCompiledIn() { return false; }
int CudaDeviceCount() { return 0; }

}  // namespace ember
