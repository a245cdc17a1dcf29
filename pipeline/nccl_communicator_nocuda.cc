// NCCL collectives in a build without CUDA: every call says so.
#include "pipeline/nccl_communicator.h"

namespace ember::pipeline {

Result<std::unique_ptr<LocalNcclCommunicator>> LocalNcclCommunicator::Create(
    const std::vector<int>&) {
  return Status::FailedPrecondition("NCCL communicator requested but Ember was built without CUDA");
}

LocalNcclCommunicator::~LocalNcclCommunicator() = default;

Status LocalNcclCommunicator::AllReduceSum(const std::vector<Tensor>&,
                                           const std::vector<CudaStream*>&) {
  return Status::FailedPrecondition("built without CUDA");
}

}  // namespace ember::pipeline
