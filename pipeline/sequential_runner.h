#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "core/trace.h"
#include "pipeline/stage.h"

namespace ember::pipeline {

// Runs every stage on one item, then the next item: no overlap. This is the
// reference that asynchronous schedules are checked against (--pipeline=off).
// `next` (the read stage) fills the item for index i and returns false when
// there are no more items. The first error of any stage stops the run and is
// returned. Each stage run (reading included) is recorded as a trace span
// when `tracer` is set, and its busy time is added to `times` when set.
// `done`, when set, is called with each item after its last stage.
template <typename Item>
Status RunSequential(const std::vector<StageWork<Item>>& stages,
                     const std::function<bool(int64_t, Item&)>& next, Item& item,
                     Tracer* tracer = nullptr, StageTimes* times = nullptr,
                     const std::function<void(Item&)>& done = {}) {
  using Clock = std::chrono::steady_clock;
  const auto add_time = [times](Stage stage, Clock::time_point start) {
    if (times == nullptr) return;
    times->busy_seconds[stage] += std::chrono::duration<double>(Clock::now() - start).count();
  };
  for (int64_t i = 0;; ++i) {
    const Clock::time_point read_start = Clock::now();
    bool more = false;
    {
      TraceSpan span(tracer, StageName(Stage::kRead), "stage", i);
      more = next(i, item);
    }
    add_time(Stage::kRead, read_start);
    if (!more) break;
    for (const StageWork<Item>& stage : stages) {
      const Clock::time_point start = Clock::now();
      Status status;
      {
        TraceSpan span(tracer, StageName(stage.stage), "stage", i);
        status = stage.run(item);
      }
      add_time(stage.stage, start);
      if (!status.ok()) return status.WithContext(std::string("stage ") + StageName(stage.stage));
    }
    if (times != nullptr) ++times->items;
    if (done) done(item);
  }
  return Status::OK();
}

}  // namespace ember::pipeline
