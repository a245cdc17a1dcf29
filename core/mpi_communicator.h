#pragma once

// The Communicator across processes through MPI (OpenMPI, launched by
// `mpirun`): one rank per process, on one host or many. No MPI type appears
// here; the MPI headers stay in core/'s own files.
//
// A process sets MPI up once (core/mpi_world.h), makes one communicator per
// thread that talks to the other ranks (a training step's exchanges, the
// dense all-reduce), and finishes:
//
//   EMBER_ASSIGN_OR_RETURN(MpiWorld world, InitMpi(&argc, &argv));
//   EMBER_ASSIGN_OR_RETURN(auto keys_out, NewMpiCommunicator(options));
//   EMBER_ASSIGN_OR_RETURN(auto dense, NewMpiCommunicator(options));
//   ... keys_out on the pull thread, dense on the dense thread ...
//   keys_out.reset(); dense.reset();
//   EMBER_RETURN_IF_ERROR(FinalizeMpi());

#include <memory>

#include "core/communicator.h"
#include "core/mpi_world.h"
#include "core/status.h"

namespace ember {

// Makes this process's rank of a new group of every rank of the MPI world:
// a collective over the world, so every rank must call it, and every rank
// must make its calls in the same order (one thread at a time); each call
// makes an independent channel (its own MPI communicator), so different
// threads can each use their own communicator concurrently. Without mpirun
// (or with a world of one) the group has one rank. Fails with
// FailedPrecondition before InitMpi, InvalidArgument for invalid options or
// when another rank is making another of its communicators (calls out of
// order), DeadlineExceeded naming the ranks that did not join within
// options.timeout_seconds, Internal if MPI fails.
//
// How the MPI communicators go beyond or fall short of the Communicator
// contract:
// * Host buffers only; a device buffer is InvalidArgument.
// * Every message is staged through a copy: Send copies the message and
//   returns at once (a pair of ranks may both Send before they Recv); a
//   collective returns once it has received what it needs from every peer,
//   its outgoing copies completing in the background (and, if a peer never
//   takes them, until FinalizeMpi). Recv matches by tag: messages with other
//   tags from the same rank wait their turn. Tags go up to half of the MPI
//   tag bound (2^30 - 1 with OpenMPI); collectives use the upper half.
//   A message is at most 2 GiB (MPI counts are int): larger is
//   InvalidArgument.
// * Every collective is one exchange in which each rank sends one message to
//   every other rank (with the operation's number and signature, and its
//   data if the peer needs it) and waits for one from each. This costs
//   size() - 1 small messages per rank even for Barrier and Broadcast and
//   lets every rank name exactly the ranks that did not join. What each
//   rank sends, for N = size() ranks and S the bytes of the data (counters()
//   counts it, with a 40-byte header per message):
//     AllReduce      2 (N-1)/N x S   (two exchanges: a reduce-scatter in
//                                     which rank q sums block q of every
//                                     rank in rank order, then an all-gather
//                                     of the summed blocks)
//     ReduceScatter  (N-1)/N x S     (S: the input, N blocks)
//     AllGather      (N-1) x S       (S: the input, = (N-1)/N of the output)
//     AllToAllV      what it sends to the others
//     Broadcast      root: (N-1) x S; others: headers only
//   These are the bandwidth lower bounds of a ring or of recursive halving,
//   in 2 rounds of N - 1 messages rather than 2 (N - 1) (ring) or 2 log N
//   rounds of larger ones; and every element is summed in rank order, so
//   every rank gets the bits of the sequential one-rank sum in every run: no
//   separate exact mode is needed. (MPI_Allreduce is not used: it cannot
//   time out or name a missing rank, and its sums follow the algorithm it
//   picks for the size; tools/bench/mpi_collectives.cc measures both.)
// * Detected, by every rank that receives the offending message: another
//   operation, dtype, count or root at the same position (InvalidArgument
//   naming both ranks and what each called); invalid arguments on one rank
//   (its peers fail naming it, every rank still takes part so the ranks stay
//   in step); an AllToAllV block whose size differs from the receiver's
//   recv_counts (detected by the receiver only: the sender succeeds); a Recv
//   whose message has another dtype or count (InvalidArgument naming both;
//   the message is dropped). Not detected: a Send that no rank ever receives
//   (it stays queued), collectives issued from several threads on one
//   communicator, and a rank that makes its communicators in another order
//   than the others after the creation check.
// * Waits poll MPI with a short backoff (yield, then sleeps growing to 1 ms)
//   against the deadline; MPI has no blocking wait with a timeout.
// * A timeout names the ranks whose messages did not arrive ("all_reduce #12:
//   rank 3 did not answer within 5 s"); it cannot say what they are doing.
//   After a timeout or another failure the ranks may be out of step: a
//   later collective may then fail or time out too.
// * Abort and destruction send a notice, with the reason and how many
//   messages this rank had sent to each peer, over a channel of the process;
//   a peer waiting on this rank fails with Unavailable once it has received
//   every message this rank sent it, so a rank that leaves after a
//   successful exchange never fails its peers, and a peer waiting for
//   something this rank never sent fails at once. If a peer waits on this
//   rank while a message this rank sent it under another tag is still
//   unreceived, it fails at its timeout instead.
// * A process that dies is not noticed by MPI communicators (MPI does not
//   tell), but mpirun ends the other ranks at once and names the dead one
//   ("mpirun noticed that process rank 1 ... exited on signal 9"); without
//   mpirun's help, peers fail at their timeout naming it.
Result<std::unique_ptr<Communicator>> NewMpiCommunicator(const CommunicatorOptions& options = {});

}  // namespace ember
