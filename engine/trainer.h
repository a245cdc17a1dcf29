#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/status.h"
#include "core/threads.h"
#include "core/trace.h"
#include "embedding/embedding_table.h"
#include "engine/metrics.h"
#include "engine/model.h"
#include "engine/training_checkpoint.h"
#include "io/batch_source.h"
#include "io/dataset.h"
#include "ops/dense_optimizer.h"
#include "ops/precision.h"
#include "pipeline/stage.h"
#include "pipeline/staleness.h"

namespace ember::engine {

struct TrainOptions {
  // Model name: one of ModelNames() (engine/model_zoo.h).
  std::string model = "dlrm";
  int embedding_dim = 16;
  // See ModelOptions.
  std::vector<int> bottom_mlp = {512, 256, 64};
  std::vector<int> top_mlp = {512, 256};
  // dcn_v2: cross layers and their rank (0: full rank).
  int cross_layers = 3;
  int cross_rank = 0;
  // mmoe: experts and their MLP widths.
  int num_experts = 4;
  std::vector<int> expert_mlp = {256, 64};
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
  uint64_t seed = 1;
  // Shuffle the training examples every epoch (seeded).
  bool shuffle = true;
  embedding::SparseOptimizerOptions sparse_optimizer;
  // Which keys get an embedding row (default: every key on first sight).
  embedding::AdmissionOptions admission;
  // Rows not pulled for this many steps are evicted (checked every
  // max(1, ttl_steps / 2) steps, so a row lives at most 1.5x this); 0: never.
  int64_t embedding_ttl_steps = 0;
  // Bytes the embedding memory tier may hold; rows beyond it live in a
  // RocksDB tier under embedding_dir. 0: everything in memory, no disk tier.
  int64_t embedding_memory_budget_bytes = 0;
  // Directory of the disk tier (required with a budget).
  std::string embedding_dir;
  // Embedding rows to make room for before the first step
  // (EmbeddingTable::Reserve), so that creating rows in the steps neither
  // faults in memory nor grows the key index. -1 (auto): when training on a
  // Dataset into a table that gives every key a row in memory (no budget,
  // no admission), room for the training data's distinct keys, estimated
  // (DistinctKeyCounter) plus 2%; where the machine lacks the memory, a
  // warning and no room. 0: none. > 0: that many rows in all, from any
  // source; an error where the memory lacks.
  int64_t embedding_reserve_rows = -1;
  // With a disk tier: prefetch the rows of the next batch while one trains.
  bool prefetch = true;
  // Sequential training (pipeline off): a thread at the lowest priority reads
  // the next batch and finds its unique keys while the current one trains,
  // on the cores the step leaves idle (its serial parts). The result is the
  // same either way.
  bool read_ahead = true;
  ops::DenseOptimizerOptions dense_optimizer;
  // Where the dense step runs (the model's forward, backward and optimizer;
  // its inputs and results are copied in and out within the dense stage):
  // the CPU or a CUDA device. Pooling, the loss and the sparse stages stay on
  // the CPU. On a GPU the result agrees with the CPU's within float rounding,
  // not bit for bit.
  Device dense_device = Device::Cpu();
  // The fully connected layers' GEMM arithmetic: f32, or bf16/f16 inputs with
  // f32 accumulation and f32 master weights (mixed precision). A CPU dense
  // step computes in f32, or in bf16 where the CPU multiplies bf16 in hardware
  // (AMX, AVX512-BF16); f16 there, or bf16 on another CPU, is an error.
  ops::ComputePrecision dense_precision = ops::ComputePrecision::kF32;
  // A CPU dense step's row shards (ModelOptions::cpu_row_shards): 0, one per
  // thread of the dense stage; 1, none. A fixed N >= 2 trains the same model,
  // bit for bit, on any number of threads; 0 and 1 depend on the threads.
  int dense_row_shards = 0;
  // Examples per evaluation batch.
  int eval_batch_size = 4096;
  // Record a span per stage per batch here when set (not owned).
  Tracer* tracer = nullptr;
  // Print progress (terminal line or periodic log).
  bool show_progress = true;
  // Run the stages as an asynchronous pipeline (a worker per stage, up to
  // pipeline_depth batches in flight); false runs them one batch at a time,
  // the reference the pipeline is checked against.
  bool pipeline = true;
  int pipeline_depth = 4;
  // Pipelined runs: the threads of the unique, pull, dense and push stages,
  // in that order, each in [1, the job's threads] (stages sharing cores is
  // allowed). Empty: 1 for unique, a quarter of the threads (at least 1) for
  // pull and push, every thread for dense. Sequential runs give every stage
  // every thread. With max_staleness 0 the result is that of sequential
  // training with the dense stage's thread count (oneDNN may split a
  // reduction differently for another count).
  std::vector<int> stage_threads;
  // The most pushes of earlier batches a pulled row may miss; 0 gives the
  // sequential result bit for bit.
  int max_staleness = 0;
  // Let a pull wait only for in-flight batches that share rows with it
  // (otherwise for the last max_staleness + 1 pushes, whatever their rows).
  bool early_pulls = true;
  // Warn when a stage stays on one batch longer than this; 0: no watchdog.
  double watchdog_seconds = 300.0;
  // When set and true, training stops after the batches already read
  // (e.g. set by a SIGINT handler); Fit then returns what was trained (and
  // writes a checkpoint of it when checkpoint_dir is set).
  const std::atomic<bool>* stop_requested = nullptr;
  // Checkpoints (engine/training_checkpoint.h) go here when set: every
  // checkpoint_every_steps steps (0: none on the way) and when Fit ends,
  // finished or stopped. Restore() resumes from the newest one.
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;
  // An embedding snapshot with every row every this many checkpoints (the
  // first one always); the others hold the rows changed since the previous.
  int checkpoint_full_every = 10;
};

// Validates option ranges (batch_size >= 1, epochs >= 1, ...).
Status ValidateTrainOptions(const TrainOptions& options);

struct TrainReport {
  int64_t steps = 0;
  int64_t examples = 0;
  // Training steps only: reading, pulling, dense work and pushing.
  double train_seconds = 0.0;
  double samples_per_sec = 0.0;
  // Examples per second of the steps after the first
  // TrainOptions::timing_warmup_steps, up to where train_seconds ends; 0 when
  // there were no more steps than that.
  double steady_samples_per_sec = 0.0;
  // Mean training loss over the last epoch.
  double last_epoch_loss = 0.0;
  pipeline::StageTimes stage_times;
  // Threads of the unique, pull, dense and push stages (sequential runs:
  // the job's threads for each).
  std::vector<int> stage_threads;
  // Pipelined runs: the staleness of every pulled row, and the watchdog's
  // reports.
  pipeline::StalenessHistogram staleness;
  int64_t stalls = 0;
  bool pipelined = false;
  // Stopped early through stop_requested.
  bool interrupted = false;
  // Steps a restored checkpoint had trained (skipped in the data); the
  // steps above are those of this Fit.
  int64_t resumed_from_step = 0;
  // Checkpoints written, and the step of the last one (-1: none).
  int64_t checkpoints_written = 0;
  int64_t last_checkpoint_step = -1;
  // The embedding table at the end of training.
  embedding::TableStats embedding;
  // The rows room was made for before the first step
  // (TrainOptions::embedding_reserve_rows); 0: none.
  int64_t reserved_embedding_rows = 0;
};

// Trains a model through the stages read -> unique -> pull -> dense -> push,
// pipelined (options.pipeline) or one batch at a time, and evaluates it.
// Thread safety: none; one trainer per job.
class Trainer {
 public:
  // Fails on invalid options, an unknown model, or num_tasks > 1 for a
  // model that predicts one task. The loss is the mean over examples and
  // tasks of each task's sigmoid cross-entropy.
  static Result<std::unique_ptr<Trainer>> Create(const TrainOptions& options, int num_dense,
                                                 int num_slots, int num_tasks = 1);
  ~Trainer();

