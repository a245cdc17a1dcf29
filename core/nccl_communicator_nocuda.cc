// NCCL communicators in a build without CUDA: every factory says so.
#include "core/nccl_communicator.h"

namespace ember {

Result<std::vector<std::unique_ptr<Communicator>>> NewLocalNcclCommunicators(
    const std::vector<int>&, const NcclCommunicatorOptions&) {
  return Status::FailedPrecondition("NCCL communicator requested but Ember was built without CUDA");
}

Result<std::unique_ptr<Communicator>> NewNcclCommunicator(Communicator&, int,
                                                          const NcclCommunicatorOptions&) {
  return Status::FailedPrecondition("NCCL communicator requested but Ember was built without CUDA");
}

}  // namespace ember
