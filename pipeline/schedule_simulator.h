#pragma once

// Times a schedule (pipeline/schedule.h) from what each chunk costs: every
// rank's timeline, the step time and the pipeline bubble, without a model.

#include <vector>

#include "core/status.h"
#include "pipeline/schedule.h"

namespace ember::pipeline {

struct ScheduleCosts {
  // Seconds of one micro-batch's forward (backward) through each chunk: p·v
  // entries, in chunk order, or one entry for every chunk alike.
  std::vector<double> forward_seconds = {1.0};
  std::vector<double> backward_seconds = {2.0};
  // Of each backward, the seconds of its weight gradients: the
  // kBackwardWeight of a schedule that splits the backward (its kBackward
  // then takes the rest), part of the kBackward of one that does not. Empty
  // (the default): half of each backward; else 1 or `chunks` entries, each
  // at most its backward.
  std::vector<double> weight_seconds;
  // From a send to when its receiver may have the message. Default: 0.
  double send_latency_seconds = 0;
  // The optimizer step on each rank. Default: 0.
  double optimizer_step_seconds = 0;
};

// InvalidArgument naming the field unless each cost list has 1 or `chunks`
// entries and every cost is finite and >= 0.
Status ValidateCosts(const ScheduleCosts& costs, int chunks);

// One instruction in time. Sends and receives take no time of their own; a
// receive ends when its message arrives (it starts when the rank reaches it).
struct TimedInstr {
  Instr instr;
  double start_seconds = 0;
  double end_seconds = 0;
};

struct Timeline {
  // Every rank's instructions, in schedule order, with their times.
  std::vector<std::vector<TimedInstr>> ranks;
  // From the start of the step to the end of the last rank's last instruction.
  double step_seconds = 0;
  // Per rank: time in forwards, backwards (weight gradients included) and
  // the optimizer step.
  std::vector<double> busy_seconds;

  // Idle time of all ranks over all ranks' step time: sum over ranks of
  // (step - busy) / (p · step). With equal chunks and no latency:
  // (p - 1) / (v·m + p - 1) for 1F1B, interleaved 1F1B, and GPipe when
  // v = 1 or m >= p (tests/pipeline/schedule_simulator_test.cc).
  double idle_fraction() const;
  // Idle time over busy time, the "bubble time fraction" of Narayanan et al.
  // (2021): (p - 1) / (v·m) for 1F1B and interleaved 1F1B with equal chunks
  // and no latency; (p - 1) / (3m) for ZB-H1 with equal F, B and W and
  // m >= p.
  double bubble_ratio() const;
};

// Runs `schedule` in simulated time: each rank starts at 0 and runs its
// instructions in order; a compute takes its cost; a send returns at once
// and its message arrives send_latency_seconds later; a receive waits for
// its message. InvalidArgument when CheckSchedule rejects the schedule (its
// message) or ValidateCosts the costs.
Result<Timeline> SimulateSchedule(const Schedule& schedule, const ScheduleCosts& costs);

}  // namespace ember::pipeline
