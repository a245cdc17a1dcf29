#pragma once

// Collective and point-to-point communication between the ranks of a group:
// one interface, several backends (core/in_process_communicator.h: ranks are
// threads of this process; core/mpi_communicator.h: one rank per process,
// launched by mpirun; core/nccl_communicator.h: GPUs).
//
// Users: key-sharded embedding tables (keys as u64, rows and gradients as f32,
// with AllToAllV), MoE dispatch and combine (f32 AllToAllV), pipeline stages
// (1F1B activations and gradients with Send/Recv), data-parallel dense
// gradients (AllReduce).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ember {

// Element types that communicators move: the tensor DTypes plus f64 (sums of
// metrics) and u64 (embedding keys), which tensors do not hold yet.
enum class CommDType { kF32, kF64, kF16, kBF16, kI32, kI64, kU64 };

// Bytes per element.
size_t CommDTypeSize(CommDType dtype);
// "f32", "u64", ...
const char* CommDTypeName(CommDType dtype);
// The CommDType of a tensor's elements.
CommDType ToCommDType(DType dtype);
// True for the types AllReduce can sum: f32, f64, i32, i64 and u64.
bool CommDTypeIsSummable(CommDType dtype);

// Maps a C++ element type to its CommDType.
template <typename T>
struct CommDTypeOf;
template <>
struct CommDTypeOf<float> {
  static constexpr CommDType value = CommDType::kF32;
};
template <>
struct CommDTypeOf<double> {
  static constexpr CommDType value = CommDType::kF64;
};
template <>
struct CommDTypeOf<Half> {
  static constexpr CommDType value = CommDType::kF16;
};
template <>
struct CommDTypeOf<BFloat16> {
  static constexpr CommDType value = CommDType::kBF16;
};
template <>
struct CommDTypeOf<int32_t> {
  static constexpr CommDType value = CommDType::kI32;
};
template <>
struct CommDTypeOf<int64_t> {
  static constexpr CommDType value = CommDType::kI64;
};
template <>
struct CommDTypeOf<uint64_t> {
  static constexpr CommDType value = CommDType::kU64;
};

// A borrowed, contiguous buffer that a call writes: `count` elements of
// `dtype` at `data` on `device`. Like std::span it owns nothing; the memory
// must outlive the call. Built implicitly from a vector or a tensor, or from a
// pointer and a count:
//   comm.Recv(activations_tensor, /*src=*/0, /*tag=*/3);
//   comm.AllReduce(grads, grads);  // std::vector<float>, in place
struct CommBuffer {
  void* data = nullptr;
  int64_t count = 0;
  CommDType dtype = CommDType::kF32;
  Device device = Device::Cpu();

  CommBuffer() = default;
  template <typename T>
  CommBuffer(T* data, int64_t count, Device device = Device::Cpu())
      : data(data), count(count), dtype(CommDTypeOf<T>::value), device(device) {}
  template <typename T>
  CommBuffer(std::vector<T>& values)  // NOLINT: implicit, like std::span
      : CommBuffer(values.data(), static_cast<int64_t>(values.size())) {}
  // A tensor shares its storage: writing through a const Tensor& is writing
  // to the tensor, as Tensor::raw_data() allows.
  CommBuffer(const Tensor& tensor)  // NOLINT: implicit, like std::span
      : data(tensor.raw_data()),
        count(tensor.numel()),
        dtype(ToCommDType(tensor.dtype())),
        device(tensor.device()) {}
};

// A borrowed, contiguous buffer that a call only reads; see CommBuffer.
struct ConstCommBuffer {
  const void* data = nullptr;
  int64_t count = 0;
  CommDType dtype = CommDType::kF32;
  Device device = Device::Cpu();

  ConstCommBuffer() = default;
  template <typename T>
  ConstCommBuffer(const T* data, int64_t count, Device device = Device::Cpu())
      : data(data), count(count), dtype(CommDTypeOf<T>::value), device(device) {}
  template <typename T>
  ConstCommBuffer(const std::vector<T>& values)  // NOLINT: implicit, like std::span
      : ConstCommBuffer(values.data(), static_cast<int64_t>(values.size())) {}
  ConstCommBuffer(const Tensor& tensor)  // NOLINT: implicit, like std::span
      : ConstCommBuffer(CommBuffer(tensor)) {}
  ConstCommBuffer(const CommBuffer& buffer)  // NOLINT: a writable buffer is readable
      : data(buffer.data), count(buffer.count), dtype(buffer.dtype), device(buffer.device) {}

  size_t bytes() const { return static_cast<size_t>(count) * CommDTypeSize(dtype); }
};

// One send or receive of Communicator::SendRecvGroup.
struct PeerTransfer {
  bool send = true;  // false: a receive into `data`.
  CommBuffer data;   // A send only reads it.
  int peer = -1;
  int tag = 0;
};

