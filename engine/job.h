#pragma once

// A training job as a library value: its options, its ranks and the steps
// of a run. `ember train` (tools/train_command.cc) turns its flags into
// JobOptions once and runs these steps in order; a library caller runs the
// same ones with options of its own:
//
//   EMBER_ASSIGN_OR_RETURN(auto job, Job::Join(options));  // the ranks mpirun started
//   EMBER_RETURN_IF_ERROR(job->CheckOutputs());           // before hours of training
//   if (job->serves_pipeline()) return job->ServePipeline();
//   EMBER_RETURN_IF_ERROR(job->Create(shape));           // the model and the table
//   EMBER_ASSIGN_OR_RETURN(int64_t step, job->Resume());  // -1: a fresh job
//   EMBER_ASSIGN_OR_RETURN(TrainReport report, job->Train(*source));
//   EMBER_ASSIGN_OR_RETURN(Metrics test, job->trainer().Evaluate(*test_source));
//   EMBER_RETURN_IF_ERROR(job->Gather());                 // every rank's rows
//   EMBER_RETURN_IF_ERROR(job->Export(input, false, step));  // the serving bundle
//
// Every rank runs every step (the steps that gather or exchange are
// collectives); what only rank 0 writes, rank 0 writes (reports()).
// Thread safety: none; one thread runs a job's steps.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/status.h"
#include "core/trace.h"
#include "embedding/embedding_table.h"
#include "engine/job_ranks.h"
#include "engine/job_record.h"
#include "engine/metrics.h"
#include "engine/train_options.h"
#include "engine/trainer.h"
#include "io/batch_source.h"
#include "io/format_spec.h"
#include "scheduler/layout.h"

namespace ember::engine {

// What a job writes besides its checkpoints; empty (false): not written.
struct JobOutputs {
  // The run's metrics as JSON (rank 0).
  std::string metrics_out;
  // The run's Chrome trace; with ranks, each rank writes its own,
  // `<trace_file>.rank-<r>`.
  std::string trace_file;
  // The run's curves as SVG (rank 0); needs the evaluation below.
  std::string plot_out;
  // The serving bundle of the trained model (rank 0; with ranks, of every
  // rank's rows).
  std::string export_dir;
  // Compute the trained model's hash (rank 0; with ranks, of every rank's rows).
  bool model_hash = false;
};

struct JobOptions {
  // What one process trains, as if alone; Join derives each rank's from it
  // (its directories, its device, its communicators).
  TrainOptions train;
  JobOutputs outputs;
  // Continue the newest checkpoint in train.checkpoint.dir; without it a
  // directory that holds one is refused.
  bool resume = false;
  // Ranks of a pipeline over the dense model (pipeline/pipeline_parallel.h):
  // 1, or the job's ranks; otherwise the ranks train data in parallel. A
  // shorthand for mesh pipeline:N.
  int pipeline_parallel = 1;
  // The layout as the user wrote it (scheduler/layout.h, --mesh and
  // --table_sharding); no mesh: the one the shorthands above give for the
  // world (pipeline:N with pipeline_parallel, expert:N for a MoE model
  // whose experts divide among the ranks under expert_parallel, else
  // data:N).
  std::optional<scheduler::Mesh> mesh;
  scheduler::TableShardings tables;
  // Every blocking exchange with another rank waits at most this long.
  double rank_timeout_seconds = 600;
  // Whether train.expert_parallel was chosen (true) or is the default, which
  // a MoE model whose experts do not divide among the ranks turns off.
  bool expert_parallel_chosen = false;
  // The training data is a part the caller chose (--num_shards): refused
  // under ranks, which read their own parts.
  bool data_sharded = false;
  // When set and true, training stops after the batches in flight
  // (TrainOptions::stop_requested).
  const std::atomic<bool>* stop_requested = nullptr;
};

// Opens the held-out data afresh for one evaluation.
using OpenEvaluationData = std::function<Result<std::unique_ptr<io::BatchSource>>()>;

class Job {
 public:
  // Joins the ranks mpirun started this process with (a job of one rank
  // otherwise) and lays the job out over them (layout()): a pipeline's
  // stages, or data parallelism with each rank's own directories
  // (--embedding_dir/rank-<r>), device (its host's GPU) and trace file.
  // InvalidArgument for a layout that does not fit the world
  // (scheduler::CheckLayout) or that the runtime does not run yet — more
  // than one axis above 1 (data x pipeline, data x expert), a table sharding
  // other than row-wise over every rank — and for --num_shards under ranks,
  // with the flag to change.
  static Result<std::unique_ptr<Job>> Join(JobOptions options);
  ~Job();

