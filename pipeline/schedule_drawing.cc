#include "pipeline/schedule_drawing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <vector>

namespace ember::pipeline {
namespace {

// The slot width: the shortest positive compute, so that each compute
// fills at least one cell.
double SlotSeconds(const Timeline& timeline) {
  double slot = std::numeric_limits<double>::infinity();
  for (const std::vector<TimedInstr>& rank : timeline.ranks) {
    for (const TimedInstr& timed : rank) {
      const double length = timed.end_seconds - timed.start_seconds;
      if (timed.instr.is_compute() && length > 0) slot = std::min(slot, length);
    }
  }
  return std::isfinite(slot) ? slot : 1.0;
}

std::string Figure(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

}  // namespace

Result<std::string> DrawScheduleText(const Schedule& schedule, const ScheduleCosts& costs) {
  EMBER_ASSIGN_OR_RETURN(const Timeline timeline, SimulateSchedule(schedule, costs));
  const double slot = SlotSeconds(timeline);
  const auto column = [&](double seconds) {
    return static_cast<size_t>(std::llround(seconds / slot));
  };
  const size_t columns = column(timeline.step_seconds);
  size_t width = 1;
  for (const std::vector<TimedInstr>& rank : timeline.ranks) {
    for (const TimedInstr& timed : rank) {
      if (timed.instr.is_compute()) width = std::max(width, ToString(timed.instr).size());
    }
  }
  std::ostringstream out;
  const bool splits = schedule.splits_backward();
  out << "schedule " << schedule.kind << " (" << ToString(schedule.shape) << "), one column per "
      << Figure(slot) << " s; "
      << (splits ? "Fm.c / Bm.c / Wm.c: forward / input gradient / weight gradients"
                 : "Fm.c / Bm.c: forward / backward")
      << " of micro-batch m on chunk c\n";
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::vector<std::string> cells(columns, ".");
    for (const TimedInstr& timed : timeline.ranks[r]) {
      if (!timed.instr.is_compute()) continue;
      const size_t end = std::min(columns, column(timed.end_seconds));
      for (size_t c = column(timed.start_seconds); c < end; ++c) cells[c] = ToString(timed.instr);
    }
    out << "rank " << r << " |";
    for (const std::string& cell : cells) {
      out << " " << cell << std::string(width - cell.size(), ' ');
    }
    out << " |\n";
  }
  const ScheduleShape& shape = schedule.shape;
  const double p = shape.ranks, v = shape.virtual_stages, m = shape.micro_batches;
  out << "step " << Figure(timeline.step_seconds) << " s; idle fraction "
      << Figure(timeline.idle_fraction()) << "; bubble (idle / busy) "
      << Figure(timeline.bubble_ratio());
  if (splits) {
    out << ", predicted (p-1)/(3m) = " << Figure((p - 1) / (3 * m))
        << " for equal F, B and W and m >= p\n";
  } else {
    out << ", predicted (p-1)/(v*m) = " << Figure((p - 1) / (v * m)) << "\n";
  }
  return out.str();
}

}  // namespace ember::pipeline
