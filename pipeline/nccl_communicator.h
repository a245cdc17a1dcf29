#pragma once

#include <memory>
#include <vector>

#include "core/cuda_stream.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember::pipeline {

// Collectives among the GPUs of this process through NCCL (one rank per
// device, created together with ncclCommInitAll). Multi-process runs will get
// their NCCL id over MPI; this is the single-process case.
// Thread safety: one collective at a time.
class LocalNcclCommunicator {
 public:
  // One rank per entry of `devices`. Fails with FailedPrecondition without
  // CUDA or when a device is absent.
  static Result<std::unique_ptr<LocalNcclCommunicator>> Create(const std::vector<int>& devices);
  ~LocalNcclCommunicator();
  LocalNcclCommunicator(const LocalNcclCommunicator&) = delete;
  LocalNcclCommunicator& operator=(const LocalNcclCommunicator&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }

  // In-place sum of buffers[r] over all ranks r (f32, same shape, buffer r on
  // device r), queued on streams[r]. Synchronize the streams to read results.
  Status AllReduceSum(const std::vector<Tensor>& buffers, const std::vector<CudaStream*>& streams);

 private:
  explicit LocalNcclCommunicator(std::vector<int> devices) : devices_(std::move(devices)) {}
  std::vector<int> devices_;
  std::vector<void*> comms_;  // ncclComm_t per rank.
};

}  // namespace ember::pipeline