  // Loads the newest checkpoint in options.checkpoint_dir (the dense
  // weights and optimizer state, the embedding table, the step) and returns
  // its step; the next Fit skips the batches it had trained, so that it
  // continues the interrupted job exactly (same data, options and seed:
  // bit-identical results). FailedPrecondition without a checkpoint_dir,
  // NotFound if it holds no checkpoint, and the errors of
  // TrainingCheckpointer::Restore (another model: InvalidArgument; damage:
  // DataLoss). After an error, do not train with this trainer.
  Result<int64_t> Restore();
  // The step of the newest checkpoint in options.checkpoint_dir; -1 if it
  // holds none or no checkpoint_dir is set.
  Result<int64_t> NewestCheckpointStep() const;

  // Runs options.epochs epochs (or up to max_steps) over `train` in
  // options.batch_size batches, shuffled every epoch by (seed, epoch) when
  // options.shuffle.
  // InvalidArgument for data without examples or whose labels per example
  // are not the model's tasks.
  Result<TrainReport> Fit(const io::Dataset& train);
  // After Restore, the steps it had trained count towards max_steps.
  // Trains on every batch of `train` (up to max_steps): the source decides
  // batch size, order and epochs; options.batch_size, epochs and shuffle do
  // not apply. Errors: as above, InvalidArgument when the source's dense or
  // slot count is not the model's, and the source's read errors (with
  // context).
  Result<TrainReport> Fit(io::BatchSource& train);
  // Predicted probabilities for every example of `data`, in order, a value
  // per task (example i's task t at i * num_tasks + t). InvalidArgument for
  // data whose labels per example are not the model's tasks.
  Result<std::vector<float>> Predict(const io::Dataset& data);
  // Appends the predictions for every batch of `data` to `predictions` and,
  // when set, their labels to `labels` (both example-major, as above).
  Status Predict(io::BatchSource& data, std::vector<float>* predictions,
                 std::vector<float>* labels);
  // AUC, logloss and calibration on `data` (of task 0, and of every task in
  // Metrics::tasks for a multi-task model).
  Result<Metrics> Evaluate(const io::Dataset& data);
  Result<Metrics> Evaluate(io::BatchSource& data);

