#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dir_lock.h"
#include "core/status.h"
#include "core/threads.h"
#include "embedding/embedding_table.h"
#include "engine/metrics.h"
#include "engine/model.h"
#include "engine/train_options.h"
#include "engine/training_checkpoint.h"
#include "engine/training_progress.h"
#include "io/batch_source.h"
#include "io/dataset.h"
#include "pipeline/training_step.h"

namespace ember::engine {

// A training job: creates the model and the table, restores and writes
// checkpoints, trains through the loops of pipeline/training_loop.h
// (pipelined or one batch at a time, options.pipeline), reports, and
// evaluates and predicts.
// Thread safety: none; one trainer per job.
class Trainer {
 public:
  // Fails on invalid options, an unknown model, or num_tasks > 1 for a
  // model that predicts one task. Sets the options that follow from the data
  // and the job (see TrainOptions). The loss is the mean over examples and
  // tasks of each task's sigmoid cross-entropy.
  static Result<std::unique_ptr<Trainer>> Create(const TrainOptions& options, int num_dense,
                                                 int num_slots, int num_tasks = 1);
  ~Trainer();

  // Loads the newest checkpoint in options.checkpoint.dir (the dense
  // weights and optimizer state, the embedding table, the step) and returns
  // its step; the next Fit skips the batches it had trained, so that it
  // continues the interrupted job exactly (same data, options and seed:
  // bit-identical results). FailedPrecondition without a checkpoint directory,
  // NotFound if it holds no checkpoint, and the errors of
  // TrainingCheckpointer::Restore (another model: InvalidArgument; damage:
  // DataLoss). After an error, do not train with this trainer.
  Result<int64_t> Restore();
  // The step of the newest checkpoint in options.checkpoint.dir; -1 if it
  // holds none or no checkpoint directory is set.
  Result<int64_t> NewestCheckpointStep() const;

  // Runs options.epochs epochs (or up to max_steps) over `train` in
  // options.batch_size batches, shuffled every epoch by (seed, epoch) when
  // options.shuffle. With ranks (options.ranks), every rank gives the whole
  // `train` and trains its options.batch_size rows of each batch of ranks x
  // batch_size (io/rank_slice_source.h): the job trains what one rank would
  // with that batch.
  // InvalidArgument for data without examples or whose labels per example
  // are not the model's tasks. The same as Fit(*NewDatasetTrainingSource(
  // train, options())) (engine/training_data.h).
  Result<TrainReport> Fit(const io::Dataset& train);
  // After Restore, the steps it had trained count towards max_steps.
  // Trains on every batch of `train` (up to max_steps): the source decides
  // batch size, order and epochs; options.batch_size, epochs and shuffle do
  // not apply. A source over data in memory (io::BatchSource::InMemoryData)
  // makes room for its distinct keys first (TrainOptions::
  // embedding_reserve_rows). Errors: as above, InvalidArgument when the source's dense or
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

  // A rank other than 0 of a pipeline (options.pipeline_parallel): runs its
  // chunks of the dense model for rank 0's steps until rank 0 finishes
  // (OK) or fails (its error). FailedPrecondition on rank 0 or without a
  // pipeline.
  Status ServePipeline();
  // Rank 0 of a pipeline: tells the other ranks that training ended (after
  // the last Fit; model() holds every rank's trained parameters once Fit
  // returns). Does nothing without a pipeline.
  Status FinishPipeline();

  embedding::EmbeddingTable& table() { return *table_; }
  DenseModel& model() { return *model_; }
  // The options, with what Create filled in.
  const TrainOptions& options() const { return options_; }

 private:
  Trainer(const TrainOptions& options, std::unique_ptr<embedding::EmbeddingTable> table,
          std::unique_ptr<DenseModel> model);
  // Resuming: seeks `train` past the batches a restored checkpoint had
  // trained (or reads and drops them); sets *exhausted when the data ended
  // among them.
  Status SkipTrainedBatches(io::BatchSource& train, int64_t skip, const std::string& position,
                            bool* exhausted);
  // Writes the checkpoint of the job's first `step` steps, with the training
  // data's position after them (empty when the source cannot say).
  // REQUIRES: the table and the model are quiescent (between steps).
  Status SaveCheckpoint(int64_t step, const std::string& data_position, TrainReport* report);
  // InvalidArgument unless `data` has the model's dense and slot counts.
  Status CheckShape(const io::BatchSource& data) const;
  // Makes room for `rows` embedding rows (TrainOptions::embedding_reserve_rows):
  // `why` says where the figure comes from, for the log and the error.
  Status ReserveRows(int64_t rows, const std::string& why);
  // Restore() with ranks: the checkpoint RANKS names, resharded when it was
  // written by another number of ranks (engine/rank_checkpoint.h).
  Result<int64_t> RestoreRanks(const DenseState& dense);

  TrainOptions options_;
  // The directories the job writes, locked for it (declared before what
  // writes them, so released after it is closed).
  std::vector<std::unique_ptr<DirectoryLock>> locks_;
  std::unique_ptr<embedding::EmbeddingTable> table_;
  std::unique_ptr<DenseModel> model_;
  // Rank 0 of a pipeline: the dense stage's chunks (its parameters are
  // copied into model_ before anything reads model_).
  std::unique_ptr<pipeline::PipelineDenseStage> pipeline_stage_;
  pipeline::TrainingStep step_;
  ThreadArena arena_;
  // Steps the job has trained (a restored checkpoint's included).
  int64_t job_steps_ = 0;
  // Batches the next Fit skips (what a restored checkpoint had trained), and
  // the data position the checkpoint had after them: the next Fit seeks its
  // source there, or reads and drops the batches when it cannot.
  int64_t skip_batches_ = 0;
  std::string resume_position_;
  std::unique_ptr<TrainingCheckpointer> checkpointer_;
  // The job's checkpoint directory (options_.checkpoint.dir is this rank's
  // own under it when there are ranks).
  std::string job_checkpoint_dir_;
  // Checkpoints in rank directories with a RANKS commit (a job of ranks, or
  // one process resuming one).
  bool ranks_layout_ = false;
  // The step Restore loaded (-1: none), and whether this rank's saves after
  // it that the job never committed were set aside (before the first save).
  int64_t restored_step_ = -1;
  bool uncommitted_set_aside_ = false;
};

}  // namespace ember::engine
