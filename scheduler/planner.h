#pragma once

// Planner: chooses the knobs of a training job — threads and their split
// between stages, batch size (within limits), pipelining and its depth (the
// batches in flight, which is also how far the disk prefetch runs ahead),
// the staleness bound, and the memory tier's budget (from the placement) —
// by coordinate descent: one knob at a time takes the value that maximises
// the samples/s predicted by the cost model and a discrete-event simulation
// of the pipeline, until no knob changes.

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "scheduler/cost_model.h"
#include "scheduler/placer.h"
#include "scheduler/plan.h"
#include "scheduler/program.h"
#include "scheduler/stage.h"

namespace ember::scheduler {

// One point of the search.
struct PlanKnobs {
  int threads = 1;
  int64_t batch = 256;
  bool pipeline = true;
  int depth = 4;
  int staleness = 0;
  bool prefetch = true;
  // Pipelined: pull at once the rows no batch in flight updates, and wait
  // for pushes only for the others (TrainOptions::early_pulls).
  bool early_pulls = true;
  // Threads per stage when pipelined (each at most `threads`); all zero: the
  // trainer's default (TrainerStageThreads).
  PerStage<int> split;
  // Ranks of the job (mpirun -np N): the other knobs are each rank's, every
  // rank trains `batch` examples a step, and the job's samples/s is N times
  // a rank's. The ranks fill the hosts of the resource graph in order, as
  // many on each as the hosts allow evenly (RanksPerHost); the dense stage
  // runs on CPU (the MPI all-reduce), the table is sharded over the ranks.
  // 1: a job of one process, as without mpirun.
  int ranks = 1;
  // With ranks: the dense gradients' buckets all-reduced during the backward
  // (--dense_bucket_kib; 0: one all-reduce after it).
  int64_t dense_bucket_bytes = int64_t{1} << 20;
};

// Ranks on each host when `ranks` fill `hosts` evenly: ceil(ranks / hosts).
int RanksPerHost(int ranks, int hosts);

struct PlannerOptions {
  // Thread counts to consider; empty: 1 .. the host's hardware threads.
  std::vector<int> threads;
  // Batch sizes to consider (the limits the user allows).
  std::vector<int64_t> batch_sizes = {256};
  // Pipeline depths to consider.
  std::vector<int> depths = {1, 2, 4, 8};
  // The largest staleness bound the user accepts; the planner picks in
  // [0, max_staleness].
  int max_staleness = 0;
  // Consider running without the pipeline, and with it.
  bool allow_sequential = true;
  bool allow_pipeline = true;
  // Consider prefetch on and off (with a disk tier).
  bool choose_prefetch = true;
  // Consider early pulls on and off (pipelined).
  bool choose_early_pulls = true;
  // Search the split of threads between the pipeline's stages too
  // (TrainOptions::stage_threads), from the trainer's default. When false, a
  // split in the start knobs is kept as it is (the thread budget stays at
  // least its largest stage), and without one the default is used.
  bool free_split = false;
  PlacerOptions placer;
  // Rounds of coordinate descent at most.
  int max_rounds = 4;
};

// The threads of read, unique, pull, dense and push that the trainer uses
// by default for a budget of `threads` (engine/trainer.cc takes them from
// here, so that the planner costs what runs): pipelined, 1 for reading
// and unique, a quarter (at least 1) for pull and push, all for dense;
// sequential, all for every stage.
PerStage<int> TrainerStageThreads(int threads, bool pipeline);

// The plan for fixed `knobs`: placement, predictions and needs.
// Errors of Place.
Result<Plan> PredictPlan(const Program& program, const CostModel& cost, const PlanKnobs& knobs,
                         const PlacerOptions& placer);

// Coordinate descent from `start`. `evaluations`, when set, receives the
// number of configurations costed.
Result<Plan> MakePlan(const Program& program, const CostModel& cost, const PlannerOptions& options,
                      PlanKnobs start, int* evaluations = nullptr);

}  // namespace ember::scheduler
