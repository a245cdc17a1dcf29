#include "engine/training_progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "engine/metrics.h"

namespace ember::engine {
namespace {

constexpr size_t kAucWindow = 100000;

}  // namespace

TrainingProgress::TrainingProgress(bool show, int64_t total_steps, int64_t warmup_steps,
                                   const embedding::EmbeddingTable* table, bool tiered,
                                   TrainReport* report)
    : report_(report), warmup_steps_(warmup_steps), table_(table), tiered_(tiered) {
  if (show) progress_ = std::make_unique<ProgressReporter>("train steps", total_steps);
}

double TrainingProgress::Auc() const {
  return recent_scores_.empty() ? 0.5 : ComputeAuc(recent_scores_, recent_labels_);
}

void TrainingProgress::Done(const pipeline::StepState& s) {
  TrainReport& report = *report_;
  ++report.steps;
  report.examples += s.batch.size;
  report.moe_choices += s.moe.choices;
  report.moe_dropped_choices += s.moe.dropped_choices;
  report.moe_dropped_examples += s.moe.dropped_examples;
  report.moe_aux_loss_sum += s.moe.aux_loss;
  report.moe_exchanged_bytes += s.moe.exchanged_bytes;
  report.moe_exchange_seconds += s.moe.exchange_seconds;
  if (report.steps == warmup_steps_) {
    warm_end_ = std::chrono::steady_clock::now();
    warm_examples_ = report.examples;
  }
  if (s.epoch != loss_epoch_) {
    loss_epoch_ = s.epoch;
    loss_sum_ = 0.0;
    loss_count_ = 0;
  }
  loss_sum_ += s.loss * s.batch.size;
  loss_count_ += s.batch.size;
  interval_loss_sum_ += s.loss * s.batch.size;
  interval_loss_count_ += s.batch.size;
  if (!progress_) return;
  const int64_t tasks = s.logits.numel() / std::max<int64_t>(1, s.batch.size);
  for (int64_t i = 0; i < s.batch.size; ++i) {
    const float score = s.logits.data<float>()[i * tasks];
    const float label = s.labels.data<float>()[i * tasks];
    if (recent_scores_.size() < kAucWindow) {
      recent_scores_.push_back(score);
      recent_labels_.push_back(label);
    } else {
      recent_scores_[recent_next_] = score;
      recent_labels_[recent_next_] = label;
      recent_next_ = (recent_next_ + 1) % kAucWindow;
    }
  }
  progress_->Update(report.steps, [&] {
    const double seconds = progress_->elapsed_seconds();
    char detail[192];
    const int used = std::snprintf(detail, sizeof(detail), "%.0f samples/s, loss %.4f, AUC %.4f",
                                   seconds > 0 ? report.examples / seconds : 0.0,
                                   loss_sum_ / loss_count_, Auc());
    if (tiered_) {
      const embedding::TableStats t = table_->stats();
      const double lookups = static_cast<double>(t.memory_hits + t.disk_hits);
      std::snprintf(detail + used, sizeof(detail) - used,
                    ", embeddings %.0f MiB in memory, %.1f%% memory hits",
                    t.memory_bytes / 1048576.0,
                    lookups > 0 ? 100.0 * t.memory_hits / lookups : 100.0);
    }
    return std::string(detail);
  });
}

double TrainingProgress::TakeIntervalLoss() {
  const double loss = interval_loss_count_ ? interval_loss_sum_ / interval_loss_count_ : 0.0;
  interval_loss_sum_ = 0.0;
  interval_loss_count_ = 0;
  return loss;
}

double TrainingProgress::TrainSeconds() const {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return std::max(0.0, seconds - report_->eval_seconds);
}

void TrainingProgress::Finish() {
  TrainReport& report = *report_;
  report.train_seconds =
      progress_ ? std::max(0.0, progress_->elapsed_seconds() - report.eval_seconds) : 0.0;
  if (report.steps > warmup_steps_) {
    // Evaluations are not training (those within the warm-up steps, too,
    // are left out: a slight overestimate then).
    const double steady_seconds = std::max(
        0.0, std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_end_).count() -
                 report.eval_seconds);
    report.steady_samples_per_sec =
        steady_seconds > 0 ? (report.examples - warm_examples_) / steady_seconds : 0.0;
  }
  if (progress_) {
    char detail[96];
    std::snprintf(detail, sizeof(detail), "loss %.4f, AUC %.4f (last %zu training examples)",
                  loss_count_ ? loss_sum_ / loss_count_ : 0.0, Auc(), recent_scores_.size());
    progress_->Finish(detail);
  }
  if (report.train_seconds == 0.0) report.train_seconds = report.stage_times.TotalSeconds();
  report.samples_per_sec = report.train_seconds > 0 ? report.examples / report.train_seconds : 0;
  report.last_epoch_loss = loss_count_ ? loss_sum_ / loss_count_ : 0.0;
  report.embedding = table_->stats();
}

}  // namespace ember::engine
