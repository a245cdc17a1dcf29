#include "scheduler/plan.h"

namespace ember::scheduler {

Result<Plan> PlanLocalTraining(const ResourceGraph& resources, const PlanRequest& request) {
  Plan plan;
  if (request.threads > resources.cpu_threads) {
    return Status::InvalidArgument("--threads=", request.threads, " exceeds the ",
                                   resources.cpu_threads, " hardware threads of ",
                                   resources.host_name);
  }
  plan.threads = request.threads > 0 ? request.threads : resources.cpu_threads;
  if (!resources.cuda_devices.empty() && request.dense_cuda_available) {
    plan.dense_device = resources.cuda_devices.front();
    plan.rationale = "dense stages on " + plan.dense_device.ToString() + ", sparse on CPU";
  } else if (!resources.cuda_devices.empty()) {
    plan.rationale = "dense stages on CPU: this model has no CUDA dense path yet";
  } else {
    plan.rationale = "dense and sparse stages on CPU: no CUDA device";
  }
  plan.rationale += "; " + std::to_string(plan.threads) + " threads";
  return plan;
}

}  // namespace ember::scheduler