  // InvalidArgument on every rank unless every rank has the same `settings`
  // (JobRanks::CheckSameSettings). A collective.
  Status CheckSameSettings(const std::vector<JobRanks::Setting>& settings);
  // Fails, naming the output, unless every output of this rank can be
  // written: before training, not after it.
  Status CheckOutputs() const;

  int rank() const { return ranks_->rank(); }
  int ranks() const { return ranks_->size(); }
  // Rank 0, which reports and writes the job's outputs.
  bool reports() const { return rank() == 0; }
  // Ranks that train data in parallel (not the stages of a pipeline).
  bool data_parallel() const { return options_.train.ranks.active(); }
  // Ranks 1.. of a pipeline: they read no data and serve rank 0's steps.
  bool serves_pipeline() const;
  // How the job spreads over its ranks: every rank's is the same (the
  // tools compare its hash at start), and checkpoints, metrics and traces
  // record it.
  const scheduler::Layout& layout() const { return layout_; }
  // The options as laid out; a planner may still change the training
  // knobs (threads, batch, pipeline) before Create.
  const JobOptions& options() const { return options_; }
  TrainOptions* mutable_train_options() { return &options_.train; }

  // Evaluations during training (TrainOptions::eval_every_steps,
  // eval_every_epoch, and one when training ends) on the data `open` gives,
  // at barriers between steps. Before Create.
  void EvaluateDuringTraining(OpenEvaluationData open) { open_evaluation_ = std::move(open); }

  // Ranks 1.. of a pipeline: waits for rank 0 to read the data, makes its
  // chunks of the model and runs them for rank 0's steps until rank 0
  // finishes (Trainer::ServePipeline).
  Status ServePipeline();
  // Makes the trainer for examples of `shape` (and tells a pipeline's
  // stages the shape). A disk tier without --embedding_dir goes to a
  // temporary directory, removed with the job.
  Status Create(const DataShape& shape);
  // The step of the newest checkpoint (-1: none) in the job's directory.
  Result<int64_t> NewestCheckpointStep() const;
  // Restores the newest checkpoint and returns its step, or -1 when there
  // is none; InvalidArgument when there is one and options().resume is off.
  Result<int64_t> Resume();
  // Trains on `train`, the whole job's report on every rank (examples and
  // speed summed over data-parallel ranks), and ends a pipeline.
  Result<TrainReport> Train(io::BatchSource& train);

  // Every rank's rows in one table on rank 0, for ModelHash and Export
  // (whose figures are of the whole job). A collective with data-parallel
  // ranks, on all of them; does nothing otherwise. Holds the whole table in
  // rank 0's memory.
  Status Gather();
  // The trained model's hash (engine/model_hash.h) in hex on rank 0; empty
  // on the others. REQUIRES: Gather, with data-parallel ranks.
  Result<std::string> ModelHash();
  // Writes the serving bundle to options().outputs.export_dir, of the job's
  // step, for input read as `input` (`columnar`: Ember's columnar files).
  // With data-parallel ranks (exports_shards) a collective, every rank
  // writing its own rows (engine/bundle.h WriteShardedBundle; no Gather
  // needed); otherwise on rank 0 (the others do nothing). REQUIRES: without
  // shards, as ModelHash.
  Status Export(const io::FormatSpec& input, bool columnar, int64_t step);
  // Whether Export writes a bundle of every rank's shards.
  bool exports_shards() const { return data_parallel() && ranks() > 1; }
  // Writes this rank's trace to its trace file (options().outputs).
  Status WriteTrace() const;

  // Leaves the job after a failure: the other ranks' exchanges with this
  // one fail at once, naming it.
  void Abort(const Status& reason) { ranks_->Abort(reason); }
  // Ends the job's ranks (MPI) after the job is destroyed; see
  // FinishJobRanks.
  static Status Finish() { return FinishJobRanks(); }

  Trainer& trainer() { return *trainer_; }
  // Rank-prefixed "(rank r of n)" for messages; empty for one rank.
  std::string WhoForMessages() const;

 private:
  explicit Job(JobOptions options) : options_(std::move(options)) {}
  // Lays the job out over its ranks (see Join).
  Status LayOut();
  // layout_ from the options and the world, checked.
  Status ChooseLayout();
  // A dense model on a GPU under mpirun: its host's GPU, and the dense
  // stage's communicator over NCCL.
  Status UseLocalGpu();
  // The table of every rank's rows: gathered_, or this rank's own.
  Result<embedding::EmbeddingTable*> WholeTable();

  JobOptions options_;
  scheduler::Layout layout_;
  OpenEvaluationData open_evaluation_;
  std::unique_ptr<JobRanks> ranks_;
  TempDir embedding_temp_dir_;
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<Trainer> trainer_;
  // Gather's table (null on ranks other than 0), and whether it ran.
  std::unique_ptr<embedding::EmbeddingTable> gathered_;
  bool gathered_all_ = false;
};

}  // namespace ember::engine
