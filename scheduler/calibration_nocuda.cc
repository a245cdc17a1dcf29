// MeasurePinnedCopyGbps in a build without CUDA.
#include "scheduler/calibration.h"

namespace ember::scheduler {

Result<double> MeasurePinnedCopyGbps(int device) {
  return Status::FailedPrecondition("no CUDA in this build: cannot time copies to cuda:", device);
}

}  // namespace ember::scheduler