  embedding::EmbeddingTable& table() { return *table_; }
  DenseModel& model() { return *model_; }

  struct Step;

 private:
  Trainer(const TrainOptions& options, std::unique_ptr<embedding::EmbeddingTable> table,
          std::unique_ptr<DenseModel> model);
  std::vector<pipeline::Stage<Step>> TrainingStages();
  // Fit(train) after Fit(Dataset) made room for `reserved_rows` rows (0:
  // none), which the report gives.
  Result<TrainReport> FitSource(io::BatchSource& train, int64_t reserved_rows);
  Status FitSequential(io::BatchSource& train, TrainReport* report,
                       const std::function<bool(int64_t)>& below_max_steps,
                       const std::function<void(Step&)>& done);
  Status FitPipelined(io::BatchSource& train, TrainReport* report,
                      const std::function<bool(int64_t)>& below_max_steps,
                      const std::function<void(Step&)>& done);
  // Whether the push (sequential) or the pull (pipelined) of step `step`
  // evicts expired rows first.
  bool EvictsBefore(int64_t step) const;
  // Whether a checkpoint is due before the job's step `step` (> 0).
  bool CheckpointDue(int64_t step) const;
  // Writes the checkpoint of the job's first `step` steps, with the training
  // data's position after them (empty when the source cannot say).
  // REQUIRES: the table and the model are quiescent (between steps).
  Status SaveCheckpoint(int64_t step, const std::string& data_position, TrainReport* report);
  // Where `data` is now for a checkpoint: its ResumePosition, or empty when
  // there is no checkpoint directory or the source cannot say.
  Result<std::string> DataPosition(const io::BatchSource& data) const;
  // InvalidArgument unless `data` has the model's dense and slot counts.
  Status CheckShape(const io::BatchSource& data) const;
  // Makes room for `rows` embedding rows (TrainOptions::embedding_reserve_rows):
  // `why` says where the figure comes from, for the log and the error.
  Status ReserveRows(int64_t rows, const std::string& why);
  Status Prepare(Step& step);
  Status Pull(Step& step);
  // Pulls the unique keys at positions `rows` of step.unique_keys into
  // their rows of step.rows (part of an early pull).
  Status PullPart(Step& step, const std::vector<int64_t>& rows);
  Status Push(Step& step);
  // Reads rows for evaluation without changing the table.
  Status LookupRows(Step& step);
  Status Forward(Step& step);
  Status DenseTrain(Step& step);

  TrainOptions options_;
  std::unique_ptr<embedding::EmbeddingTable> table_;
  std::unique_ptr<DenseModel> model_;
  ThreadArena arena_;
  int64_t dense_step_ = 0;
  // Steps the job has trained (a restored checkpoint's included).
  int64_t job_steps_ = 0;
  // Batches the next Fit skips (what a restored checkpoint had trained), and
  // the data position the checkpoint had after them: the next Fit seeks its
  // source there, or reads and drops the batches when it cannot.
  int64_t skip_batches_ = 0;
  std::string resume_position_;
  // Set by FitSequential and FitPipelined: the data position after the last
  // batch trained, for the final checkpoint.
  std::string end_position_;
  std::unique_ptr<TrainingCheckpointer> checkpointer_;
};

}  // namespace ember::engine
