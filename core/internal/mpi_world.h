#pragma once

// What the MPI communicators (core/mpi_communicator.cc) share with the
// process's MPI world (core/mpi_world.cc): the making of a new group, the
// process's control channel with the leave notices that travel on it, and the
// messages that outlive their communicator. Internal to core/; the only
// header that includes mpi.h.
//
// Thread safety: every function may be called from any thread.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/mpi_world.h"
#include "core/status.h"

namespace ember::internal {

using Clock = std::chrono::steady_clock;
// A message's bytes, kept alive until MPI is done with them.
using Bytes = std::shared_ptr<std::vector<char>>;

Clock::time_point DeadlineAfter(double seconds);

// Spacing of polls: MPI has no blocking wait with a timeout, so waits poll.
// A few yields keep latency low when the peer is about to answer; then
// sleeps growing to 100 us keep an idle wait from taking a core (ranks are
// often oversubscribed in tests). A large message moves only while both
// sides poll (MPI's progress runs in the calls), so the sleeps stay short:
// at 1 ms the MoE layers' exchanges in the middle of the dense step, whose
// messages take many rounds, cost several times the bytes' time.
class Backoff {
 public:
  void Wait() {
    if (++polls_ <= 64) {
      std::this_thread::yield();
      return;
    }
    const int64_t sleep_us = std::min<int64_t>(100, 5 * (polls_ - 64));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }

 private:
  int64_t polls_ = 0;
};

// OK for MPI_SUCCESS; otherwise Internal: "<what>: <call> failed: <MPI's text>".
Status MpiStatus(int code, const std::string& what, const char* call);

// "rank 3" or "ranks 1, 3".
std::string RankList(const std::vector<int>& ranks);

// A message whose completion no call waits for any more, kept with its
// buffer until MPI is done with it.
struct PendingMessage {
  MPI_Request request = MPI_REQUEST_NULL;
  Bytes bytes;
  int peer = -1;
  bool is_receive = false;
};

// The largest tag a user's Send or Recv may use: half of the MPI tag bound;
// the upper half is the collectives'. Set by InitMpi.
int MpiUserTagMax();

// The world NewMpiCommunicator makes its group of: FailedPrecondition before
// InitMpi or after FinalizeMpi.
Result<MpiWorld> WorldForNewCommunicator();

// This process's rank of a new group of every rank of the world.
struct MpiGroup {
  int64_t id = 0;  // The same on every rank: groups are made in one order.
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
};

// Makes the next group, a collective over `world` (launched by mpirun): every
// rank first says which group it is making over the control channel, then
// the group's MPI communicator is duplicated from the world, its errors
// returning codes. Calls are serialised within the process. Fails with
// InvalidArgument when another rank is making another group, DeadlineExceeded
// naming the ranks that did not answer within `timeout_seconds`, Internal if
// MPI fails. Until RetireMpiGroup the group is live: leave notices for it are
// kept and FinalizeMpi refuses to run.
Result<MpiGroup> JoinNewMpiGroup(const MpiWorld& world, double timeout_seconds);

// Frees the group's MPI communicator `*comm` and forgets the group and its
// leave notices. `unfinished` (sends and matched receives of the group) are
// kept until MPI completes them, FinalizeMpi at the latest.
void RetireMpiGroup(int64_t id, MPI_Comm* comm, std::vector<PendingMessage> unfinished);

// What a peer's communicator said when it left its group.
struct LeaveNotice {
  Status reason;
  int64_t sent_to_me = 0;  // Messages it had sent to this rank.
};

// Tells `peer` over the control channel that this rank's communicator of
// group `id` leaves, for `reason` (its text cut to 1 KiB), having sent
// `sent_to_peer` messages to it. Returns the notice in flight, or nothing if
// MPI would not send it (the peer is then left to its timeout).
std::optional<PendingMessage> PostLeaveNotice(int64_t id, int peer, int64_t sent_to_peer,
                                              const Status& reason);

// Receives every leave notice that has arrived on the control channel; each
// is received by exactly one caller.
void PollLeaveNotices();

// The notice of `peer` leaving group `id`, if one was received.
std::optional<LeaveNotice> FindLeaveNotice(int64_t id, int peer);

}  // namespace ember::internal
