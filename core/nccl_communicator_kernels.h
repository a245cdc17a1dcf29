#pragma once

// Device code of the NCCL backend (core/nccl_communicator_cuda.cc); private
// to it.

#include <cstdint>

#include "core/communicator.h"
#include "core/status.h"

namespace ember::nccl_kernels {

// Queues out[i] = g[0][i] + g[1][i] + ... + g[ranks-1][i], added from left to
// right in rank order (floats rounded at each addition, no fused arithmetic;
// integers wrap), where g[r] = gathered + r * count elements, on `stream` (a
// cudaStream_t) of the current device. `out` may not overlap `gathered`.
// Returns Internal if the launch fails.
// REQUIRES: CommDTypeIsSummable(dtype).
Status LaunchSumInRankOrder(const void* gathered, int ranks, int64_t count, CommDType dtype,
                            void* out, void* stream);

}  // namespace ember::nccl_kernels