// Traffic a rank has sent (Communicator::counters): messages and bytes on the
// wire, headers included, its own contributions to itself excluded.
struct CommCounters {
  int64_t messages_sent = 0;
  int64_t bytes_sent = 0;
};

struct CommunicatorOptions {
  // Longest that one blocking call waits for its peers. A peer that has not
  // joined a collective, or sent what a Recv waits for, by then makes the call
  // fail with DeadlineExceeded naming that peer. Must be positive and finite.
  // Default: 300 s, far above any healthy step and well below a hung job.
  double timeout_seconds = 300;
};

// Returns InvalidArgument unless options.timeout_seconds is positive and
// finite.
Status ValidateCommunicatorOptions(const CommunicatorOptions& options);

// One rank of a group of size() ranks, numbered 0..size()-1.
//
// Order: collectives (AllReduce, AllGather, AllToAllV, Broadcast, Barrier)
// match by position: the k-th collective of every rank is one operation, so
// every rank must issue the same collectives, with matching arguments, in the
// same order. A training step issues its collectives from one thread per rank
// in one fixed order. Backends number collectives from #1 in their messages
// and detect mismatches where they can (InvalidArgument naming both sides);
// a mismatch that goes undetected gives undefined results.
//
// Blocking and timeouts: every call returns when it has completed on this
// rank: outputs hold their results and inputs may be reused. A call that
// waits for a peer waits at most CommunicatorOptions::timeout_seconds and
// then fails with DeadlineExceeded, e.g. "all_reduce #12: rank 3 did not
// answer within 5 s". It never hangs. A call that finds a peer gone (Abort,
// or its communicator destroyed) fails with Unavailable naming that rank and
// its reason, without waiting for the timeout.
//
// Errors: InvalidArgument for arguments that break a REQUIRES below
// (checked before any communication; the other ranks then see this rank
// fail or time out). After DeadlineExceeded or Unavailable the group may be
// unusable: a caller should Abort and build a new group.
//
// Buffers: every backend accepts host buffers; a backend may also accept
// device buffers (NCCL: its own device). Counts are in elements.
//
// Thread safety: calls on one Communicator must come from one thread at a
// time (the rank's step thread), except Abort, which may be called from any
// thread at any time. Different ranks' Communicators are used concurrently
// from their own threads.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `data` to rank `dst` as a message with tag `tag`. May return before
  // `dst` receives it (it is then copied) or block until it does: a pair of
  // ranks that both Send before they Recv may time out on some backends.
  // REQUIRES: 0 <= dst < size(), dst != rank(), tag >= 0.
  virtual Status Send(ConstCommBuffer data, int dst, int tag) = 0;

  // Receives into `data` the oldest message that rank `src` sent with tag
  // `tag`; messages with other tags stay queued (backends that carry no tag,
  // such as NCCL, need Recvs posted in the order of the Sends). Fails with
  // InvalidArgument if the message's dtype or count differs from `data`'s
  // (the message is then dropped).
  // REQUIRES: 0 <= src < size(), src != rank(), tag >= 0.
  virtual Status Recv(CommBuffer data, int src, int tag) = 0;

  // out[i] = in_0[i] + in_1[i] + ... + in_{size()-1}[i], where in_r is rank
  // r's `in`, summed from left to right in rank order: every rank gets the
  // same bits, equal to a sequential one-rank loop over the contributions of
  // ranks 0, 1, ..., size()-1 (float additions in the element type, no fused
  // or reassociated arithmetic). Integer sums wrap modulo 2^bits. `out` may
  // be `in` itself (in place).
  // REQUIRES: in and out have the same summable dtype and count, the same on
  // every rank; they are the same buffer or do not overlap.
  virtual Status AllReduce(ConstCommBuffer in, CommBuffer out) = 0;

  // out on rank r = block r of in_0 + block r of in_1 + ... + block r of
  // in_{size()-1}, summed in rank order as AllReduce sums (the same bits as
  // AllReduce's elements of block r), where block r of `in` is its elements
  // [r * out.count, (r + 1) * out.count). The first half of a bandwidth-
  // optimal AllReduce; the sharded optimizer state of a data-parallel group.
  // The default runs AllReduce into a host scratch buffer and copies block r
  // out (a backend with a cheaper way overrides it); it takes host buffers
  // only (a device buffer is Unimplemented: NCCL reduces device gradients
  // with AllReduce).
  // REQUIRES: in.count == size() * out.count; the same summable dtype, and
  // the same out.count on every rank; in and out do not overlap.
  virtual Status ReduceScatter(ConstCommBuffer in, CommBuffer out);

  // out = in_0 ++ in_1 ++ ... ++ in_{size()-1}: rank r's `in` lands at
  // elements [r * in.count, (r + 1) * in.count) of `out`.
  // REQUIRES: out.count == size() * in.count; the same dtype, and the same
  // in.count on every rank; in and out do not overlap.
  virtual Status AllGather(ConstCommBuffer in, CommBuffer out) = 0;

  // Each rank sends a block to every rank (itself included). Layout: `in`
  // holds size() contiguous blocks in rank order, block p (send_counts[p]
  // elements, starting at send_counts[0] + ... + send_counts[p-1]) going to
  // rank p; `out` receives size() contiguous blocks in rank order, block q
  // (recv_counts[q] elements) coming from rank q. Counts may be zero.
  // REQUIRES: send_counts and recv_counts have size() non-negative entries
  // summing to in.count and out.count; recv_counts[q] on rank p equals
  // send_counts[p] on rank q (a receiver that does not know its counts learns
  // them first with ExchangeCounts below, or uses AllToAllVUnknownCounts);
  // the same dtype on every rank; in and out do not overlap.
  virtual Status AllToAllV(ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                           CommBuffer out, const std::vector<int64_t>& recv_counts) = 0;

  // Copies rank `root`'s `data` into `data` on every other rank.
  // REQUIRES: 0 <= root < size(); the same root, dtype and count on every rank.
  virtual Status Broadcast(CommBuffer data, int root) = 0;

  // Returns when every rank has called Barrier (as its same collective).
  virtual Status Barrier() = 0;

  // Posts every send and receive of `transfers` together and returns when
  // all have completed: no transfer waits for another of the same group, so
  // two ranks that each send to and receive from the other in one group both
  // finish, even where a Send waits for its receive (NCCL: one
  // ncclGroupStart/End). The default runs the sends, then the receives, each
  // in order: enough where a Send returns before its receive (in-process,
  // MPI). REQUIRES: what Send and Recv require of each transfer.
  virtual Status SendRecvGroup(const std::vector<PeerTransfer>& transfers);
  // Whether a Send waits for its receive (NCCL): a pipeline schedule must
  // then pass CheckRendezvous (pipeline/schedule_checker.h).
  virtual bool sends_wait_for_receives() const { return false; }

  // What this rank has sent its peers since the communicator was made, for
  // benchmarks and the cost model (core/mpi_communicator.h says what each
  // collective sends); nullopt where the backend does not count (in-process:
  // nothing travels, NCCL: the device moves it).
  virtual std::optional<CommCounters> counters() const { return std::nullopt; }

  // Leaves the group: calls of peers that wait on this rank, now or later,
  // fail with Unavailable naming this rank and `reason`, at once where the
  // backend can tell (NCCL: when it reports the remote error, at the latest
  // at their timeout); calls on this communicator, a blocked one included,
  // fail with Cancelled. Idempotent: the first reason is kept. Destroying a
  // communicator leaves the group too.
  virtual void Abort(const Status& reason) = 0;
};

