// The NCCL backend. Communicators are nonblocking (ncclConfig_t::blocking =
// 0) so that no NCCL call can hang: each call polls ncclCommGetAsyncError and
// the stream until its work is done, and ncclCommAbort ends it on a timeout,
// an error or Abort().

#include "core/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/mutex.h"
#include "core/nccl_communicator_kernels.h"
#include "core/tensor.h"

namespace ember {
namespace {

using Clock = std::chrono::steady_clock;

// NCCL offers no completion callback that also reports its asynchronous
// errors: polling is its documented way. 50 us keeps the added latency small
// next to a collective's and the polling thread mostly asleep.
constexpr auto kPollInterval = std::chrono::microseconds(50);

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string NcclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') text += internal::StrCat(" (", last, ")");
  return text;
}

Status CudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::OK();
  cudaGetLastError();  // Not to be reported by an unrelated later call.
  return Status::Internal(what, ": ", cudaGetErrorString(error));
}

ncclDataType_t NcclType(CommDType dtype) {
  switch (dtype) {
    case CommDType::kF32: return ncclFloat32;
    case CommDType::kF64: return ncclFloat64;
    case CommDType::kF16: return ncclFloat16;
    case CommDType::kBF16: return ncclBfloat16;
    case CommDType::kI32: return ncclInt32;
    case CommDType::kI64: return ncclInt64;
    case CommDType::kU64: return ncclUint64;
  }
  LOG(FATAL) << "CommDType " << static_cast<int>(dtype) << " has no NCCL type";
  return ncclFloat32;
}

ncclConfig_t NonblockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// Waits until NCCL has finished initialising `comm` (nonblocking creation).
Status WaitInitialized(ncclComm_t comm, Clock::time_point deadline, double timeout_seconds,
                       const std::string& what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) state = query;
    if (state == ncclSuccess) return Status::OK();
    if (state != ncclInProgress) return Status::Internal(what, ": ", NcclText(state, comm));
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(what, ": not every rank joined within ", timeout_seconds,
                                      " s (NCCL does not say which)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Thread safety: one call at a time, from the rank's thread; Abort from any.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device,
                   std::unique_ptr<CudaStream> stream, const NcclCommunicatorOptions& options)
      : comm_(comm),
        rank_(rank),
        size_(size),
        device_(device),
        stream_(std::move(stream)),
        options_(options) {}
  ~NcclCommunicator() override {
    // ncclCommDestroy could wait for peers forever; abort never waits.
    MutexLock lock(mu_);
    AbortNcclLocked();
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status Send(ConstCommBuffer data, int dst, int tag) override;
  Status Recv(CommBuffer data, int src, int tag) override;
  Status SendRecvGroup(const std::vector<PeerTransfer>& transfers) override;
  bool sends_wait_for_receives() const override { return true; }
  Status AllReduce(ConstCommBuffer in, CommBuffer out) override;
  Status AllGather(ConstCommBuffer in, CommBuffer out) override;
  Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts, CommBuffer out,
                   const std::vector<int64_t>& recv_counts) override;
  Status Broadcast(CommBuffer data, int root) override;
  Status Barrier() override;
  void Abort(const Status& reason) override;

 private:
  // Runs `body` as one call named `what`: fails at once if this rank has
  // aborted or NCCL was aborted earlier.
  Status Call(const std::string& what, const std::function<Status()>& body);
  // Queues `enqueue`'s NCCL calls as one group, then `after`'s work (may be
  // null) once NCCL has queued its own, and waits for all of it. `silent`
  // names who failed to answer in a timeout message.
  Status Run(const std::string& what, const std::string& silent,
             const std::function<ncclResult_t()>& enqueue, const std::function<Status()>& after);
  // Polls until NCCL has queued its work (and, if `stream_too`, the stream
  // has run it), failing on an NCCL error, Abort or the deadline.
  Status Wait(const std::string& what, const std::string& silent, Clock::time_point deadline,
              bool stream_too);
  // Aborts NCCL and keeps `status` as the reason later calls fail.
  Status Fail(const Status& status);
  void AbortNcclLocked() REQUIRES(mu_);

  // Device memory for `buffer`: its own, or scratch (copied from the host).
  Result<void*> StageIn(const std::string& what, ConstCommBuffer buffer, Tensor* scratch);
  Result<void*> StageOut(const std::string& what, CommBuffer buffer, Tensor* scratch);
  // Copies a staged host output back from its scratch.
  Status CopyOut(CommBuffer buffer, const Tensor& scratch);
  Result<Tensor> Scratch(size_t bytes);
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_->native()); }
  std::string NextCollective(const char* op) { return internal::StrCat(op, " #", next_++); }

  ncclComm_t comm_;
  const int rank_;
  const int size_;
  const int device_;
  const std::unique_ptr<CudaStream> stream_;
  const NcclCommunicatorOptions options_;
  int64_t next_ = 1;  // Collective numbers; only the rank's thread touches it.

  Mutex mu_;
  Status abort_reason_ GUARDED_BY(mu_);  // Set by Abort.
  Status broken_ GUARDED_BY(mu_);        // Why NCCL was aborted, if it was.
  bool nccl_aborted_ GUARDED_BY(mu_) = false;
  bool in_call_ GUARDED_BY(mu_) = false;
  // Mirrors !abort_reason_.ok() for the polling loop; relaxed suffices, the
  // reason itself is read under mu_.
  std::atomic<bool> abort_requested_{false};
};

