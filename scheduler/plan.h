#pragma once

// Plan: where each op of a Program runs and how the training step is
// configured (threads per stage, batch, pipeline depth, staleness, memory
// tiers), with what the cost model predicts for it: every stage's time, the
// bottleneck, samples/s, and the memory, disk and bandwidth each device
// needs. `ember plan` prints and saves it; `ember train --plan=FILE` runs it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/status.h"
#include "scheduler/program.h"
#include "scheduler/resource_graph.h"
#include "scheduler/stage.h"

namespace ember::scheduler {

struct StagePrediction {
  std::string name;
  std::string device;    // Resource-graph id ("host/cpu0"), or a link.
  double seconds = 0.0;  // Per batch, with the contention of the plan.
  double cores = 0.0;    // Cores it keeps busy while it works.
  double busy_fraction = 0.0;
};

struct DeviceNeed {
  std::string device;
  std::string what;  // "embedding memory tier", "dense parameters", ...
  int64_t bytes = 0;
  int64_t capacity_bytes = 0;
};

struct LinkNeed {
  std::string link;  // "host/cpu0 <-> host/gpu0 (pcie)".
  double gbps_needed = 0.0;
  double gbps_available = 0.0;
};

// Pipeline parallelism of the dense graph over ranks, as `ember plan
// --pipeline_ranks` chooses it (pipeline/pipeline_choice.h): the schedule
// and what the schedule simulator predicts for it.
struct PipelineParallelPrediction {
  int ranks = 0;  // p; 0: not planned.
  int virtual_stages = 1;
  int micro_batches = 1;
  std::string schedule;  // "gpipe", "1f1b" or "interleaved".
  double step_seconds = 0.0;
  double samples_per_sec = 0.0;
  double bubble_ratio = 0.0;
  // The most activation bytes each rank holds at once.
  std::vector<int64_t> rank_activation_bytes;
  // The whole batch on one rank (p = 1, m = 1), for comparison.
  double unpipelined_step_seconds = 0.0;
};

struct Plan {
  // The device of the dense stages (forward, loss, backward, optimizer).
  Device dense_device = Device::Cpu();
  // CPU threads for the whole job (the trainer's budget).
  int threads = 1;
  // Why the plan looks as it does, for the log.
  std::string rationale;

  std::string model;
  // Op name -> device id, in the Program's op order.
  std::vector<std::pair<std::string, std::string>> placement;
  // Knobs, as TrainOptions takes them.
  int64_t batch_size = 256;
  bool pipeline = true;
  int pipeline_depth = 4;
  int max_staleness = 0;
  int64_t embedding_memory_budget_bytes = 0;  // 0: the whole table in memory.
  bool prefetch = true;
  // With a memory tier, predicted per batch: the share of a batch's
  // distinct ids memory holds, and the rows read from and written to disk.
  double memory_tier_hit_rate = 1.0;
  double disk_reads_per_step = 0.0;
  double disk_writes_per_step = 0.0;
  // Pipelined: pulls read the rows no batch in flight updates at once.
  bool early_pulls = true;
  // Threads of each stage.
  PerStage<int> stage_threads = PerStage<int>::Filled(1);
  // Data-parallel dense replicas (GPUs) in ring order, and the hosts the
  // table is sharded over; one replica and one host on a single machine.
  std::vector<std::string> replicas;
  int sparse_hosts = 1;
  // A job of ranks (mpirun -np N; PlanKnobs::ranks): the knobs above are
  // each rank's, and `ranks_per_host` ranks share a host.
  int ranks = 1;
  int ranks_per_host = 1;

  // Predictions.
  std::vector<StagePrediction> stages;
  std::string bottleneck;
  double predicted_step_seconds = 0.0;
  double predicted_samples_per_sec = 0.0;
  // A job of ranks: the bytes a rank sends per step (keys, rows and
  // gradients of the sharded table; the dense all-reduce), the seconds its
  // stages spend exchanging them, and their share of the step's work (the
  // exchange seconds over the sum of every stage's seconds).
  double exchange_bytes_per_step = 0.0;
  // Of them, the expert layers' rows (expert parallelism; 0 without it),
  // bytes and seconds.
  double expert_exchange_bytes_per_step = 0.0;
  double expert_exchange_seconds_per_step = 0.0;
  double exchange_seconds_per_step = 0.0;
  double exchange_share = 0.0;
  std::vector<DeviceNeed> needs;
  std::vector<LinkNeed> links;
  // Written as "pipeline_parallel" when planned (ranks > 0).
  PipelineParallelPrediction pipeline_parallel;

  // Human-readable: placement, stages, bottleneck, needs.
  std::string ToText() const;
  std::string ToJson() const;
  // The Program with each op coloured and clustered by its device.
  std::string ToDot(const Program& program) const;
};

// Reads a plan written by Plan::ToJson (of this version or an older one:
// the fields added since are optional); InvalidArgument naming `path` and
// the field (a field it does not know, a required one missing, a value out
// of range), or line:column for malformed JSON, otherwise.
Result<Plan> ParsePlanJson(const std::string& text, const std::string& path);

struct PlanRequest {
  // CPU threads the job may use; <= 0 means all of the host's.
  int threads = 0;
  // Where the user wants the dense stages (`--dense_device`).
  Device dense_device = Device::Cpu();
};

// The plan of a single-host job without a Program: the thread budget and
// the dense device only (what `ember train --plan=off` uses).
// InvalidArgument when more threads are requested than the host has;
// FailedPrecondition for a CUDA device the host does not have.
Result<Plan> PlanLocalTraining(const ResourceGraph& resources, const PlanRequest& request);

}  // namespace ember::scheduler
