#pragma once

#include <memory>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"

namespace ember {

// Makes a group of `size` ranks that are threads of this process: entry r of
// the result is rank r, to be used from its own thread (see Communicator for
// the calling rules). Fails with InvalidArgument if size < 1 or the options
// are invalid.
//
// Behaviour beyond the Communicator contract:
// * Host buffers only; a device buffer is InvalidArgument.
// * Send copies the message and returns at once (mailboxes are unbounded),
//   so a pair of ranks may both Send before they Recv. Recv matches by tag:
//   messages with other tags from the same rank wait their turn.
// * A rank joining a collective copies its input; once every rank has joined,
//   each computes its own output from the copies, so AllReduce sums the same
//   contributions in the same order on every rank.
// * Detected and reported to every rank that reaches the collective: another
//   operation, dtype, count or root at the same position (InvalidArgument
//   naming both ranks and what each called); AllToAllV counts that do not
//   pair up (InvalidArgument naming the sender and receiver); invalid
//   arguments on one rank (the others fail at once, naming it). A Recv whose
//   message has another dtype or count is InvalidArgument naming both.
// * A timeout names every rank that did not answer and its last call
//   ("rank 1 is waiting in recv from rank 0 (tag 2)").
// * A collective that failed on one rank fails on every rank that reaches
//   it, so the ranks stay in step and later collectives can still succeed
//   (a rank that left keeps failing every later collective, naming it).
// * Destroying a communicator leaves the group (Abort); the group's shared
//   state lives until its last communicator is destroyed.
Result<std::vector<std::unique_ptr<Communicator>>> NewInProcessCommunicators(
    int size, const CommunicatorOptions& options = {});

}  // namespace ember