void NcclCommunicator::AbortNcclLocked() {
  if (nccl_aborted_) return;
  nccl_aborted_ = true;
  if (const ncclResult_t result = ncclCommAbort(comm_); result != ncclSuccess) {
    LOG(WARNING) << "rank " << rank_ << ": ncclCommAbort: " << ncclGetErrorString(result);
  }
}

void NcclCommunicator::Abort(const Status& reason) {
  MutexLock lock(mu_);
  if (!abort_reason_.ok()) return;
  abort_reason_ = reason.ok() ? Status::Cancelled("aborted without a reason") : reason;
  abort_requested_.store(true, std::memory_order_relaxed);
  // A call in progress aborts NCCL itself from its polling loop, so that no
  // NCCL call of it races with ncclCommAbort.
  if (!in_call_) AbortNcclLocked();
}

Status NcclCommunicator::Fail(const Status& status) {
  MutexLock lock(mu_);
  if (broken_.ok()) broken_ = status;
  AbortNcclLocked();
  return status;
}

Status NcclCommunicator::Call(const std::string& what, const std::function<Status()>& body) {
  {
    MutexLock lock(mu_);
    if (!abort_reason_.ok()) {
      return Status::Cancelled(what, ": rank ", rank_, " has aborted: ", abort_reason_.ToString());
    }
    if (nccl_aborted_) {
      return Status::FailedPrecondition(what, ": the NCCL communicator of rank ", rank_,
                                        " was aborted after: ", broken_.ToString());
    }
    in_call_ = true;
  }
  Status status = CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
  if (status.ok()) status = body();
  MutexLock lock(mu_);
  in_call_ = false;
  // An Abort during the call that the call did not see (it had finished).
  if (!abort_reason_.ok()) AbortNcclLocked();
  return status;
}

