#include "pipeline/schedule_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "pipeline/schedule_checker.h"

namespace ember::pipeline {
namespace {

Status ValidateCostList(const std::vector<double>& seconds, const char* name, int chunks) {
  if (seconds.size() != 1 && static_cast<int>(seconds.size()) != chunks) {
    return Status::InvalidArgument("schedule costs: ", name, " needs 1 or ", chunks,
                                   " entries, got ", seconds.size());
  }
  for (size_t c = 0; c < seconds.size(); ++c) {
    if (!std::isfinite(seconds[c]) || seconds[c] < 0) {
      return Status::InvalidArgument("schedule costs: ", name, "[", c,
                                     "] must be finite and >= 0, got ", seconds[c]);
    }
  }
  return Status::OK();
}

double CostOf(const std::vector<double>& seconds, int chunk) {
  return seconds.size() == 1 ? seconds[0] : seconds[static_cast<size_t>(chunk)];
}

// The seconds `instr` (a compute or the optimizer step) takes; `splits`:
// the schedule splits its backwards.
double ComputeSeconds(const ScheduleCosts& costs, const Instr& instr, bool splits) {
  if (instr.kind == InstrKind::kOptimizerStep) return costs.optimizer_step_seconds;
  if (instr.kind == InstrKind::kForward) return CostOf(costs.forward_seconds, instr.chunk);
  const double backward = CostOf(costs.backward_seconds, instr.chunk);
  const double weight =
      costs.weight_seconds.empty() ? backward / 2 : CostOf(costs.weight_seconds, instr.chunk);
  if (instr.kind == InstrKind::kBackwardWeight) return weight;
  return splits ? backward - weight : backward;
}

// A message by what both its send and receive name.
using MessageKey = std::tuple<bool, int, int>;  // (is activation, micro-batch, chunk)
MessageKey KeyOf(const Instr& instr) {
  const bool activation =
      instr.kind == InstrKind::kSendActivation || instr.kind == InstrKind::kRecvActivation;
  return {activation, instr.micro_batch, instr.chunk};
}

}  // namespace

Status ValidateCosts(const ScheduleCosts& costs, int chunks) {
  EMBER_RETURN_IF_ERROR(ValidateCostList(costs.forward_seconds, "forward_seconds", chunks));
  EMBER_RETURN_IF_ERROR(ValidateCostList(costs.backward_seconds, "backward_seconds", chunks));
  if (!costs.weight_seconds.empty()) {
    EMBER_RETURN_IF_ERROR(ValidateCostList(costs.weight_seconds, "weight_seconds", chunks));
    for (int c = 0; c < chunks; ++c) {
      if (CostOf(costs.weight_seconds, c) > CostOf(costs.backward_seconds, c)) {
        return Status::InvalidArgument("schedule costs: weight_seconds of chunk ", c, " (",
                                       CostOf(costs.weight_seconds, c),
                                       ") is more than its backward_seconds (",
                                       CostOf(costs.backward_seconds, c), ")");
      }
    }
  }
  for (const auto& [value, name] :
       {std::pair{costs.send_latency_seconds, "send_latency_seconds"},
        std::pair{costs.optimizer_step_seconds, "optimizer_step_seconds"}}) {
    if (!std::isfinite(value) || value < 0) {
      return Status::InvalidArgument("schedule costs: ", name, " must be finite and >= 0, got ",
                                     value);
    }
  }
  return Status::OK();
}

double Timeline::idle_fraction() const {
  if (step_seconds <= 0 || busy_seconds.empty()) return 0;
  double idle = 0;
  for (double busy : busy_seconds) idle += step_seconds - busy;
  return idle / (step_seconds * static_cast<double>(busy_seconds.size()));
}

double Timeline::bubble_ratio() const {
  double idle = 0, busy_total = 0;
  for (double busy : busy_seconds) {
    idle += step_seconds - busy;
    busy_total += busy;
  }
  return busy_total > 0 ? idle / busy_total : 0;
}

Result<Timeline> SimulateSchedule(const Schedule& schedule, const ScheduleCosts& costs) {
  EMBER_RETURN_IF_ERROR(CheckSchedule(schedule));
  EMBER_RETURN_IF_ERROR(ValidateCosts(costs, schedule.shape.chunks()));
  const int p = schedule.shape.ranks;
  const bool splits = schedule.splits_backward();
  Timeline timeline;
  timeline.ranks.resize(static_cast<size_t>(p));
  timeline.busy_seconds.assign(static_cast<size_t>(p), 0);
  std::vector<double> clock(static_cast<size_t>(p), 0);
  std::map<MessageKey, double> arrivals;
  // The checker proved that this loop finishes: every receive's message is
  // sent by a rank that can get there.
  for (bool progress = true; progress;) {
    progress = false;
    for (int rank = 0; rank < p; ++rank) {
      const std::vector<Instr>& list = schedule.ranks[static_cast<size_t>(rank)];
      std::vector<TimedInstr>& out = timeline.ranks[static_cast<size_t>(rank)];
      double& now = clock[static_cast<size_t>(rank)];
      double& busy = timeline.busy_seconds[static_cast<size_t>(rank)];
      for (; out.size() < list.size(); progress = true) {
        const Instr& instr = list[out.size()];
        const double start = now;
        if (instr.is_send()) {
          arrivals[KeyOf(instr)] = now + costs.send_latency_seconds;
        } else if (instr.is_recv()) {
          const auto it = arrivals.find(KeyOf(instr));
          if (it == arrivals.end()) break;
          now = std::max(now, it->second);
        } else {
          const double cost = ComputeSeconds(costs, instr, splits);
          now += cost;
          busy += cost;
        }
        out.push_back({instr, start, now});
      }
    }
  }
  for (int rank = 0; rank < p; ++rank) {
    CHECK_EQ(timeline.ranks[static_cast<size_t>(rank)].size(),
             schedule.ranks[static_cast<size_t>(rank)].size())
        << "a checked schedule runs to its end";
    timeline.step_seconds = std::max(timeline.step_seconds, clock[static_cast<size_t>(rank)]);
  }
  return timeline;
}

}  // namespace ember::pipeline
