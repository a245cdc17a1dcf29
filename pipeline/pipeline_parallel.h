#pragma once

// The dense stage of the training step split over p ranks (issue 32): the
// dense graph cut into p·v chunks (scheduler/pipeline_partition.h), chunk c
// on rank c % p, each step's batch cut into m micro-batches that run through
// the chunks in a schedule's order (pipeline/schedule.h), their parameter
// gradients summed over the micro-batches before one optimizer step.
//
// Rank 0 drives: it holds the embedding table and the data, as in a job of
// one rank, and its training step's dense stage calls PipelineDenseStage::
// Train with the batch's pooled embeddings, dense features and labels; it
// gets back the logits, the loss and the pooled embeddings' gradient for the
// push. Ranks 1..p-1 run ServePipelineStages: they wait for rank 0's
// commands and run their chunks, until rank 0 finishes or fails.
//
// The trained model equals, bit for bit, the unsplit model trained with
// gradient accumulation over the same micro-batches: the built-in schedules
// sum every chunk's gradients in micro-batch order, and a value read by
// several chunks (DCN's x0) sums its gradient in the unsplit graph's order
// (pipeline/graph_chunk_work.h).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/dense_model.h"
#include "ops/dense_optimizer.h"
#include "ops/graph.h"
#include "pipeline/graph_chunk_work.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_executor.h"
#include "scheduler/pipeline_partition.h"

namespace ember::pipeline {

struct PipelineParallelOptions {
  int ranks = 1;           // p: ranks the dense graph is split over.
  int virtual_stages = 1;  // v: chunks per rank.
  int micro_batches = 1;   // m: micro-batches per step.
  int group = 0;           // G: interleaved schedules' micro-batch group (0: p).
  // The schedule kind (BuiltinSchedules()); empty: "interleaved" when v > 1,
  // else "1f1b". A batch of fewer than m examples runs as "gpipe" with one
  // micro-batch per example.
  std::string schedule;
  // With p > 1, this rank's communicators of the p ranks (not owned):
  // `stages` carries the schedule's activations and gradients, the labels,
  // the logits and the parameters, with the job's rank timeout (NCCL for
  // chunks on GPUs: the schedule must then pass CheckRendezvous); `commands`
  // carries rank 0's commands, which the other ranks wait for between steps
  // while rank 0 reads, evaluates or writes checkpoints: give it a timeout
  // longer than any of those.
  Communicator* stages = nullptr;
  Communicator* commands = nullptr;
  // Data ranks, each running this dense stage on batches of its own (not
  // owned; null: none): gradient accumulation under data parallelism. The
  // step's loss is the mean over every rank's outputs and the summed
  // gradients are all-reduced over them (rank order) before the optimizer
  // step, so that N ranks of m micro-batches train what one rank of the N
  // batches' examples trains in micro-batches (up to the order of the sums).
  // Only with p == 1 so far: data parallelism across pipelines is not run.
  Communicator* data = nullptr;

  // Whether the dense stage runs in chunks at all.
  bool active() const { return ranks > 1 || virtual_stages > 1 || micro_batches > 1; }
};

// The schedule kind `options` runs: its schedule, or the default for v.
std::string ScheduleKindOf(const PipelineParallelOptions& options);

// InvalidArgument naming the field: p, v, m < 1, an unknown schedule kind, a
// shape the kind refuses, p > 1 without both communicators of p ranks, or
// data ranks with p > 1.
Status ValidatePipelineParallelOptions(const PipelineParallelOptions& options);

// The p·v chunks of `graph` for micro-batches of `micro_batch_size`
// examples, balanced by the ops' FLOPs and bytes at nominal CPU rates.
Result<scheduler::PipelinePartition> PartitionForPipeline(const ops::Graph& graph,
                                                          const PipelineParallelOptions& options,
                                                          int64_t micro_batch_size);

// Rank 0's side. Thread safety: none; the dense stage's thread calls Train,
// and the trainer's thread the rest between steps.
class PipelineDenseStage {
 public:
  // Cuts `graph` (the model's: its inputs "dense" (optional) and "pooled",
  // one output of logits) for `partition` and sends the partition to the
  // other ranks. The parameters start from `seed` as the whole graph's do.
  // The errors of GraphChunkWork::Create and of the communicators.
  // The chunks run on `device` (the CPU or a CUDA device).
  static Result<std::unique_ptr<PipelineDenseStage>> Create(
      const ops::Graph& graph, const scheduler::PipelinePartition& partition,
      const PipelineParallelOptions& options, uint64_t seed,
      const ops::DenseOptimizerOptions& optimizer, const Device& device = Device::Cpu());
  // Without Finish, aborts the communicators so that the other ranks stop.
  ~PipelineDenseStage();
  PipelineDenseStage(const PipelineDenseStage&) = delete;
  PipelineDenseStage& operator=(const PipelineDenseStage&) = delete;

  // One step on a batch of B examples: dense [B, num_dense] (ignored when
  // the graph has no "dense" input), pooled [B, width], labels [B, tasks];
  // `optimizer_steps` taken before it. Fills logits [B, tasks], dpooled
  // [B, width] and the loss (the mean over the batch's outputs), after every
  // rank's optimizer step. On an error, aborts the communicators (every rank
  // stops with it).
  Status Train(const Tensor& dense, const Tensor& pooled, const Tensor& labels,
               int64_t optimizer_steps, Tensor* logits, Tensor* dpooled, double* loss);
  // Every rank's parameters and optimizer state into `model` (whose graph is
  // the one cut), when a step ran since the last copy.
  Status CopyParametersTo(ops::DenseModel& model);
  // `model`'s parameters and optimizer state onto every rank (a restored
  // checkpoint's).
  Status CopyParametersFrom(ops::DenseModel& model);
  // Tells the other ranks that training ended; they return OK. Every rank
  // then logs its measured bubble over the steps after the first
  // (RankScheduleTimes): "pipeline rank R of P, schedule K: measured
  // bubble ...", what tools/bench/run_pipeline_parallel.sh reads.
  Status Finish();

 private:
  PipelineDenseStage() = default;
  Status SendCommand(int64_t command, int64_t batch, int64_t optimizer_steps);

  PipelineParallelOptions options_;
  const ops::Graph* graph_ = nullptr;  // Not owned.
  std::unique_ptr<GraphChunkWork> work_;
  std::vector<int> parameter_rank_;  // Per parameter of the graph: the rank that holds it.
  std::map<int, Schedule> schedules_;  // By micro-batch count.
  bool dirty_ = false;     // A step ran since the last CopyParametersTo.
  bool finished_ = false;
  int64_t steps_run_ = 0;
  RankScheduleTimes times_;  // After the first step; logged by Finish.
};

// Ranks 1..p-1: receives the partition from rank 0, then runs the rank's
// chunks of `graph` (the same graph as rank 0's) for every step until rank 0
// finishes (OK) or fails (its error, naming it).
Status ServePipelineStages(const ops::Graph& graph, const PipelineParallelOptions& options,
                           uint64_t seed, const ops::DenseOptimizerOptions& optimizer,
                           const Device& device = Device::Cpu());

}  // namespace ember::pipeline