Status NcclCommunicator::Wait(const std::string& what, const std::string& silent,
                              Clock::time_point deadline, bool stream_too) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
    if (query != ncclSuccess) state = query;
    if (state == ncclRemoteError) {
      return Fail(Status::Unavailable(what, ": a peer failed: ", NcclText(state, comm_)));
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      return Fail(Status::Internal(what, ": ", NcclText(state, comm_)));
    }
    if (state == ncclSuccess) {
      if (!stream_too) return Status::OK();
      const cudaError_t done = cudaStreamQuery(stream());
      if (done == cudaSuccess) return Status::OK();
      if (done != cudaErrorNotReady) return Fail(CudaStatus(done, what));
    }
    if (abort_requested_.load(std::memory_order_relaxed)) {
      MutexLock lock(mu_);
      AbortNcclLocked();
      return Status::Cancelled(what, ": rank ", rank_, " has aborted: ", abort_reason_.ToString());
    }
    if (Clock::now() >= deadline) {
      return Fail(Status::DeadlineExceeded(what, ": ", silent, " did not answer within ",
                                           options_.communicator.timeout_seconds,
                                           " s; the NCCL communicator was aborted"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status NcclCommunicator::Run(const std::string& what, const std::string& silent,
                             const std::function<ncclResult_t()>& enqueue,
                             const std::function<Status()>& after) {
  const Clock::time_point deadline = DeadlineAfter(options_.communicator.timeout_seconds);
  ncclResult_t result = ncclGroupStart();
  if (result == ncclSuccess) {
    result = enqueue();
    const ncclResult_t end = ncclGroupEnd();
    if (result == ncclSuccess || result == ncclInProgress) result = end;
  }
  if (result != ncclSuccess && result != ncclInProgress) {
    return Fail(Status::Internal(what, ": ", NcclText(result, comm_)));
  }
  EMBER_RETURN_IF_ERROR(Wait(what, silent, deadline, /*stream_too=*/false));
  if (after) {
    if (Status status = after(); !status.ok()) return Fail(status);
  }
  return Wait(what, silent, deadline, /*stream_too=*/true);
}

Result<Tensor> NcclCommunicator::Scratch(size_t bytes) {
  const int64_t words = static_cast<int64_t>(std::max<size_t>(bytes, 1) + 3) / 4;
  return Tensor::Allocate({words}, DType::kI32, Device::Cuda(device_), stream_->allocator());
}

Result<void*> NcclCommunicator::StageIn(const std::string& what, ConstCommBuffer buffer,
                                        Tensor* scratch) {
  if (buffer.device == Device::Cuda(device_)) return const_cast<void*>(buffer.data);
  if (!buffer.device.is_cpu()) {
    return Status::InvalidArgument(what, ": rank ", rank_, " works on cuda:", device_,
                                   " and the host; got a buffer on ", buffer.device.ToString());
  }
  EMBER_ASSIGN_OR_RETURN(*scratch, Scratch(buffer.bytes()));
  if (buffer.bytes() > 0) {
    EMBER_RETURN_IF_ERROR(stream_->CopyToDevice(buffer.data, scratch->raw_data(), buffer.bytes()));
  }
  return scratch->raw_data();
}

Result<void*> NcclCommunicator::StageOut(const std::string& what, CommBuffer buffer,
                                         Tensor* scratch) {
  if (buffer.device == Device::Cuda(device_)) return buffer.data;
  if (!buffer.device.is_cpu()) {
    return Status::InvalidArgument(what, ": rank ", rank_, " works on cuda:", device_,
                                   " and the host; got a buffer on ", buffer.device.ToString());
  }
  EMBER_ASSIGN_OR_RETURN(*scratch, Scratch(ConstCommBuffer(buffer).bytes()));
  return scratch->raw_data();
}

Status NcclCommunicator::CopyOut(CommBuffer buffer, const Tensor& scratch) {
  const size_t bytes = ConstCommBuffer(buffer).bytes();
  if (!scratch.defined() || bytes == 0) return Status::OK();
  // The stream is idle (Run waited), so this returns at once.
  EMBER_RETURN_IF_ERROR(stream_->CopyToHost(scratch.raw_data(), buffer.data, bytes));
  return stream_->Synchronize();
}

Status NcclCommunicator::Send(ConstCommBuffer data, int dst, int tag) {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "send", dst, tag));
  const std::string what = internal::StrCat("send to rank ", dst, " (tag ", tag, ")");
  if (data.count == 0) return Call(what, [] { return Status::OK(); });
  return Call(what, [&]() -> Status {
    Tensor scratch;
    EMBER_ASSIGN_OR_RETURN(void* src, StageIn(what, data, &scratch));
    return Run(
        what, internal::StrCat("rank ", dst),
        [&] {
          return ncclSend(src, static_cast<size_t>(data.count), NcclType(data.dtype), dst, comm_,
                          stream());
        },
        nullptr);
  });
}

Status NcclCommunicator::Recv(CommBuffer data, int src, int tag) {
  EMBER_RETURN_IF_ERROR(ValidatePeer(*this, "recv", src, tag));
  const std::string what = internal::StrCat("recv from rank ", src, " (tag ", tag, ")");
  if (data.count == 0) return Call(what, [] { return Status::OK(); });
  return Call(what, [&]() -> Status {
    Tensor scratch;
    EMBER_ASSIGN_OR_RETURN(void* dst, StageOut(what, data, &scratch));
    EMBER_RETURN_IF_ERROR(Run(
        what, internal::StrCat("rank ", src),
        [&] {
          return ncclRecv(dst, static_cast<size_t>(data.count), NcclType(data.dtype), src, comm_,
                          stream());
        },
        nullptr));
    return CopyOut(data, scratch);
  });
}

Status NcclCommunicator::SendRecvGroup(const std::vector<PeerTransfer>& transfers) {
  std::string peers;
  for (const PeerTransfer& t : transfers) {
    EMBER_RETURN_IF_ERROR(ValidatePeer(*this, t.send ? "send" : "recv", t.peer, t.tag));
    peers += internal::StrCat(peers.empty() ? "" : ", ", t.send ? "send to " : "recv from ",
                              "rank ", t.peer, " (tag ", t.tag, ")");
  }
  const std::string what = "group of " + peers;
  return Call(what, [&]() -> Status {
    // Every transfer staged (host buffers through device scratch), then all
    // posted in one group, then the receives copied out.
    std::vector<Tensor> scratch(transfers.size());
    std::vector<void*> buffers(transfers.size(), nullptr);
    for (size_t i = 0; i < transfers.size(); ++i) {
      const PeerTransfer& t = transfers[i];
      if (t.data.count == 0) continue;
      EMBER_ASSIGN_OR_RETURN(buffers[i], t.send ? StageIn(what, t.data, &scratch[i])
                                                : StageOut(what, t.data, &scratch[i]));
    }
    EMBER_RETURN_IF_ERROR(Run(
        what, "its peers",
        [&]() -> ncclResult_t {
          for (size_t i = 0; i < transfers.size(); ++i) {
            const PeerTransfer& t = transfers[i];
            if (t.data.count == 0) continue;
            const ncclResult_t r =
                t.send ? ncclSend(buffers[i], static_cast<size_t>(t.data.count),
                                  NcclType(t.data.dtype), t.peer, comm_, stream())
                       : ncclRecv(buffers[i], static_cast<size_t>(t.data.count),
                                  NcclType(t.data.dtype), t.peer, comm_, stream());
            if (r != ncclSuccess && r != ncclInProgress) return r;
          }
          return ncclSuccess;
        },
        nullptr));
    for (size_t i = 0; i < transfers.size(); ++i) {
      if (!transfers[i].send) EMBER_RETURN_IF_ERROR(CopyOut(transfers[i].data, scratch[i]));
    }
    return Status::OK();
  });
}

constexpr const char* kSomeRank = "some rank (NCCL does not say which)";

Status NcclCommunicator::AllReduce(ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateAllReduce(in, out));
  const std::string what = NextCollective("all_reduce");
  if (in.count == 0) return Call(what, [] { return Status::OK(); });
  return Call(what, [&]() -> Status {
    Tensor in_scratch, out_scratch, gathered;
    EMBER_ASSIGN_OR_RETURN(void* src, StageIn(what, in, &in_scratch));
    EMBER_ASSIGN_OR_RETURN(void* dst, StageOut(what, out, &out_scratch));
    const size_t count = static_cast<size_t>(in.count);
    if (!options_.rank_ordered_all_reduce || size_ == 1) {
      EMBER_RETURN_IF_ERROR(Run(
          what, kSomeRank,
          [&] {
            return ncclAllReduce(src, dst, count, NcclType(in.dtype), ncclSum, comm_, stream());
          },
          nullptr));
    } else {
      EMBER_ASSIGN_OR_RETURN(gathered, Scratch(in.bytes() * size_));
      EMBER_RETURN_IF_ERROR(Run(
          what, kSomeRank,
          [&] {
            return ncclAllGather(src, gathered.raw_data(), count, NcclType(in.dtype), comm_,
                                 stream());
          },
          [&] {
            return nccl_kernels::LaunchSumInRankOrder(gathered.raw_data(), size_, in.count,
                                                      in.dtype, dst, stream());
          }));
    }
    return CopyOut(out, out_scratch);
  });
}

