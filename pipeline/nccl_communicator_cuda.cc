#include <cuda_runtime.h>
#include <nccl.h>

#include "core/device.h"
#include "pipeline/nccl_communicator.h"

namespace ember::pipeline {

Result<std::unique_ptr<LocalNcclCommunicator>> LocalNcclCommunicator::Create(
    const std::vector<int>& devices) {
  if (devices.empty()) return Status::InvalidArgument("a communicator needs at least one device");
  for (int d : devices) {
    if (d < 0 || d >= CudaDeviceCount()) {
      return Status::FailedPrecondition("cuda:", d, " requested but ", CudaDeviceCount(),
                                        " CUDA device(s) are present");
    }
  }
  std::unique_ptr<LocalNcclCommunicator> comm(new LocalNcclCommunicator(devices));
  std::vector<ncclComm_t> comms(devices.size());
  const ncclResult_t result =
      ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data());
  if (result != ncclSuccess) {
    return Status::Internal("ncclCommInitAll: ", ncclGetErrorString(result));
  }
  for (ncclComm_t c : comms) comm->comms_.push_back(c);
  return comm;
}

LocalNcclCommunicator::~LocalNcclCommunicator() {
  for (void* c : comms_) ncclCommDestroy(static_cast<ncclComm_t>(c));
}

Status LocalNcclCommunicator::AllReduceSum(const std::vector<Tensor>& buffers,
                                           const std::vector<CudaStream*>& streams) {
  if (buffers.size() != devices_.size() || streams.size() != devices_.size()) {
    return Status::InvalidArgument("AllReduceSum needs one buffer and one stream per rank (",
                                   devices_.size(), "), got ", buffers.size(), " and ",
                                   streams.size());
  }
  for (size_t r = 0; r < buffers.size(); ++r) {
    if (buffers[r].dtype() != DType::kF32 || buffers[r].device() != Device::Cuda(devices_[r]) ||
        buffers[r].numel() != buffers[0].numel() || streams[r]->device() != devices_[r]) {
      return Status::InvalidArgument("AllReduceSum: rank ", r, " buffer ",
                                     buffers[r].DebugString(), " must be f32 on cuda:",
                                     devices_[r], " with ", buffers[0].numel(), " elements");
    }
  }
  ncclResult_t result = ncclGroupStart();
  for (size_t r = 0; r < buffers.size() && result == ncclSuccess; ++r) {
    result = ncclAllReduce(buffers[r].raw_data(), buffers[r].raw_data(),
                           static_cast<size_t>(buffers[r].numel()), ncclFloat32, ncclSum,
                           static_cast<ncclComm_t>(comms_[r]),
                           static_cast<cudaStream_t>(streams[r]->native()));
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result == ncclSuccess) result = end;
  if (result != ncclSuccess) return Status::Internal("ncclAllReduce: ", ncclGetErrorString(result));
  return Status::OK();
}

}  // namespace ember::pipeline
