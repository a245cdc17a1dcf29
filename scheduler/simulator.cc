#include "scheduler/simulator.h"

#include <glog/logging.h>

#include <algorithm>
#include <limits>

namespace ember::scheduler {
namespace {

constexpr double kUnset = -1.0;

struct StageState {
  int64_t item = 0;  // The item it works on or will work on next.
  bool busy = false;
  double remaining = 0.0;
  double started = 0.0;
};

// The speed (work per second, 1 alone) of every busy stage: each pool's
// busy stages share its capacity in proportion to demand, except a team's
// (SimStage::team).
std::vector<double> Rates(const std::vector<SimStage>& stages, const std::vector<StageState>& state,
                          const SimOptions& options, int pools) {
  const int n = static_cast<int>(stages.size());
  std::vector<double> demand(pools, 0.0);
  std::vector<int> team(pools, -1);
  for (int s = 0; s < n; ++s) {
    if (!state[s].busy) continue;
    demand[stages[s].pool] += stages[s].cores;
    if (stages[s].team) {
      CHECK_EQ(team[stages[s].pool], -1) << "at most one team stage per pool";
      team[stages[s].pool] = s;
    }
  }
  std::vector<double> pool_rate(pools, 1.0), team_rate(pools, 1.0);
  for (int p = 0; p < pools; ++p) {
    const double capacity = p == 0 ? options.cores
                            : p - 1 < static_cast<int>(options.pool_capacity.size())
                                ? options.pool_capacity[p - 1]
                                : 0.0;
    if (capacity <= 0 || demand[p] <= capacity) continue;
    const double t = team[p] >= 0 ? stages[team[p]].cores : 0.0;
    if (t <= 0 || t > capacity || demand[p] - t <= 0) {
      pool_rate[p] = team_rate[p] = capacity / demand[p];
      continue;
    }
    const double others = demand[p] - t;
    const double free = capacity - t;
    const double over = others - free;  // > 0: demand exceeds the capacity.
    const double k = std::max(1.0, over / t);
    team_rate[p] = 1.0 / (1.0 + std::min(over, k));
    pool_rate[p] = (free + over / (1.0 + k)) / others;
  }
  std::vector<double> rate(n, 1.0);
  for (int s = 0; s < n; ++s) {
    // A stage that uses none of the pool (a copy on the link) is not slowed.
    if (stages[s].cores <= 0) continue;
    rate[s] = s == team[stages[s].pool] ? team_rate[stages[s].pool] : pool_rate[stages[s].pool];
  }
  return rate;
}

}  // namespace

SimResult SimulatePipeline(const std::vector<SimStage>& stages, const SimOptions& options) {
  SimResult result;
  const int n = static_cast<int>(stages.size());
  const int64_t items = options.items;
  result.busy_seconds.assign(n, 0.0);
  if (n == 0 || items <= 0) return result;
  const int slots = std::max(1, options.slots);
  std::vector<std::vector<double>> finish(n, std::vector<double>(items, kUnset));
  if (options.record) result.start.assign(n, std::vector<double>(items, kUnset));
  std::vector<StageState> state(n);
  int pools = 1;
  for (const SimStage& stage : stages) {
    CHECK_GE(stage.pool, 0) << "pools are numbered from 0";
    pools = std::max(pools, stage.pool + 1);
  }
  double now = 0.0;
  auto done = [&](int s, int64_t i) { return i < 0 || finish[s][i] != kUnset; };
  auto complete = [&](int s) {
    finish[s][state[s].item] = now;
    state[s] = StageState{state[s].item + 1, false, 0.0, 0.0};
  };
  while (!done(n - 1, items - 1)) {
    // Start what can start and release the holds whose dependency is done;
    // repeat, since a completion at `now` may let a later stage start now.
    for (bool changed = true; changed;) {
      changed = false;
      for (int s = 0; s < n; ++s) {
        StageState& st = state[s];
        if (st.busy || st.item >= items) continue;
        const bool ready = s == 0 ? done(n - 1, st.item - slots) : done(s - 1, st.item);
        const int w = stages[s].waits_for;
        if (!ready || (w >= 0 && !done(w, st.item - stages[s].lag))) continue;
        st.busy = true;
        st.remaining = std::max(0.0, stages[s].seconds);
        st.started = now;
        if (options.record) result.start[s][st.item] = now;
        if (st.remaining == 0.0) complete(s);
        changed = true;
      }
    }
    if (done(n - 1, items - 1)) break;
    const std::vector<double> rate = Rates(stages, state, options, pools);
    double dt = std::numeric_limits<double>::infinity();
    for (int s = 0; s < n; ++s) {
      if (state[s].busy) dt = std::min(dt, state[s].remaining / rate[s]);
    }
    CHECK(dt != std::numeric_limits<double>::infinity())
        << "the simulated pipeline must always have a busy stage until it is done";
    now += dt;
    for (int s = 0; s < n; ++s) {
      StageState& st = state[s];
      if (!st.busy) continue;
      st.remaining -= dt * rate[s];
      if (st.remaining > 1e-12 * std::max(1.0, stages[s].seconds)) continue;
      result.busy_seconds[s] += now - st.started;
      complete(s);
    }
  }
  result.makespan_seconds = finish[n - 1][items - 1];
  const std::vector<double>& last = finish[n - 1];
  if (items >= 8) {
    const int64_t a = items / 4, b = 3 * items / 4;
    result.seconds_per_item = (last[b] - last[a]) / static_cast<double>(b - a);
  } else {
    result.seconds_per_item = result.makespan_seconds / static_cast<double>(items);
  }
  if (options.record) result.finish = std::move(finish);
  return result;
}

}  // namespace ember::scheduler
