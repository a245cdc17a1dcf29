#pragma once

// Runs one rank's instructions of a schedule (pipeline/schedule.h): the
// model work of its chunks behind a small interface, activations and their
// gradients between ranks over a Communicator.

#include <cstdint>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"
#include "pipeline/schedule.h"

namespace ember::pipeline {

// The model work of the chunks that one rank holds, as the executor calls
// it: one thread (the rank's) calls every method, in schedule order.
class ChunkWork {
 public:
  virtual ~ChunkWork() = default;

  // Elements of `chunk`'s output for `micro_batch`: what goes to chunk + 1,
  // and the size of the gradient that comes back. Only asked of chunks whose
  // output crosses ranks.
  virtual int64_t OutputElements(int micro_batch, int chunk) const = 0;
  // Forward of `chunk` on `micro_batch`. `input` is chunk - 1's output
  // (empty for chunk 0, which reads the micro-batch itself). Writes the
  // output (the last chunk may leave it empty: it keeps its loss).
  virtual Status Forward(int micro_batch, int chunk, const std::vector<float>& input,
                         std::vector<float>* output) = 0;
  // Backward of `chunk` on `micro_batch`, after its forward. `output_grad`
  // is the loss gradient w.r.t. the output (empty for the last chunk, which
  // starts from its loss). Writes the gradient w.r.t. the input (chunk 0 may
  // leave it empty) and adds the parameter gradients to the chunk's sums.
  virtual Status Backward(int micro_batch, int chunk, const std::vector<float>& output_grad,
                          std::vector<float>* input_grad) = 0;
  // The backward in two halves, for schedules that split it
  // (Schedule::splits_backward): BackwardInput is Backward except that the
  // parameter gradients it can compute apart wait for BackwardWeight of the
  // same (micro_batch, chunk), which adds them to the chunk's sums. By
  // default the first half is the whole Backward and the second does
  // nothing: a work that cannot split runs B and W together.
  virtual Status BackwardInput(int micro_batch, int chunk, const std::vector<float>& output_grad,
                               std::vector<float>* input_grad) {
    return Backward(micro_batch, chunk, output_grad, input_grad);
  }
  virtual Status BackwardWeight(int micro_batch, int chunk) { return Status::OK(); }
  // Applies and clears the summed gradients of every chunk of the rank.
  virtual Status OptimizerStep() = 0;
};

// What RunRankSchedule measured of one rank's schedules, summed over runs:
// seconds in its computes (forwards, backwards, weight gradients and the
// optimizer step) and from its first instruction to its last.
struct RankScheduleTimes {
  int64_t steps = 0;
  double busy_seconds = 0;
  double total_seconds = 0;

  // The rank's idle time (waiting for messages, and sending) over its busy
  // time: its measured pipeline bubble, as Timeline::bubble_ratio has it
  // for the whole pipeline. 0 before any step.
  double bubble_ratio() const;
};

// "measured bubble (idle / busy) 0.125 over 20 steps (busy 1.2 s of 1.35 s)".
std::string ToString(const RankScheduleTimes& times);

// The message tag of a send or receive: distinct for every (activation or
// gradient, micro-batch, chunk) of `shape`, >= 0.
int MessageTag(const ScheduleShape& shape, const Instr& instr);

// Runs `schedule.ranks[rank]` in order with `work` (borrowed for the call).
// `comm` (borrowed; its rank must be `rank` and its size p) carries the
// sends and receives, each run of consecutive ones as one group
// (Communicator::SendRecvGroup); it may be null when the schedule has none
// (p = 1). Where the communicator's sends wait for their receive (NCCL), the
// schedule must pass CheckRendezvous (InvalidArgument, its message).
// Returns the first error, with context naming the rank and instruction;
// before returning it aborts `comm` with that error, so that peers waiting on
// this rank fail at once rather than at their timeout.
// InvalidArgument when `rank` or `comm` does not fit the schedule.
// With `times`, adds this run's measured seconds to it.
// REQUIRES: CheckSchedule(schedule) is OK.
Status RunRankSchedule(const Schedule& schedule, int rank, ChunkWork& work, Communicator* comm,
                       RankScheduleTimes* times = nullptr);

}  // namespace ember::pipeline
