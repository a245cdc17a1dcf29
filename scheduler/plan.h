#pragma once

#include <string>

#include "core/device.h"
#include "core/status.h"
#include "scheduler/resource_graph.h"

namespace ember::scheduler {

// Where and with how many threads each part of a training step runs.
struct Plan {
  // The device of the dense stages (forward, loss, backward, optimizer).
  Device dense_device = Device::Cpu();
  // CPU threads for the whole job.
  int threads = 1;
  // Why the plan looks as it does, for the log.
  std::string rationale;
};

struct PlanRequest {
  // CPU threads the job may use; <= 0 means all of the host's.
  int threads = 0;
  // Whether the dense stages have a CUDA implementation to place on a GPU.
  bool dense_cuda_available = false;
};

// Plans a single-host training job. Fails with InvalidArgument when more
// threads are requested than the host has.
Result<Plan> PlanLocalTraining(const ResourceGraph& resources, const PlanRequest& request);

}  // namespace ember::scheduler
