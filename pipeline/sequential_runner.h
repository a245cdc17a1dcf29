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
// `next` fills the item for index i and returns false when there are no more
// items. The first error of any stage stops the run and is returned. Each
// stage run is recorded as a trace span when `tracer` is set, and its busy
// time is added to `times` when set. `done`, when set, is called with each
// item after its last stage.
template <typename Item>
Status RunSequential(const std::vector<Stage<Item>>& stages,
                     const std::function<bool(int64_t, Item&)>& next, Item& item,
                     Tracer* tracer = nullptr, StageTimes* times = nullptr,
                     const std::function<void(Item&)>& done = {}) {
  if (times != nullptr && times->names.empty()) {
    for (const Stage<Item>& stage : stages) {
      times->names.push_back(stage.name);
      times->busy_seconds.push_back(0.0);
    }
  }
  for (int64_t i = 0; next(i, item); ++i) {
    for (size_t s = 0; s < stages.size(); ++s) {
      const auto start = std::chrono::steady_clock::now();
      Status status;
      {
        TraceSpan span(tracer, stages[s].name.c_str(), "stage", i);
        status = stages[s].run(item);
      }
      if (times != nullptr) {
        times->busy_seconds[s] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      if (!status.ok()) return status.WithContext("stage " + stages[s].name);
    }
    if (times != nullptr) ++times->items;
    if (done) done(item);
  }
  return Status::OK();
}

}  // namespace ember::pipeline
