#pragma once

// The Communicator on NVIDIA GPUs through NCCL: one rank per device. No NCCL
// or CUDA type appears here; without CUDA every factory fails with
// FailedPrecondition.

#include <memory>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"

namespace ember {

struct NcclCommunicatorOptions {
  // The timeout of every call, creation included.
  CommunicatorOptions communicator;
  // true: AllReduce gathers every rank's contribution and sums them on the
  // device in rank order, as the Communicator contract says (the bits of the
  // sequential sum), moving size() times the data of a ring all-reduce.
  // false: ncclAllReduce, far less traffic and the same bits on every rank,
  // but summed in NCCL's order, which for 3 ranks or more is not the
  // sequential sum and may change with the NCCL version or topology.
  bool rank_ordered_all_reduce = true;
};

// How the NCCL communicators go beyond or fall short of the Communicator
// contract:
// * Buffers: on the rank's device, or on the host (staged through device
//   memory: fine for counts and metadata, slow for bulk data). Device inputs
//   must be ready: synchronise the stream that wrote them before the call.
// * Every call queues its work on the communicator's own stream and waits
//   for it, polling NCCL's asynchronous error state; on an error, a timeout
//   or Abort it aborts the NCCL communicator, and later calls fail with
//   FailedPrecondition.
// * Send/Recv carry no tag: Recvs from a rank must be posted in the order of
//   its Sends, with the sender's count and dtype (not checked: a mismatch
//   gives garbage or a timeout). Send waits for the matching Recv.
// * A collective's timeout cannot name the missing rank (NCCL does not know);
//   a Send's or Recv's names its peer. Peers of a rank that aborts fail when
//   NCCL reports the remote error, at the latest at their timeout.
// * Mismatched collectives are not detected.

// One rank per entry of `devices` (rank r on cuda:devices[r]), all in this
// process: what ncclCommInitAll makes. Each communicator is to be used from
// its own thread. Fails with InvalidArgument for no device or a repeated one
// or invalid options, FailedPrecondition without CUDA or when a device is
// absent, DeadlineExceeded if NCCL does not finish within the timeout and
// Internal for other NCCL errors.
Result<std::vector<std::unique_ptr<Communicator>>> NewLocalNcclCommunicators(
    const std::vector<int>& devices, const NcclCommunicatorOptions& options = {});

// This process's rank of a group that spans processes or hosts, on
// cuda:`device`, with the rank and size of `bootstrap` (MPI, or in-process
// ranks in tests). Rank 0 makes the NCCL id and broadcasts it over
// `bootstrap`, which is used only during the call: every rank of `bootstrap`
// must call this, as a collective of `bootstrap`. A rank that cannot use its
// device makes every rank fail with FailedPrecondition naming it. Other
// errors as NewLocalNcclCommunicators, plus those of `bootstrap`.
Result<std::unique_ptr<Communicator>> NewNcclCommunicator(
    Communicator& bootstrap, int device, const NcclCommunicatorOptions& options = {});

}  // namespace ember
