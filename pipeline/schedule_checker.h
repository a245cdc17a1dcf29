#pragma once

// Proves a schedule (pipeline/schedule.h) right before anything runs it.

#include "core/status.h"
#include "pipeline/schedule.h"

namespace ember::pipeline {

// Returns OK when `schedule` is one complete, deadlock-free training step:
//  * well formed: one instruction list per rank; micro-batches and chunks in
//    range; a forward or backward only on the rank holding its chunk; a send
//    or receive only between the ranks of two adjacent chunks, with the
//    right peer; exactly one optimizer step per rank, as its last
//    instruction;
//  * complete: every micro-batch runs forward through every chunk and
//    backward through every chunk, each exactly once, and so its weight
//    gradients (kBackwardWeight) when the schedule has any; every tensor
//    that crosses ranks is sent once and received once;
//  * ordered on each rank: a forward after the forward of the chunk before
//    (or the receive of its activation), a backward after its own forward and
//    after the backward of the chunk after (or the receive of its gradient),
//    so backwards run in reverse chunk order; weight gradients after their
//    backward; a send after the compute that makes its tensor;
//  * deadlock-free: simulating all ranks, with sends that return at once
//    (buffered) and receives that block, every rank reaches its optimizer
//    step. Messages between two ranks are matched in the order they were
//    sent (as NCCL does; the in-process and MPI backends, which match by
//    tag, accept every such schedule too), so a receive whose peer's next
//    message is another one is an error.
// Otherwise InvalidArgument naming the schedule, the rank, the instruction
// (its index and ToString) and what is wrong; for a deadlock, the first
// stuck instruction of every rank that did not finish.
Status CheckSchedule(const Schedule& schedule);

// Returns OK when `schedule` (which CheckSchedule accepts) also finishes on a
// backend whose sends wait for their receive (NCCL): each run of consecutive
// sends and receives of a rank is posted together as one group
// (Communicator::SendRecvGroup), a group completes when every transfer in it
// has met its counterpart in the peer's current group, and then the rank
// goes on. 1F1B and GPipe with one chunk per rank pass, and interleaved 1F1B
// with m = p; interleaved with m > p and GPipe with v > 1 do not
// (tests/pipeline/schedule_checker_test.cc). Otherwise InvalidArgument
// naming the first stuck group of every rank that did not finish.
Status CheckRendezvous(const Schedule& schedule);

}  // namespace ember::pipeline
