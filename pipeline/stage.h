#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/status.h"
#include "scheduler/stage.h"

namespace ember::pipeline {

using scheduler::kAllStages;
using scheduler::PerStage;
using scheduler::Stage;
using scheduler::StageName;

// The work of one stage of a training step (scheduler/stage.h) on every
// item (a batch): what the scheduler places and the runtime overlaps. A
// runner calls `run` once per item, in stage order.
template <typename Item>
struct StageWork {
  Stage stage = Stage::kUnique;
  std::function<Status(Item& item)> run;
};

// Busy time of each stage over a run (0 for a stage that did not run).
struct StageTimes {
  PerStage<double> busy_seconds;
  int64_t items = 0;

  // The stage with the most busy time; none when no stage was busy.
  std::optional<Stage> Bottleneck() const;
  // Busy seconds of every stage together.
  double TotalSeconds() const;
};

// The threads of the stages after reading, from their counts in stage order
// (unique, pull, dense, push: the --stage_threads flag); read gets 0. Empty:
// every stage 0 (the default split). InvalidArgument for another count.
Result<PerStage<int>> WorkerStageThreads(const std::vector<int>& counts);

}  // namespace ember::pipeline