Status NcclCommunicator::AllGather(ConstCommBuffer in, CommBuffer out) {
  EMBER_RETURN_IF_ERROR(ValidateAllGather(size_, in, out));
  const std::string what = NextCollective("all_gather");
  if (in.count == 0) return Call(what, [] { return Status::OK(); });
  return Call(what, [&]() -> Status {
    Tensor in_scratch, out_scratch;
    EMBER_ASSIGN_OR_RETURN(void* src, StageIn(what, in, &in_scratch));
    EMBER_ASSIGN_OR_RETURN(void* dst, StageOut(what, out, &out_scratch));
    EMBER_RETURN_IF_ERROR(Run(
        what, kSomeRank,
        [&] {
          return ncclAllGather(src, dst, static_cast<size_t>(in.count), NcclType(in.dtype), comm_,
                               stream());
        },
        nullptr));
    return CopyOut(out, out_scratch);
  });
}

Status NcclCommunicator::AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                                   CommBuffer out, const std::vector<int64_t>& recv_counts) {
  EMBER_RETURN_IF_ERROR(ValidateAllToAllV(size_, in, send_counts, out, recv_counts));
  const std::string what = NextCollective("all_to_all_v");
  return Call(what, [&]() -> Status {
    Tensor in_scratch, out_scratch;
    EMBER_ASSIGN_OR_RETURN(void* src, StageIn(what, in, &in_scratch));
    EMBER_ASSIGN_OR_RETURN(void* dst, StageOut(what, out, &out_scratch));
    const size_t element_bytes = CommDTypeSize(in.dtype);
    const ncclDataType_t type = NcclType(in.dtype);
    EMBER_RETURN_IF_ERROR(Run(
        what, kSomeRank,
        [&] {
          // One send and one receive per peer with a non-empty block, fused into
          // one group so that they progress together (NCCL's all-to-all idiom).
          size_t send_offset = 0, recv_offset = 0;
          for (int p = 0; p < size_; ++p) {
            const size_t sends = static_cast<size_t>(send_counts[p]);
            const size_t recvs = static_cast<size_t>(recv_counts[p]);
            if (sends > 0) {
              const ncclResult_t r = ncclSend(static_cast<char*>(src) + send_offset * element_bytes,
                                              sends, type, p, comm_, stream());
              if (r != ncclSuccess && r != ncclInProgress) return r;
            }
            if (recvs > 0) {
              const ncclResult_t r = ncclRecv(static_cast<char*>(dst) + recv_offset * element_bytes,
                                              recvs, type, p, comm_, stream());
              if (r != ncclSuccess && r != ncclInProgress) return r;
            }
            send_offset += sends;
            recv_offset += recvs;
          }
          return ncclSuccess;
        },
        nullptr));
    return CopyOut(out, out_scratch);
  });
}

