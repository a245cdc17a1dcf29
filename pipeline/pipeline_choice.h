#pragma once

// Chooses how to pipeline a model's dense graph over ranks: the ranks p, the
// chunks per rank v, the micro-batches m and the schedule kind
// (pipeline/schedule_kinds.h) that the schedule simulator
// (pipeline/schedule_simulator.h) predicts to run one step of a global batch
// fastest, with every rank's activations within a memory limit. Each
// candidate is the balanced partition of the graph into p·v chunks
// (scheduler/pipeline_partition.h), timed by the cost model at the
// micro-batch size, with the chunk boundary's activations sent over the
// link between ranks.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/graph.h"
#include "pipeline/schedule.h"
#include "scheduler/cost_model.h"
#include "scheduler/pipeline_partition.h"

namespace ember::pipeline {

// A link between two ranks: a message of b bytes arrives
// b / bytes_per_second + latency_seconds after it is sent.
struct PipelineLink {
  double bytes_per_second = 0;
  double latency_seconds = 0;
};

// Where the ranks of a pipeline run and what joins them.
struct RankPlacement {
  // The ranks fill the hosts evenly (scheduler::RanksPerHost). Each host
  // runs its ranks on a device like `device` (an index into the cost model's
  // ResourceGraph) with `threads` threads, which they share: with k ranks on
  // a host, a chunk takes k times what it takes on the whole device.
  int hosts = 1;
  int device = 0;
  int threads = 1;
  // Between ranks on one host, and between hosts (the slowest hop: a
  // pipeline whose ranks span hosts sends every message at this rate).
  PipelineLink loopback;
  PipelineLink network;
};

// The placement the cost model describes: its graph's hosts, the first
// host's first CPU and its hardware threads, the loopback of CostModelOptions
// (loopback_gbps, loopback_latency_us, as for a job's rank exchanges) and
// the link between the first two hosts' CPUs (the loopback when there is
// one host or no such link).
RankPlacement RankPlacementOf(const scheduler::CostModel& cost);

struct PipelineChoiceOptions {
  // B: examples per step, split into m micro-batches of B / m.
  int64_t batch_size = 4096;
  // N: the ranks available; candidates use p = 1..N of them.
  int max_ranks = 1;
  // Activation bytes a rank may hold at once; 0: no limit.
  int64_t rank_activation_limit_bytes = 0;
  // Candidates have v <= max_virtual_stages and m <= max_micro_batches.
  int max_virtual_stages = 4;
  int max_micro_batches = 64;
  RankPlacement placement;
};

// One pipeline configuration and what the simulator predicts for it.
struct PipelineCandidate {
  std::string kind;  // "gpipe", "1f1b", "interleaved" or "zb-h1"
  ScheduleShape shape;
  int64_t micro_batch_size = 0;  // B / m
  // Each message between chunks (the largest chunk boundary's activations
  // of one micro-batch over the link); 0 for p = 1.
  double send_seconds = 0;
  double step_seconds = 0;
  double samples_per_second = 0;  // B / step_seconds
  double bubble_ratio = 0;        // Timeline::bubble_ratio
  // Per rank: the most activation bytes it holds at once in the schedule
  // (its chunks' activations from each forward to its backward, or to its
  // weight gradients in zb-h1).
  std::vector<int64_t> rank_activation_bytes;
  // The chunks, with their seconds on the whole device (a rank sharing it
  // with k - 1 others takes k times as long).
  scheduler::PipelinePartition partition;

  int64_t peak_activation_bytes() const;
};

struct PipelineChoice {
  // The fastest candidate; ties go to fewer ranks, then fewer virtual
  // stages, fewer micro-batches, less peak activation memory, and the kind's
  // name.
  PipelineCandidate chosen;
  // p = 1, v = 1, m = 1 (the whole batch on one rank), whatever the limit.
  PipelineCandidate unpipelined;
  // Every candidate within the limit, in the order above (chosen first).
  std::vector<PipelineCandidate> candidates;
  // Candidates left out because no partition keeps their ranks within it.
  int over_limit = 0;
};

// Tries every p in 1..min(N, nodes), v in 1..max_virtual_stages with
// p·v <= nodes, m among the divisors of B up to max_micro_batches, and each
// kind the shape allows ("1f1b" and "zb-h1" need v = 1, "interleaved"
// m % p == 0;
// p = 1 is tried as "1f1b" with v = 1 only, m > 1 being gradient
// accumulation). For each: ranks fill the hosts (RankPlacement); the graph
// is partitioned for micro-batches of B / m, with as
// many micro-batches in flight per chunk as the schedule ever holds of one
// chunk (which bounds, so never understates, a rank's peak); a chunk's
// forward and backward seconds are the cost model's (DenseOpSeconds of its
// nodes' forward and backward apart; zb-h1's weight gradients are half the
// backward of the nodes whose kernels split them, the fully connected
// layers on the CPU); the optimizer step is not costed.
// InvalidArgument naming the field for a bad option or a graph without
// nodes; ResourceExhausted naming the limit when no candidate fits it.
Result<PipelineChoice> ChoosePipeline(const ops::Graph& graph, const scheduler::CostModel& cost,
                                      const PipelineChoiceOptions& options);

// "1f1b p=2 v=1 m=16: 3.210 ms per step, 1276000 samples/s, bubble 0.062,
// activations per rank 12.0 MiB 10.0 MiB".
std::string ToString(const PipelineCandidate& candidate);

// The chosen candidate, the unpipelined step beside it and up to
// `alternatives` next best candidates, a line each.
std::string ToText(const PipelineChoice& choice, int alternatives = 5);

}  // namespace ember::pipeline