// Returns recv_counts for an AllToAllV whose receivers do not know their
// counts: recv_counts[q] on rank p is send_counts[p] of rank q. One AllToAllV
// of one i64 per peer; a collective like the others (every rank calls it).
Result<std::vector<int64_t>> ExchangeCounts(Communicator& comm,
                                            const std::vector<int64_t>& send_counts);

// AllToAllV of host vectors when receivers do not know their counts:
// exchanges the counts, resizes *out to their sum, then moves the data.
// Two collectives. `recv_counts` may be null.
template <typename T>
Status AllToAllVUnknownCounts(Communicator& comm, const std::vector<T>& in,
                              const std::vector<int64_t>& send_counts, std::vector<T>* out,
                              std::vector<int64_t>* recv_counts = nullptr) {
  EMBER_ASSIGN_OR_RETURN(std::vector<int64_t> counts, ExchangeCounts(comm, send_counts));
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  out->resize(static_cast<size_t>(total));
  EMBER_RETURN_IF_ERROR(comm.AllToAllV(in, send_counts, *out, counts));
  if (recv_counts != nullptr) *recv_counts = std::move(counts);
  return Status::OK();
}

// Argument checks shared by the backends, for the REQUIRES clauses above that
// one rank can check alone. Each returns InvalidArgument naming the operation
// and the offending argument.
Status ValidatePeer(const Communicator& comm, const char* op, int peer, int tag);
Status ValidateAllReduce(ConstCommBuffer in, CommBuffer out);
Status ValidateReduceScatter(int size, ConstCommBuffer in, CommBuffer out);
Status ValidateAllGather(int size, ConstCommBuffer in, CommBuffer out);
Status ValidateAllToAllV(int size, ConstCommBuffer in, const std::vector<int64_t>& send_counts,
                         CommBuffer out, const std::vector<int64_t>& recv_counts);
Status ValidateBroadcast(int size, CommBuffer data, int root);

}  // namespace ember