Status NcclCommunicator::Broadcast(CommBuffer data, int root) {
  EMBER_RETURN_IF_ERROR(ValidateBroadcast(size_, data, root));
  const std::string what = NextCollective("broadcast");
  if (data.count == 0) return Call(what, [] { return Status::OK(); });
  return Call(what, [&]() -> Status {
    Tensor scratch;
    // Non-root ranks copy their old contents in too; they are overwritten.
    EMBER_ASSIGN_OR_RETURN(void* buffer, StageIn(what, data, &scratch));
    EMBER_RETURN_IF_ERROR(Run(
        what, kSomeRank,
        [&] {
          return ncclBroadcast(buffer, buffer, static_cast<size_t>(data.count),
                               NcclType(data.dtype), root, comm_, stream());
        },
        nullptr));
    return CopyOut(data, scratch);
  });
}

Status NcclCommunicator::Barrier() {
  const std::string what = NextCollective("barrier");
  return Call(what, [&]() -> Status {
    // NCCL has no barrier: an all-reduce of one word waits for every rank.
    EMBER_ASSIGN_OR_RETURN(Tensor word, Scratch(sizeof(int32_t)));
    return Run(
        what, kSomeRank,
        [&] {
          return ncclAllReduce(word.raw_data(), word.raw_data(), 1, ncclInt32, ncclSum, comm_,
                               stream());
        },
        nullptr);
  });
}

