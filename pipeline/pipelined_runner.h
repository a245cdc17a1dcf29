#pragma once

// The asynchronous runtime: every stage has its own worker thread (with its
// own thread budget), items flow between stages through queues, and a fixed
// pool of item slots bounds how many are in flight: reading blocks while every
// slot is taken (back-pressure). Items pass every stage in order, so a stage
// sees items 0, 1, 2, ... one at a time, as under RunSequential; what
// changes is that stage s works on item i while stage s + 1 works on i - 1.
//
// Failure: the first error of any stage (or of reading) stops the whole
// pipeline: no new item is read, workers finish the stage run they are in
// and exit, `on_stop` is called so that stages blocked on something of their
// own can be woken, and the error is returned with the stage's name. A
// watchdog reports a stage that stays on one item longer than a threshold.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "pipeline/stage.h"

namespace ember::pipeline {

struct PipelineOptions {
  // Items in flight (slots); >= 1. With 1 the stages take turns, as in
  // RunSequential.
  int slots = 4;
  // Per stage (0 by default): > 0 runs the stage in a oneTBB arena of that
  // many threads, with as many OpenMP threads for oneDNN; 0 runs it on its
  // worker thread alone (one thread).
  PerStage<int> stage_threads;
  // Per stage (0 by default): a nice increment for
  // the stage's worker thread (Linux thread priorities). On a machine with
  // fewer cores than busy threads, stages off the critical path given a
  // positive value yield the cores to the others instead of preempting them
  // mid-way (an OpenMP team with one thread preempted waits at its next
  // barrier for it). They still run at full speed on idle cores.
  PerStage<int> stage_nice;
  // Report a stage that has been on one item for longer than this; 0: no
  // watchdog.
  double watchdog_seconds = 0.0;
  // Called (from the watchdog thread) with the stage, the item index and the
  // seconds it has been on it; the default logs a warning.
  std::function<void(Stage stage, int64_t item, double seconds)> on_stall;
  // Called once when the pipeline stops early (an error), from the thread
  // that saw the error, so that stages blocked on their own conditions can
  // be released. Must be thread-safe.
  std::function<void()> on_stop;
  // A span per stage per item ("read" for reading) when set.
  Tracer* tracer = nullptr;
};

// What a run measured.
struct PipelineStats {
  // Busy time of reading and of every stage.
  StageTimes times;
  // Seconds from the start of the run to its end.
  double wall_seconds = 0.0;
  // Stalls the watchdog reported.
  int64_t stalls = 0;
};

// Non-template core: stages and callbacks address items by slot.
//   read(index, slot) fills slot `slot` with item `index` (the read stage):
//     true, false when there are no more items, or an error.
//   stages[s](slot) runs stage ids[s] on the item in `slot`; the ids are
//     distinct and none is Stage::kRead.
//   done(index, slot), when set, runs after the last stage, in item order.
Status RunPipelinedSlots(const std::vector<Stage>& ids,
                         const std::vector<std::function<Status(int)>>& stages,
                         const std::function<Result<bool>(int64_t, int)>& read,
                         const std::function<void(int64_t, int)>& done,
                         const PipelineOptions& options, PipelineStats* stats);

// RunPipelinedSlots over `items` (one per slot; options.slots is taken from
// items.size()).
template <typename Item>
Status RunPipelined(const std::vector<StageWork<Item>>& stages, std::vector<Item>& items,
                    const std::function<Result<bool>(int64_t, Item&)>& read,
                    const std::function<void(Item&)>& done, PipelineOptions options,
                    PipelineStats* stats) {
  std::vector<Stage> ids;
  std::vector<std::function<Status(int)>> runs;
  for (const StageWork<Item>& stage : stages) {
    ids.push_back(stage.stage);
    runs.push_back([&items, &stage](int slot) { return stage.run(items[slot]); });
  }
  options.slots = static_cast<int>(items.size());
  return RunPipelinedSlots(
      ids, runs, [&](int64_t index, int slot) { return read(index, items[slot]); },
      done ? std::function<void(int64_t, int)>(
                 [&](int64_t, int slot) { done(items[slot]); })
           : std::function<void(int64_t, int)>(),
      options, stats);
}

}  // namespace ember::pipeline
