#pragma once

// A training job's options, nested by the part of Ember they configure: the
// model, the embedding table, the dense optimizer, the training loop
// (pipeline/), checkpoints, and the job itself. Each part is the options
// struct of the layer that owns it; the trainer copies nothing by hand. It
// fills in only what follows from the data and from the job: see
// Trainer::Create.

#include <atomic>
#include <cstdint>
#include <functional>

#include "core/communicator.h"
#include "core/status.h"
#include "embedding/embedding_table.h"
#include "engine/metrics.h"
#include "engine/model_options.h"
#include "engine/training_checkpoint.h"
#include "ops/dense_optimizer.h"
#include "pipeline/pipeline_parallel.h"
#include "pipeline/training_loop.h"

namespace ember::engine {

// The ranks of a job that several processes (or threads) train together
// (issue 31): a communicator per thread that talks to the other ranks, each
// a group of the same ranks in the same order, not owned. All null: this
// rank trains alone. With ranks, the table is sharded by key over them
// (embedding/sharded_table.h), the dense model is data-parallel
// (pipeline/training_step.h), every rank trains its own data (the caller
// gives each rank its shard, with the same number of batches) and evaluates
// the whole held-out set, and pulls wait for earlier pushes batch by batch
// (TrainingLoopOptions::early_pulls is turned off: a rank cannot see which
// keys the other ranks' batches update).
struct RankGroup {
  Communicator* pull = nullptr;   // The pull stage's and evaluation's key and row exchanges.
  Communicator* push = nullptr;   // The push stage's gradient exchange.
  Communicator* dense = nullptr;  // The dense stage's gradient all-reduce.
  Communicator* control = nullptr;  // The trainer's thread: checkpoints.
  // The reader's: the examples of data in memory swapped between epochs when
  // each rank holds only its share (io/rank_shard_source.h), and the loader's
  // before. Optional: without it every rank holds every example.
  Communicator* data = nullptr;
  // The dense gradients' buckets, all-reduced on a thread of their own while
  // the backward runs (pipeline/gradient_buckets.h). Optional: without it
  // the dense stage all-reduces them after the backward.
  Communicator* gradients = nullptr;

  bool active() const { return pull != nullptr; }
  int rank() const { return active() ? pull->rank() : 0; }
  int size() const { return active() ? pull->size() : 1; }
};

// InvalidArgument unless the group's communicators are all null, or all set
// and of the same rank and size.
Status ValidateRankGroup(const RankGroup& group);

struct TrainOptions {
  // The model: name (one of ModelNames(), engine/model_zoo.h), widths,
  // where its dense half runs and in what precision. The trainer sets its
  // num_dense, num_slots and num_tasks from the data, embedding_dim from
  // table.dim and seed from seed.
  ModelOptions model;
  // The embedding table: dim, sparse optimizer, admission, TTL, memory budget
  // and disk tier. The trainer sets its seed from seed, and track_changes
  // when checkpointing.
  embedding::EmbeddingTableOptions table;
  ops::DenseOptimizerOptions dense_optimizer;
  // The training loop: pipelined or sequential, the stages' threads,
  // staleness, prefetch, read-ahead, the watchdog and the tracer. Prefetch
  // applies only with a disk tier (table.memory_budget_bytes > 0); the
  // trainer sets evict_every_steps from table.ttl_steps (every
  // max(1, ttl_steps / 2) steps, so that a row lives at most 1.5x the TTL).
  pipeline::TrainingLoopOptions pipeline;
  // Checkpoints go to checkpoint.dir when set: every checkpoint.every_steps
  // steps and when Fit ends, finished or stopped. Restore() resumes from the
  // newest one. The trainer sets checkpoint.sparse_optimizer.
  TrainingCheckpointOptions checkpoint;

  int batch_size = 256;
  int epochs = 1;
  // Stop after this many training steps in total; 0 means no limit.
  int64_t max_steps = 0;
  // Steps at the start of a Fit left out of TrainReport's
  // steady_samples_per_sec: they carry one-time costs (kernel generation,
  // first touches of buffers). They train like every other step.
  int64_t timing_warmup_steps = 3;
  // CPU threads for the whole job; <= 0 means every hardware thread.
  int threads = 0;
  // Seeds everything random: the model's and the table's initial values and
  // the shuffle.
  uint64_t seed = 1;
  // Shuffle the training examples every epoch (seeded).
  bool shuffle = true;
  // Embedding rows to make room for before the first step
  // (EmbeddingTable::Reserve), so that creating rows in the steps neither
  // faults in memory nor grows the key index. -1 (auto): when training on a
  // Dataset into a table that gives every key a row in memory (no budget,
  // no admission), room for the training data's distinct keys, estimated
  // (DistinctKeyCounter) plus 2%; where the machine lacks the memory, a
  // warning and no room. 0: none. > 0: that many rows in all, from any
  // source; an error where the memory lacks.
  int64_t embedding_reserve_rows = -1;
  // Examples per evaluation batch.
  int eval_batch_size = 4096;
  // Print progress (terminal line or periodic log).
  bool show_progress = true;
  // Evaluations during training, each a point of TrainReport::history: every
  // eval_every_steps steps of the job (0: none) and/or at the end of every
  // epoch (eval_every_epoch; for a BatchSource, every
  // EstimatedBatches() / epochs steps), and once when training ends. Only
  // when `evaluate` is set. Each runs at a barrier between steps
  // (pipeline/training_loop.h), where the table and the model are quiescent;
  // an evaluation that only reads them (Trainer::Evaluate) leaves the trained
  // model what it would be without it, bit for bit.
  int64_t eval_every_steps = 0;
  bool eval_every_epoch = false;
  // Evaluates the model being trained on the owner's held-out data (e.g.
  // Trainer::Evaluate on a test set), on the trainer's thread; its error
  // stops training.
  std::function<Result<Metrics>()> evaluate;
  // When set and true, training stops after the batches already read
  // (e.g. set by a signal handler); Fit then returns what was trained (and
  // writes a checkpoint of it when checkpoint.dir is set).
  const std::atomic<bool>* stop_requested = nullptr;
  // The other ranks of the job, if any (see RankGroup).
  RankGroup ranks;
  // With ranks (and ranks.gradients), a host dense model's gradients are
  // all-reduced in buckets of about this many bytes while its backward runs
  // (pipeline/gradient_buckets.h): the same bits as one all-reduce after it.
  // 0: one all-reduce after the backward.
  int64_t dense_bucket_bytes = int64_t{1} << 20;
  // With ranks: divide the experts of the model's MoE layers among them
  // (ops/expert_parallel.h); Create fails when they do not divide evenly.
  // False: every rank computes every expert for its own examples. Either
  // way the ranks train what one rank trains with their batches as row
  // ranges (the MoE routing's groups).
  bool expert_parallel = true;
  // The dense model split into chunks over ranks, or its batch into
  // micro-batches (pipeline/pipeline_parallel.h): rank 0 trains as a job of
  // one rank whose dense stage runs the pipeline; the other ranks serve
  // their chunks (Trainer::ServePipeline), on model.device. With `ranks`
  // (data parallelism) only its micro-batches (ranks == 1: gradient
  // accumulation, every rank's summed over the ranks before each step); not
  // with a MoE model.
  pipeline::PipelineParallelOptions pipeline_parallel;
};

// Validates option ranges (batch_size >= 1, epochs >= 1, ...), naming the
// flag of a bad value.
Status ValidateTrainOptions(const TrainOptions& options);

// The job's threads: options.threads, or every hardware thread when <= 0.
int JobThreads(const TrainOptions& options);

}  // namespace ember::engine