Status CheckDevice(int device) {
  if (device < 0 || device >= CudaDeviceCount()) {
    return Status::FailedPrecondition("cuda:", device, " requested but ", CudaDeviceCount(),
                                      " CUDA device(s) are present");
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> NewLocalNcclCommunicators(
    const std::vector<int>& devices, const NcclCommunicatorOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateCommunicatorOptions(options.communicator));
  if (devices.empty()) return Status::InvalidArgument("a communicator needs at least one device");
  for (int d : devices) EMBER_RETURN_IF_ERROR(CheckDevice(d));
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
    return Status::InvalidArgument("NCCL needs distinct devices, one per rank");
  }
  const int n = static_cast<int>(devices.size());
  std::vector<std::unique_ptr<CudaStream>> streams;
  for (int d : devices) {
    EMBER_ASSIGN_OR_RETURN(auto stream, CudaStream::Create(d));
    streams.push_back(std::move(stream));
  }
  ncclUniqueId id;
  if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return Status::Internal("ncclGetUniqueId: ", ncclGetErrorString(r));
  }
  // What ncclCommInitAll does, with a nonblocking configuration.
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclConfig_t config = NonblockingConfig();
  ncclResult_t result = ncclGroupStart();
  if (result == ncclSuccess) {
    for (int r = 0; r < n && (result == ncclSuccess || result == ncclInProgress); ++r) {
      if (cudaSetDevice(devices[r]) != cudaSuccess) {
        cudaGetLastError();
        result = ncclUnhandledCudaError;
        break;
      }
      result = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (result == ncclSuccess || result == ncclInProgress) result = end;
  }
  const Clock::time_point deadline = DeadlineAfter(options.communicator.timeout_seconds);
  Status status =
      result == ncclSuccess || result == ncclInProgress
          ? Status::OK()
          : Status::Internal("creating NCCL communicators: ", ncclGetErrorString(result));
  for (int r = 0; r < n && status.ok(); ++r) {
    status = WaitInitialized(comms[r], deadline, options.communicator.timeout_seconds,
                             internal::StrCat("creating the NCCL communicator of rank ", r));
  }
  if (!status.ok()) {
    for (ncclComm_t c : comms) {
      if (c != nullptr) ncclCommAbort(c);
    }
    return status;
  }
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::make_unique<NcclCommunicator>(comms[r], r, n, devices[r],
                                                       std::move(streams[r]), options));
  }
  return ranks;
}

Result<std::unique_ptr<Communicator>> NewNcclCommunicator(Communicator& bootstrap, int device,
                                                          const NcclCommunicatorOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateCommunicatorOptions(options.communicator));
  const int rank = bootstrap.rank(), size = bootstrap.size();
  // Every rank learns which ranks cannot use their device before any waits
  // for them in NCCL.
  Status mine = CheckDevice(device);
  Result<std::unique_ptr<CudaStream>> stream =
      mine.ok() ? CudaStream::Create(device) : Result<std::unique_ptr<CudaStream>>(mine);
  if (mine.ok()) mine = stream.status();
  std::vector<int64_t> failed(size, 0);
  failed[rank] = mine.ok() ? 0 : 1;
  EMBER_RETURN_IF_ERROR(bootstrap.AllReduce(failed, failed));
  if (!mine.ok()) return mine;
  for (int r = 0; r < size; ++r) {
    if (failed[r] != 0) {
      return Status::FailedPrecondition("creating an NCCL communicator: rank ", r,
                                        " cannot use its CUDA device");
    }
  }
  // Rank 0's NCCL id, preceded by whether making it succeeded.
  static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
  std::vector<int64_t> packet(1 + sizeof(ncclUniqueId) / sizeof(int64_t), 0);
  ncclUniqueId id;
  if (rank == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    packet[0] = made == ncclSuccess ? 1 : 0;
    if (made == ncclSuccess) std::memcpy(&packet[1], &id, sizeof(id));
  }
  EMBER_RETURN_IF_ERROR(bootstrap.Broadcast(packet, 0));
  if (packet[0] != 1) return Status::Internal("rank 0 could not make an NCCL id (ncclGetUniqueId)");
  std::memcpy(&id, &packet[1], sizeof(id));
  EMBER_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NonblockingConfig();
  const ncclResult_t result = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  Status status =
      result == ncclSuccess || result == ncclInProgress
          ? WaitInitialized(comm, DeadlineAfter(options.communicator.timeout_seconds),
                            options.communicator.timeout_seconds,
                            internal::StrCat("creating the NCCL communicator of rank ", rank))
          : Status::Internal("ncclCommInitRankConfig: ", ncclGetErrorString(result));
  if (!status.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    return status;
  }
  return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(
      comm, rank, size, device, std::move(stream).value(), options));
}

}  // namespace ember
