#pragma once

// What a Fit reports: TrainReport, and the progress of a run as it goes
// (the terminal line or periodic log: samples/s, loss, "AUC so far", and
// the embedding tiers), fed by the training loop with every trained batch.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/progress.h"
#include "embedding/embedding_table.h"
#include "engine/metrics.h"
#include "pipeline/stage.h"
#include "pipeline/staleness.h"
#include "pipeline/training_step.h"

namespace ember::engine {

// One evaluation during training (TrainOptions::eval_every_steps,
// eval_every_epoch).
struct EvalPoint {
  // The job's steps trained (a restored checkpoint's included), and this
  // Fit's training examples, when it was taken.
  int64_t step = 0;
  int64_t examples = 0;
  // Mean training loss of this Fit's batches since the previous point.
  double train_loss = 0.0;
  // The evaluation's metrics (test AUC, logloss, ...).
  Metrics test;
  // Training examples per second of this Fit so far, evaluations left out.
  double samples_per_sec = 0.0;
};

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
  // Threads of each stage (sequential runs: the job's threads for each).
  pipeline::PerStage<int> stage_threads;
  // Pipelined runs: the staleness of every pulled row, and the watchdog's
  // reports.
  pipeline::StalenessHistogram staleness;
  int64_t stalls = 0;
  // MoE layers (summed over layers and steps; zeros without them): routed
  // choices, those dropped because their expert was full, examples that lost
  // a choice, and the load-balancing loss summed over steps (unweighted; 1
  // per layer when the load is uniform).
  int64_t moe_choices = 0;
  int64_t moe_dropped_choices = 0;
  int64_t moe_dropped_examples = 0;
  double moe_aux_loss_sum = 0.0;
  // Bytes the expert layers sent to other ranks, and the seconds of their
  // exchanges (expert parallelism).
  int64_t moe_exchanged_bytes = 0;
  double moe_exchange_seconds = 0.0;
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
  // The restored checkpoint had finished training: nothing was left to
  // train (steps is 0); resumed_from_step is its step.
  bool already_finished = false;
  // Evaluations during training, in step order, and their seconds (left out
  // of train_seconds).
  std::vector<EvalPoint> history;
  double eval_seconds = 0.0;
};

// Counts every trained batch into a TrainReport and shows progress.
// Thread safety: none; Done is called by the loop in batch order.
class TrainingProgress {
 public:
  // `total_steps` < 0: unknown. `show`: print progress; `table` for the
  // tiers' line when `tiered`. The steady rate leaves out the first
  // `warmup_steps` steps.
  TrainingProgress(bool show, int64_t total_steps, int64_t warmup_steps,
                   const embedding::EmbeddingTable* table, bool tiered, TrainReport* report);

  // After the last stage of a trained batch.
  void Done(const pipeline::StepState& state);
  // When the run ends: the final progress line, the rates and the loss.
  void Finish();
  // The mean training loss of the batches since the last call (0 without
  // any), for an evaluation point.
  double TakeIntervalLoss();
  // Seconds since the run started, report->eval_seconds left out.
  double TrainSeconds() const;

 private:
  double Auc() const;

  TrainReport* report_;
  int64_t warmup_steps_;
  const embedding::EmbeddingTable* table_;
  bool tiered_;
  std::unique_ptr<ProgressReporter> progress_;
  // The end of the warm-up steps and the examples trained by then.
  std::chrono::steady_clock::time_point warm_end_ = std::chrono::steady_clock::now();
  int64_t warm_examples_ = 0;
  // "AUC so far": task 0's predictions of the last kAucWindow training
  // examples, each made before its batch's update (progressive validation),
  // with their labels.
  std::vector<float> recent_scores_, recent_labels_;
  size_t recent_next_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  // Loss since the last TakeIntervalLoss.
  double interval_loss_sum_ = 0.0;
  int64_t interval_loss_count_ = 0;
  // Loss over the epoch of the last batch.
  int64_t loss_epoch_ = -1;
  double loss_sum_ = 0.0;
  int64_t loss_count_ = 0;
};

}  // namespace ember::engine
