#pragma once

// The built-in schedule kinds, each a ComputeOrder (pipeline/schedule.h):
// every rank's order of forwards and backwards for one step. Within a chunk,
// micro-batches run forward and backward in increasing order, so each
// chunk's gradients accumulate over micro-batches 0, 1, ..., m-1 in every
// kind.

#include <vector>

#include "core/status.h"
#include "pipeline/schedule.h"

namespace ember::pipeline {

// GPipe (Huang et al., 2019): every forward, then every backward. A rank runs
// its chunks in increasing order for the forwards (all m micro-batches of
// chunk r, then of chunk r + p, ...) and in decreasing order for the
// backwards. Any p, v, m >= 1. Holds the activations of all m micro-batches.
Result<std::vector<std::vector<Instr>>> GPipeOrder(const ScheduleShape& shape);

// 1F1B (PipeDream-flush; Narayanan et al., 2021): rank r runs
// min(p - r - 1, m) warm-up forwards, then alternates one forward and one
// backward, then the remaining backwards. Requires v = 1 (use "interleaved"
// for v > 1); any m >= 1. Holds at most p - r micro-batches' activations.
Result<std::vector<std::vector<Instr>>> OneFOneBOrder(const ScheduleShape& shape);

// Interleaved 1F1B in Megatron-LM's current order (Narayanan et al., 2021,
// section 2.2; schedules.py since November 2024): the micro-batches pass
// through a rank's v chunks in groups of G (shape.group, default p): group
// after group, each group's micro-batches run through local chunk 0, then
// 1, ..., v - 1 (the last group takes what remains), and the backwards
// visit the local chunks in the reverse order. Rank r runs
// min(v·m, 2(p - r - 1) + (v - 1)·G) warm-up forwards — every forward on
// the first ranks when m = p, while the later ones start 1F1B — then
// alternates one forward and one backward, then the remaining backwards.
// Accepts what Megatron accepts: p <= G <= m, and m mod G either 0 or at
// least p (with the default G = p: m a multiple of p).
Result<std::vector<std::vector<Instr>>> InterleavedOrder(const ScheduleShape& shape);

// ZB-H1 (Qi et al., 2023, "Zero Bubble Pipeline Parallelism", section 3.1;
// Paddle's pipeline_scheduler_ZBH1): 1F1B with each backward split into B,
// the input gradient the previous rank waits for, and W, the weight
// gradients no one waits for (kBackwardWeight). Rank r runs min(p - r, m)
// warm-up forwards, then for each micro-batch k in turn B(k), W(k - r) and
// the next forward, then the r weight gradients left: W lags B by r
// micro-batches, so that the ranks near the end fill what would be 1F1B's
// bubble with W. With equal F, B and W and m >= p the bubble (idle over
// busy) is (p - 1)/(3m), a third of 1F1B's (tests/pipeline/schedule_
// simulator_test.cc). Every rank holds at most p micro-batches' activations
// (from F to W): 1F1B's first rank's. Weight gradients run in micro-batch
// order within the chunk, as every kind's backwards do, so the model is
// 1F1B's. Requires v = 1; any m >= 1.
Result<std::vector<std::vector<Instr>>> ZeroBubbleH1Order(const ScheduleShape& shape);

}  // namespace ember::pipeline
