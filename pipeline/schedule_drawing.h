#pragma once

// Draws a schedule (pipeline/schedule.h) as text, with its predicted bubble.

#include <string>

#include "core/status.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_simulator.h"

namespace ember::pipeline {

// Simulates `schedule` under `costs` (pipeline/schedule_simulator.h) and
// draws it: a title line, then one row per rank and one column per time slot
// of the shortest compute; a cell holds the forward "F3.1", backward "B3.1"
// (micro-batch 3, chunk 1) or weight gradients "W3.1" that run in the slot,
// or "." when the rank is idle; a compute spanning k slots fills k cells.
// Then the step time, the simulated idle fraction and bubble ratio, and the
// bubble ratio predicted for equal chunks without latency: (p - 1) / (v·m),
// or (p - 1) / (3m) for a schedule that splits its backwards. Times are
// rounded to whole slots in the grid, not in the figures. Sends, receives
// and the optimizer step are not drawn.
// Errors: those of SimulateSchedule.
Result<std::string> DrawScheduleText(const Schedule& schedule, const ScheduleCosts& costs = {});

}  // namespace ember::pipeline
