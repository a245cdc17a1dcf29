#pragma once

// A discrete-event simulation of the training pipeline: items (batches) pass
// through stages in order; a stage works on one item at a time and item i
// enters stage s when it has left stage s - 1 and stage s has finished item
// i - 1; at most `slots` items are in flight (item i is read only once item
// i - slots has left the last stage). Stages share the host's cores: a busy
// stage occupies `cores` of them, and when the busy stages ask for more than
// the host has, all of them slow down in proportion (processor sharing);
// other shared resources (a network link) are pools of their own.
// A stage whose threads work in lock step (an OpenMP team, as oneDNN's dense
// ops) is slowed differently: see SimStage::team.
// A stage may also have to wait, before it starts item i, for another stage
// to have completed item i - lag (the pull waiting for the push of the
// batches whose rows it reads: bounded staleness); waiting uses no core.

#include <cstdint>
#include <string>
#include <vector>

namespace ember::scheduler {

struct SimStage {
  std::string name;
  // Seconds per item when the stage has its cores to itself.
  double seconds = 0.0;
  // Cores (units of its pool) it keeps busy while it works.
  double cores = 1.0;
  // Starts item i only after stage `waits_for` completed item i - lag (no
  // wait for i < lag); -1: no such wait.
  int waits_for = -1;
  int lag = 1;
  // The resource it shares with the other stages of its pool: 0 is the
  // host's CPU cores; others are e.g. a network link both all-to-alls use.
  int pool = 0;
  // Its threads work in lock step (an OpenMP team): each parallel step ends
  // when its slowest thread does. When the busy stages of its pool ask for
  // more cores than there are, the other stages' threads first take the
  // cores the team leaves free; each remaining one shares a core with one
  // of the team's threads (time slices in equal parts). The team then goes
  // at the pace of a thread on a shared core, not at its average: with
  // `over` other threads on its `t` cores, k = max(1, over / t) of them per
  // shared core, it runs at 1 / (1 + min(over, k)) and the others get the
  // free cores plus over / (1 + k) cores (a fraction of a thread, over < 1,
  // is a thread busy that part of the time). So a team spanning every core
  // loses the whole CPU time of what runs beside it, not that time / cores
  // as processor sharing would have it. At most one team per pool.
  bool team = false;
};

struct SimOptions {
  int slots = 4;
  int64_t items = 64;
  // Cores the stages of pool 0 share; <= 0: as many as they ask for (no
  // contention).
  double cores = 0.0;
  // Capacity of pools 1, 2, ... (pool_capacity[p - 1]); a pool without an
  // entry, or <= 0, has no contention.
  std::vector<double> pool_capacity;
  // Record every item's start and finish times per stage (for tests).
  bool record = false;
};

struct SimResult {
  double makespan_seconds = 0.0;
  // Seconds per item in steady state: the time between the completions of
  // the middle half of the items (the start-up and drain excluded).
  double seconds_per_item = 0.0;
  // Per stage: time spent working (waits excluded), over all items.
  std::vector<double> busy_seconds;
  // With options.record: start[s][i] and finish[s][i].
  std::vector<std::vector<double>> start;
  std::vector<std::vector<double>> finish;
};

// Runs the simulation. With no stages or items, everything is 0.
SimResult SimulatePipeline(const std::vector<SimStage>& stages, const SimOptions& options);

}  // namespace ember::scheduler
