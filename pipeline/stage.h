#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember::pipeline {

// One named step of the work done on every item (a training batch): pull,
// dense, push, ... Stages are what the scheduler places and the runtime
// overlaps; a runner calls `run` once per item, in stage order.
template <typename Item>
struct Stage {
  std::string name;
  std::function<Status(Item& item)> run;
};

// Busy time of each stage over a run, in stage order.
struct StageTimes {
  std::vector<std::string> names;
  std::vector<double> busy_seconds;
  int64_t items = 0;

  // Index of the stage with the most busy time; -1 when there are none.
  int Bottleneck() const;
};

}  // namespace ember::pipeline
