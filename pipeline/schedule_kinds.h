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

// Interleaved 1F1B (Megatron-LM; Narayanan et al., 2021, section 2.2): the
// v chunks of a rank take turns in groups of p micro-batches: the rank's
// k-th forward runs local chunk (k mod p·v) / p on micro-batch
// (k / (p·v))·p + k mod p; backwards visit the local chunks in the reverse
// order. Rank r runs (p - r - 1)·2 + (v - 1)·p warm-up forwards (all v·m of
// them when m = p, and never more than v·m), then alternates one forward
// and one backward, then the remaining backwards.
// Requires m to be a multiple of p (the groups of p), so m >= p.
Result<std::vector<std::vector<Instr>>> InterleavedOrder(const ScheduleShape& shape);

}  // namespace ember::pipeline
