#include "engine/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "core/progress.h"
#include "core/random.h"
#include "core/threads.h"
#include "embedding/distinct_keys.h"
#include "embedding/unique_keys.h"
#include "engine/model_zoo.h"
#include "io/batch_source.h"
#include "ops/dense_ops.h"
#include "pipeline/pipelined_runner.h"
#include "pipeline/sequential_runner.h"
#include "scheduler/planner.h"

namespace ember::engine {

// Everything one batch carries through the stages.
struct Trainer::Step {
  int64_t index = 0;  // The batch's index in this Fit.
  int64_t step = 0;   // Its step in the job (index + steps before this Fit).
  int64_t epoch = 0;  // The epoch of the batch.
  io::Batch batch;
  std::vector<embedding::Key> unique_keys;
  std::vector<int64_t> key_rows;  // Row of each key occurrence in `rows`.
  Tensor row_index;   // i64 [nnz], copy of key_rows for the pooling op.
  Tensor offsets;     // i64 [B * S + 1]
  Tensor rows;        // [U, D] pulled rows.
  Tensor pooled;      // [B, S * D]
  Tensor dense;       // [B, num_dense]
  Tensor labels;      // [B, T] for T tasks
  Tensor logits;      // [B, T]
  Tensor dlogits;     // [B, T]
  Tensor dpooled;     // [B, S * D]
  Tensor drows;       // [U, D]
  std::vector<embedding::Key> sorted_keys;  // unique_keys, ascending (pipelined)
  std::vector<int64_t> sorted_order;        // sorted_keys[i] = unique_keys[sorted_order[i]]
  std::vector<int> staleness;               // Per sorted key (scratch)
  std::vector<embedding::Key> part_keys;    // A part of a split pull (scratch)
  std::vector<int64_t> part_rows;
  Tensor part_values;
  double loss = 0.0;
  bool prepared = false;  // Prepare ran on this batch (sequential read-ahead).
};

Status ValidateTrainOptions(const TrainOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckModelName(o.model));
  if (o.batch_size < 1) return Status::InvalidArgument("--batch_size must be >= 1, got ", o.batch_size);
  if (o.epochs < 1) return Status::InvalidArgument("--epochs must be >= 1, got ", o.epochs);
  if (o.max_steps < 0) return Status::InvalidArgument("--max_steps must be >= 0, got ", o.max_steps);
  if (o.timing_warmup_steps < 0) {
    return Status::InvalidArgument("--timing_warmup_steps must be >= 0, got ",
                                   o.timing_warmup_steps);
  }
  if (o.eval_batch_size < 1) {
    return Status::InvalidArgument("eval batch size must be >= 1, got ", o.eval_batch_size);
  }
  if (!(o.sparse_optimizer.learning_rate > 0)) {
    return Status::InvalidArgument("--sparse_lr must be > 0, got ", o.sparse_optimizer.learning_rate);
  }
  if (o.embedding_ttl_steps < 0) {
    return Status::InvalidArgument("--embedding_ttl_steps must be >= 0, got ",
                                   o.embedding_ttl_steps);
  }
  if (!(o.dense_optimizer.learning_rate > 0)) {
    return Status::InvalidArgument("--dense_lr must be > 0, got ", o.dense_optimizer.learning_rate);
  }
  if (o.pipeline_depth < 1) {
    return Status::InvalidArgument("--pipeline_depth must be >= 1, got ", o.pipeline_depth);
  }
  if (!o.stage_threads.empty()) {
    static constexpr const char* kStages[] = {"unique", "pull", "dense", "push"};
    if (o.stage_threads.size() != 4) {
      return Status::InvalidArgument(
          "--stage_threads needs 4 counts (unique, pull, dense, push), got ",
          o.stage_threads.size());
    }
    const int budget = o.threads > 0 ? o.threads : HardwareThreads();
    for (size_t s = 0; s < 4; ++s) {
      if (o.stage_threads[s] < 1 || o.stage_threads[s] > budget) {
        return Status::InvalidArgument("--stage_threads: the ", kStages[s], " stage's ",
                                       o.stage_threads[s], " threads are outside [1, ", budget,
                                       "] (the job's threads)");
      }
    }
  }
  if (o.embedding_reserve_rows < -1) {
    return Status::InvalidArgument("--embedding_reserve_rows must be >= -1 (-1: auto), got ",
                                   o.embedding_reserve_rows);
  }
  if (o.max_staleness < 0) {
    return Status::InvalidArgument("--max_staleness must be >= 0, got ", o.max_staleness);
  }
  if (!(o.watchdog_seconds >= 0)) {
    return Status::InvalidArgument("--watchdog_seconds must be >= 0, got ", o.watchdog_seconds);
  }
  if (o.checkpoint_every_steps < 0) {
    return Status::InvalidArgument("--checkpoint_every_steps must be >= 0, got ",
                                   o.checkpoint_every_steps);
  }
  if (o.checkpoint_full_every < 1) {
    return Status::InvalidArgument("--checkpoint_full_every must be >= 1, got ",
                                   o.checkpoint_full_every);
  }
  return Status::OK();
}

Result<std::unique_ptr<Trainer>> Trainer::Create(const TrainOptions& options, int num_dense,
                                                 int num_slots, int num_tasks) {
  EMBER_RETURN_IF_ERROR(ValidateTrainOptions(options));
  embedding::EmbeddingTableOptions table_options;
  table_options.dim = options.embedding_dim;
  table_options.seed = options.seed;
  table_options.optimizer = options.sparse_optimizer;
  table_options.admission = options.admission;
  table_options.ttl_steps = options.embedding_ttl_steps;
  table_options.memory_budget_bytes = options.embedding_memory_budget_bytes;
  table_options.disk_path = options.embedding_dir;
  table_options.track_changes = !options.checkpoint_dir.empty();
  EMBER_ASSIGN_OR_RETURN(auto table, embedding::NewEmbeddingTable(table_options));
  ModelOptions model_options;
  model_options.name = options.model;
  model_options.cross_layers = options.cross_layers;
  model_options.cross_rank = options.cross_rank;
  model_options.num_tasks = num_tasks;
  model_options.num_experts = options.num_experts;
  model_options.expert_mlp = options.expert_mlp;
  model_options.num_dense = num_dense;
  model_options.num_slots = num_slots;
  model_options.embedding_dim = options.embedding_dim;
  model_options.bottom_mlp = options.bottom_mlp;
  model_options.top_mlp = options.top_mlp;
  model_options.seed = options.seed;
  model_options.device = options.dense_device;
  model_options.precision = options.dense_precision;
  model_options.cpu_row_shards = options.dense_row_shards;
  Result<std::unique_ptr<DenseModel>> model = DenseModel::Create(model_options);
  if (!model.ok()) {
    return model.status().WithContext("the dense model on " + options.dense_device.ToString());
  }
  EMBER_RETURN_IF_ERROR((*model)->InitOptimizer(options.dense_optimizer));
  std::unique_ptr<Trainer> trainer(new Trainer(options, std::move(table), *std::move(model)));
  if (!options.checkpoint_dir.empty()) {
    TrainingCheckpointOptions checkpoint;
    checkpoint.dir = options.checkpoint_dir;
    checkpoint.full_every = options.checkpoint_full_every;
    checkpoint.sparse_optimizer = embedding::SparseOptimizerName(options.sparse_optimizer.type);
    EMBER_ASSIGN_OR_RETURN(trainer->checkpointer_,
                           TrainingCheckpointer::Create(*trainer->table_, checkpoint));
  }
  return trainer;
}

Trainer::Trainer(const TrainOptions& options, std::unique_ptr<embedding::EmbeddingTable> table,
                 std::unique_ptr<DenseModel> model)
    : options_(options),
      table_(std::move(table)),
      model_(std::move(model)),
      arena_(options.threads) {}

Trainer::~Trainer() = default;

Status Trainer::Prepare(Step& step) {
  const io::Batch& batch = step.batch;
  const int64_t b = batch.size;
  const int dim = options_.embedding_dim;
  embedding::UniqueKeys(batch.keys, &step.unique_keys, &step.key_rows);
  const int64_t nnz = static_cast<int64_t>(batch.keys.size());
  const int64_t unique = static_cast<int64_t>(step.unique_keys.size());
  step.row_index = Tensor::Empty({nnz}, DType::kI64);
  // std::copy, not memcpy: any of these may be empty (no dense features, no
  // keys), whose data() may be null, which memcpy may not be given.
  std::copy_n(step.key_rows.data(), nnz, step.row_index.data<int64_t>());
  step.offsets = Tensor::Empty({static_cast<int64_t>(batch.offsets.size())}, DType::kI64);
  std::copy(batch.offsets.begin(), batch.offsets.end(), step.offsets.data<int64_t>());
  step.rows = Tensor::Empty({unique, dim});
  step.pooled = Tensor::Empty({b, int64_t{batch.num_slots} * dim});
  step.dense = Tensor::Empty({b, batch.num_dense});
  std::copy(batch.dense.begin(), batch.dense.end(), step.dense.data<float>());
  step.labels = Tensor::Empty({b, batch.num_labels});
  std::copy(batch.labels.begin(), batch.labels.end(), step.labels.data<float>());
  return Status::OK();
}

Status Trainer::Pull(Step& step) {
  // The step stamps rows for TTL eviction and drives probabilistic admission.
  table_->set_step(step.step);
  return table_->Pull(step.unique_keys, step.rows.data<float>());
}

Status Trainer::PullPart(Step& step, const std::vector<int64_t>& rows) {
  const int dim = options_.embedding_dim;
  step.part_keys.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) step.part_keys[i] = step.unique_keys[rows[i]];
  step.part_values = Tensor::Empty({static_cast<int64_t>(rows.size()), dim});
  EMBER_RETURN_IF_ERROR(table_->Pull(step.part_keys, step.part_values.data<float>()));
  const float* values = step.part_values.data<float>();
  float* out = step.rows.data<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(out + rows[i] * dim, values + i * dim, dim * sizeof(float));
  }
  return Status::OK();
}

Status Trainer::LookupRows(Step& step) {
  return table_->Lookup(step.unique_keys, step.rows.data<float>());
}

Status Trainer::Forward(Step& step) {
  const int64_t b = step.batch.size;
  const int dim = options_.embedding_dim;
  Tensor pooled_bags = step.pooled.Reshape({b * step.batch.num_slots, dim});
  EMBER_RETURN_IF_ERROR(ops::EmbeddingBagForward(step.rows, step.row_index, step.offsets,
                                                 ops::Pooling::kSum, &pooled_bags));
  return model_->Forward(step.dense, step.pooled, &step.logits);
}

Status Trainer::DenseTrain(Step& step) {
  const int64_t b = step.batch.size;
  const int dim = options_.embedding_dim;
  EMBER_RETURN_IF_ERROR(Forward(step));
  const int64_t outputs = b * model_->options().num_tasks;
  step.dlogits = Tensor::Empty(step.logits.shape());
  Tensor flat_logits = step.logits.Reshape({outputs});
  Tensor flat_dlogits = step.dlogits.Reshape({outputs});
  const Tensor flat_labels = step.labels.Reshape({outputs});
  EMBER_ASSIGN_OR_RETURN(step.loss,
                         ops::SigmoidCrossEntropyWithLogits(flat_logits, flat_labels, &flat_dlogits));
  // The model's logits are its buffer, which the next batch's forward
  // overwrites; the step keeps its own for what reads them after the
  // pipeline's later stages (the progress line's AUC).
  step.logits = step.logits.Clone();
  step.dpooled = Tensor::Empty({b, int64_t{step.batch.num_slots} * dim});
  EMBER_RETURN_IF_ERROR(model_->Backward(step.dlogits, &step.dpooled));
  ++dense_step_;
  EMBER_RETURN_IF_ERROR(model_->OptimizerStep(options_.dense_optimizer, dense_step_));
  step.drows = Tensor::Empty(step.rows.shape());
  const Tensor dbags = step.dpooled.Reshape({b * step.batch.num_slots, dim});
  return ops::EmbeddingBagBackward(dbags, step.row_index, step.offsets, ops::Pooling::kSum,
                                   &step.drows);
}

Status Trainer::Push(Step& step) {
  return table_->Push(step.unique_keys, step.drows.data<float>());
}

namespace {

// The dense half's state for a checkpoint. A model on a GPU gives host
// copies of its parameters, kept in `*host` (a restore into them is copied
// back with ParametersFromHost).
Result<DenseState> DenseStateOf(DenseModel& model, const ops::DenseOptimizerOptions& optimizer,
                                int64_t* optimizer_steps, std::string* data_position,
                                std::vector<Parameter>* host) {
  DenseState state;
  state.data_position = data_position;
  if (model.device().is_cpu()) {
    state.parameters = model.parameters();
  } else {
    EMBER_ASSIGN_OR_RETURN(*host, model.ParametersToHost());
    for (Parameter& p : *host) state.parameters.push_back(&p);
  }
  state.descriptor = DenseStateDescriptor(model.options().name,
                                          ops::DenseOptimizerName(optimizer.type), state.parameters);
  state.optimizer_steps = optimizer_steps;
  return state;
}

}  // namespace

Result<int64_t> Trainer::Restore() {
  if (checkpointer_ == nullptr) {
    return Status::FailedPrecondition("no checkpoint directory is set");
  }
  std::vector<Parameter> host;
  EMBER_ASSIGN_OR_RETURN(
      const DenseState dense,
      DenseStateOf(*model_, options_.dense_optimizer, &dense_step_, &resume_position_, &host));
  EMBER_ASSIGN_OR_RETURN(const int64_t step, checkpointer_->Restore(dense));
  if (!model_->device().is_cpu()) EMBER_RETURN_IF_ERROR(model_->ParametersFromHost(host));
  job_steps_ = step;
  skip_batches_ = step;
  return step;
}

Result<int64_t> Trainer::NewestCheckpointStep() const {
  if (checkpointer_ == nullptr) return int64_t{-1};
  return checkpointer_->NewestStep();
}

bool Trainer::CheckpointDue(int64_t step) const {
  return checkpointer_ != nullptr && options_.checkpoint_every_steps > 0 && step > 0 &&
         step % options_.checkpoint_every_steps == 0;
}

Result<std::string> Trainer::DataPosition(const io::BatchSource& data) const {
  if (checkpointer_ == nullptr) return std::string();
  Result<std::string> position = data.ResumePosition();
  if (position.ok() || position.status().code() != StatusCode::kUnimplemented) return position;
  return std::string();
}

Status Trainer::SaveCheckpoint(int64_t step, const std::string& data_position,
                               TrainReport* report) {
  TraceSpan span(options_.tracer, "checkpoint", "checkpoint", step);
  std::string position = data_position;
  std::vector<Parameter> host;
  EMBER_ASSIGN_OR_RETURN(const DenseState dense, DenseStateOf(*model_, options_.dense_optimizer,
                                                              &dense_step_, &position, &host));
  EMBER_RETURN_IF_ERROR(checkpointer_->Save(step, dense)
                            .WithContext("writing the checkpoint of step " + std::to_string(step) +
                                         " in " + checkpointer_->dir()));
  ++report->checkpoints_written;
  report->last_checkpoint_step = step;
  return Status::OK();
}

std::vector<pipeline::Stage<Trainer::Step>> Trainer::TrainingStages() {
  return {
      {"unique", [this](Step& s) { return Prepare(s); }},
      {"pull", [this](Step& s) { return Pull(s); }},
      {"dense", [this](Step& s) { return DenseTrain(s); }},
      {"push", [this](Step& s) { return Push(s); }},
  };
}

Status Trainer::CheckShape(const io::BatchSource& data) const {
  const ModelOptions& model = model_->options();
  if (data.num_labels() != model.num_tasks) {
    return Status::InvalidArgument("the data has ", data.num_labels(),
                                   " labels per example, the model predicts ", model.num_tasks,
                                   model.num_tasks == 1 ? " (use --model=mmoe for multi-task data)"
                                                        : "");
  }
  if (data.num_dense() == model.num_dense && data.num_slots() == model.num_slots) {
    return Status::OK();
  }
  return Status::InvalidArgument("the data has ", data.num_dense(), " dense features and ",
                                 data.num_slots(), " slots per example, the model was made for ",
                                 model.num_dense, " and ", model.num_slots);
}

Status Trainer::ReserveRows(int64_t rows, const std::string& why) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t before = table_->memory_bytes();
  EMBER_RETURN_IF_ERROR(
      table_->Reserve(rows).WithContext("reserving embedding rows (" + why + ")"));
  LOG(INFO) << "embedding rows: room for " << rows << " (" << why << "), "
            << (table_->memory_bytes() - before) / (1 << 20) << " MiB, in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s";
  return Status::OK();
}

Result<TrainReport> Trainer::Fit(const io::Dataset& train) {
  if (train.size() == 0) return Status::InvalidArgument("the training data has no examples");
  int64_t reserved = 0;
  if (options_.embedding_reserve_rows == -1 && options_.embedding_memory_budget_bytes == 0 &&
      options_.admission.kind == embedding::AdmissionOptions::Kind::kNone) {
    embedding::DistinctKeyCounter distinct;
    distinct.Add(train.all().keys);
    const int64_t rows = distinct.Estimate() * 51 / 50;
    const Status status = ReserveRows(rows, "the training data's distinct keys + 2%");
    if (status.ok()) {
      reserved = rows;
    } else {
      LOG(WARNING) << status << "; rows are made as they come";
    }
  }
  io::DatasetBatchSourceOptions source_options;
  source_options.batch_size = options_.batch_size;
  source_options.num_epochs = options_.epochs;
  source_options.shuffle = options_.shuffle;
  source_options.seed = options_.seed;
  io::DatasetBatchSource source(train, source_options);
  return FitSource(source, reserved);
}

Result<TrainReport> Trainer::Fit(io::BatchSource& train) { return FitSource(train, 0); }

Result<TrainReport> Trainer::FitSource(io::BatchSource& train, int64_t reserved_rows) {
  EMBER_RETURN_IF_ERROR(CheckShape(train));
  TrainReport report;
  report.reserved_embedding_rows = reserved_rows;
  if (options_.embedding_reserve_rows > 0) {
    EMBER_RETURN_IF_ERROR(ReserveRows(options_.embedding_reserve_rows, "--embedding_reserve_rows"));
    report.reserved_embedding_rows = options_.embedding_reserve_rows;
  }
  // Resuming: the source seeks to where the checkpoint's batches ended, or,
  // when it cannot (or the checkpoint has no position), those batches are
  // read and dropped; either way training goes on with the batch after them.
  const int64_t skip = std::exchange(skip_batches_, 0);
  const std::string resume_position = std::exchange(resume_position_, std::string());
  bool exhausted = false;
  if (skip > 0) {
    const Status seek = resume_position.empty() ? Status::Unimplemented("no position")
                                                : train.ResumeFrom(resume_position);
    if (seek.ok()) {
      LOG(INFO) << "resuming after step " << skip << " where its data ended";
    } else if (seek.code() == StatusCode::kUnimplemented) {
      LOG(INFO) << "resuming after step " << skip << ": skipping the batches it had trained";
      io::Batch scratch;
      for (int64_t i = 0; i < skip && !exhausted; ++i) {
        Result<bool> more = train.Next(&scratch);
        if (!more.ok()) return more.status().WithContext("skipping trained batches");
        exhausted = !*more;
      }
    } else {
      return seek.WithContext(
          "the checkpoint's training data position does not fit this training data (resume "
          "with the data and reader flags of the checkpointed job, or start afresh)");
    }
    report.resumed_from_step = skip;
  }
  int64_t total_steps = train.EstimatedBatches();
  if (total_steps >= 0) total_steps = std::max<int64_t>(0, total_steps - skip);
  const int64_t max_steps = options_.max_steps > 0 ? std::max<int64_t>(0, options_.max_steps - skip)
                                                   : 0;
  if (options_.max_steps > 0) {
    total_steps = total_steps < 0 ? max_steps : std::min(total_steps, max_steps);
  }
  if (exhausted || (options_.max_steps > 0 && max_steps == 0)) {
    LOG(INFO) << "the checkpoint of step " << skip << " had finished training";
    report.embedding = table_->stats();
    return report;
  }
  const auto below_max_steps = [&](int64_t steps) {
    if (options_.stop_requested != nullptr && options_.stop_requested->load()) {
      report.interrupted = true;
      return false;
    }
    return options_.max_steps == 0 || steps < max_steps;
  };
  std::unique_ptr<ProgressReporter> progress;
  if (options_.show_progress) {
    progress = std::make_unique<ProgressReporter>("train steps", total_steps);
  }
  // The end of the warm-up steps (see TrainOptions::timing_warmup_steps) and
  // the examples trained by then.
  std::chrono::steady_clock::time_point warm_end = std::chrono::steady_clock::now();
  int64_t warm_examples = 0;
  // "AUC so far" for the progress line: task 0's predictions of the last
  // kProgressAucWindow training examples, each made before its batch's
  // update (progressive validation), with their labels.
  constexpr size_t kProgressAucWindow = 100000;
  std::vector<float> recent_scores, recent_labels;
  size_t recent_next = 0;
  const auto progress_auc = [&] {
    return recent_scores.empty() ? 0.5 : ComputeAuc(recent_scores, recent_labels);
  };
  // Loss over the epoch of the last batch.
  int64_t loss_epoch = -1;
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  auto done = [&](Step& s) {
    ++report.steps;
    report.examples += s.batch.size;
    if (report.steps == options_.timing_warmup_steps) {
      warm_end = std::chrono::steady_clock::now();
      warm_examples = report.examples;
    }
    if (s.epoch != loss_epoch) {
      loss_epoch = s.epoch;
      loss_sum = 0.0;
      loss_count = 0;
    }
    loss_sum += s.loss * s.batch.size;
    loss_count += s.batch.size;
    if (progress) {
      const int64_t tasks = s.logits.numel() / std::max<int64_t>(1, s.batch.size);
      for (int64_t i = 0; i < s.batch.size; ++i) {
        const float score = s.logits.data<float>()[i * tasks];
        const float label = s.labels.data<float>()[i * tasks];
        if (recent_scores.size() < kProgressAucWindow) {
          recent_scores.push_back(score);
          recent_labels.push_back(label);
        } else {
          recent_scores[recent_next] = score;
          recent_labels[recent_next] = label;
          recent_next = (recent_next + 1) % kProgressAucWindow;
        }
      }
      progress->Update(report.steps, [&] {
        const double seconds = progress->elapsed_seconds();
        char detail[192];
        int used = std::snprintf(detail, sizeof(detail), "%.0f samples/s, loss %.4f, AUC %.4f",
                                 seconds > 0 ? report.examples / seconds : 0.0,
                                 loss_sum / loss_count, progress_auc());
        if (options_.embedding_memory_budget_bytes > 0) {
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
  };
  EMBER_RETURN_IF_ERROR(options_.pipeline
                            ? FitPipelined(train, &report, below_max_steps, done)
                            : FitSequential(train, &report, below_max_steps, done));
  if (report.steps == 0 && !report.interrupted && skip == 0) {
    return Status::InvalidArgument("the training data has no examples");
  }
  job_steps_ += report.steps;
  // The final checkpoint: training finished, or stopped by a signal.
  if (checkpointer_ != nullptr && report.steps > 0 && report.last_checkpoint_step != job_steps_) {
    EMBER_RETURN_IF_ERROR(SaveCheckpoint(job_steps_, end_position_, &report));
  }
  report.train_seconds = progress ? progress->elapsed_seconds() : 0.0;
  if (report.steps > options_.timing_warmup_steps) {
    const double steady_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_end).count();
    report.steady_samples_per_sec =
        steady_seconds > 0 ? (report.examples - warm_examples) / steady_seconds : 0.0;
  }
  if (progress) {
    char detail[96];
    std::snprintf(detail, sizeof(detail), "loss %.4f, AUC %.4f (last %zu training examples)",
                  loss_count ? loss_sum / loss_count : 0.0, progress_auc(), recent_scores.size());
    progress->Finish(detail);
  }
  double busy = 0;
  for (double s : report.stage_times.busy_seconds) busy += s;
  if (report.train_seconds == 0.0) report.train_seconds = busy;
  report.samples_per_sec = report.train_seconds > 0 ? report.examples / report.train_seconds : 0;
  report.last_epoch_loss = loss_count ? loss_sum / loss_count : 0.0;
  report.embedding = table_->stats();
  return report;
}

bool Trainer::EvictsBefore(int64_t step) const {
  const int64_t ttl = options_.embedding_ttl_steps;
  return ttl > 0 && step > 0 && step % std::max<int64_t>(1, ttl / 2) == 0;
}

Status Trainer::FitSequential(io::BatchSource& train, TrainReport* report,
                              const std::function<bool(int64_t)>& below_max_steps,
                              const std::function<void(Step&)>& done) {
  std::vector<pipeline::Stage<Step>> stages = TrainingStages();
  report->stage_threads.assign(stages.size(), arena_.threads());
  // A batch read ahead was prepared when it was read.
  stages[0].run = [this](Step& s) { return s.prepared ? Status::OK() : Prepare(s); };
  stages[3].run = [this](Step& s) {
    EMBER_RETURN_IF_ERROR(Push(s));
    // Eviction after the push of step i, before the pull of step i + 1.
    if (EvictsBefore(s.step + 1)) {
      const int64_t evicted = table_->EvictExpired();
      VLOG(1) << "step " << s.step << ": evicted " << evicted << " expired rows";
    }
    return Status::OK();
  };
  Status status;
  const bool prefetch = options_.prefetch && options_.embedding_memory_budget_bytes > 0;
  // Read-ahead: batch i + 1 is read and prepared (its unique keys, input
  // tensors and the table's grouping of its keys; with a disk tier its rows
  // prefetched, so that its Pull finds them in memory) while batch i trains,
  // by a thread that runs only on the cores the step leaves idle (SCHED_IDLE:
  // a step thread that wakes gets its core at once, which nice 19 does not
  // give). Without --read_ahead, and with a disk tier to prefetch for, this
  // thread reads ahead between steps.
  const bool read_ahead = options_.read_ahead || prefetch;
  Step step;
  Step ahead;
  Result<bool> ahead_read = false;  // Whether `ahead` holds a batch, or why reading failed.
  // The data position before `ahead` was read, for a checkpoint taken before
  // it trains (empty without a checkpoint directory), or why it is unknown.
  Result<std::string> before_ahead = std::string();
  bool have_ahead = false;  // `ahead` was read (ahead_read says how it went).
  // Reads the next batch into `s`; when `prepare`, also runs the unique stage
  // on it (else the stage runs it in its turn).
  const auto read = [&](Step& s, bool prepare) -> Result<bool> {
    s.prepared = false;
    Result<bool> more = train.Next(&s.batch);
    if (!more.ok()) return more.status().WithContext("reading the training data");
    if (!*more) return false;
    s.epoch = train.epoch();
    if (prepare) {
      EMBER_RETURN_IF_ERROR(Prepare(s));
      s.prepared = true;
      // The table's own key pass for the Pull (grouping by shard), also off
      // the step's critical path.
      table_->PrepareKeys(s.unique_keys);
      if (prefetch) table_->Prefetch(s.unique_keys);
    }
    return true;
  };
  // Reads ahead the batch of index `index` (taking the data position first).
  const auto read_ahead_now = [&](int64_t index) {
    TraceSpan span(options_.tracer, "read ahead", "stage", index);
    before_ahead = DataPosition(train);
    ahead_read = before_ahead.ok() ? read(ahead, /*prepare=*/true) : before_ahead.status();
  };
  // Where the data is after the last batch trained: before the batch read
  // ahead, unless reading ahead found the end of the data.
  const auto position_after_trained = [&]() -> Result<std::string> {
    const bool at_end = have_ahead && ahead_read.ok() && !*ahead_read;
    return have_ahead && !at_end ? before_ahead : DataPosition(train);
  };
  // Last, so that it stops before what its functions use is destroyed.
  std::unique_ptr<BackgroundThread> reader;
  if (options_.read_ahead) {
    reader = std::make_unique<BackgroundThread>(arena_.threads(), /*nice_increment=*/19,
                                                /*only_idle_cores=*/true);
  }
  arena_.Execute([&] {
    SetOpenMpThreads(arena_.threads());
    auto next = [&](int64_t, Step& s) {
      TraceSpan span(options_.tracer, "read", "stage", report->steps);
      if (reader) reader->Wait();
      if (!status.ok() || !below_max_steps(report->steps)) return false;
      // Between steps: every earlier one is done, the next not begun. The
      // data position is the one before the batch read ahead, if any.
      if (report->steps > 0 && CheckpointDue(job_steps_ + report->steps)) {
        Result<std::string> position = position_after_trained();
        status = position.ok() ? SaveCheckpoint(job_steps_ + report->steps, *position, report)
                               : position.status();
        if (!status.ok()) return false;
      }
      Result<bool> more = false;
      if (have_ahead) {
        std::swap(s, ahead);
        more = std::move(ahead_read);
        have_ahead = false;
      } else {
        more = read(s, /*prepare=*/false);
      }
      if (!more.ok()) status = more.status();
      if (!more.ok() || !*more) return false;
      s.index = report->steps;
      s.step = job_steps_ + s.index;
      if (read_ahead && below_max_steps(report->steps + 1)) {
        have_ahead = true;
        const int64_t index = report->steps + 1;
        if (reader) {
          reader->Start([&read_ahead_now, index] { read_ahead_now(index); });
        } else {
          read_ahead_now(index);
        }
      }
      return true;
    };
    const Status run = pipeline::RunSequential<Step>(stages, next, step, options_.tracer,
                                                     &report->stage_times, done);
    if (status.ok()) status = run;
  });
  if (reader) reader->Wait();
  if (!status.ok()) return status;
  if (have_ahead && !ahead_read.ok()) {
    // The batch after the last trained could not be read: nothing trained
    // on it, but the data is broken where training would go on.
    LOG(WARNING) << "reading ahead after the last step: " << ahead_read.status();
  }
  EMBER_ASSIGN_OR_RETURN(end_position_, position_after_trained());
  return Status::OK();
}

Status Trainer::FitPipelined(io::BatchSource& train, TrainReport* report,
                             const std::function<bool(int64_t)>& below_max_steps,
                             const std::function<void(Step&)>& done) {
  report->pipelined = true;
  const bool prefetch = options_.prefetch && options_.embedding_memory_budget_bytes > 0;
  pipeline::StalenessGate gate(options_.max_staleness, options_.early_pulls);
  std::vector<pipeline::Stage<Step>> stages = TrainingStages();
  // unique: also the sorted keys for the gate, and the disk prefetch, which
  // the read-ahead of the pipeline turns into loading while earlier batches
  // train.
  stages[0].run = [&](Step& s) {
    EMBER_RETURN_IF_ERROR(Prepare(s));
    s.sorted_order.resize(s.unique_keys.size());
    std::iota(s.sorted_order.begin(), s.sorted_order.end(), 0);
    std::sort(s.sorted_order.begin(), s.sorted_order.end(),
              [&](int64_t a, int64_t b) { return s.unique_keys[a] < s.unique_keys[b]; });
    s.sorted_keys.resize(s.unique_keys.size());
    for (size_t i = 0; i < s.sorted_order.size(); ++i) {
      s.sorted_keys[i] = s.unique_keys[s.sorted_order[i]];
    }
    if (prefetch) table_->Prefetch(s.unique_keys);
    return Status::OK();
  };
  // pull: waits for the pushes it must see; evicts expired rows (after
  // every earlier push, as sequential training does) on the pull thread.
  // The time a pull waits for pushes shows in the trace as a "pull wait"
  // span (category "wait") inside its pull span.
  const auto await_pull = [&](Step& s, bool after_all_pushes) {
    TraceSpan wait(options_.tracer, "pull wait", "wait", s.index);
    return gate.AwaitPull(s.index, s.sorted_keys, after_all_pushes);
  };
  stages[1].run = [&](Step& s) {
    const bool evict = EvictsBefore(s.step);
    if (evict || !options_.early_pulls) {
      EMBER_RETURN_IF_ERROR(await_pull(s, evict));
      if (evict) {
        const int64_t evicted = table_->EvictExpired();
        VLOG(1) << "before step " << s.step << ": evicted " << evicted << " expired rows";
      }
      return Pull(s);
    }
    // Early pull: the rows no in-flight batch will update (beyond the
    // staleness bound) are final now; read them, then wait for the pushes
    // the others need and read those.
    gate.Staleness(s.sorted_keys, &s.staleness);
    std::vector<int64_t> early, late;
    for (size_t i = 0; i < s.sorted_keys.size(); ++i) {
      (s.staleness[i] <= options_.max_staleness ? early : late).push_back(s.sorted_order[i]);
    }
    if (late.empty() || early.empty()) {
      EMBER_RETURN_IF_ERROR(await_pull(s, false));
      return Pull(s);
    }
    table_->set_step(s.step);
    EMBER_RETURN_IF_ERROR(PullPart(s, early));
    EMBER_RETURN_IF_ERROR(await_pull(s, false));
    return PullPart(s, late);
  };
  stages[3].run = [&](Step& s) {
    EMBER_RETURN_IF_ERROR(Push(s));
    gate.MarkPushed(s.index);
    return Status::OK();
  };
  pipeline::PipelineOptions pipeline_options;
  // Threads: options_.stage_threads (chosen by the planner), or the default
  // the planner costs (scheduler::TrainerStageThreads; read is this thread):
  // the dense stage keeps the whole budget, so that its oneDNN reductions
  // split as in sequential training (the same bits); pull and push get a
  // quarter each, sharing cores with it while they overlap.
  const std::array<int, scheduler::kNumStages> split =
      scheduler::TrainerStageThreads(arena_.threads(), /*pipeline=*/true);
  pipeline_options.stage_threads = options_.stage_threads.empty()
                                       ? std::vector<int>(split.begin() + 1, split.end())
                                       : options_.stage_threads;
  report->stage_threads = pipeline_options.stage_threads;
  // The dense stage is the critical path: the others yield it the cores
  // when there are too few for all (measured on 2 cores: without this,
  // preempted oneDNN threads made the dense stage a third slower).
  pipeline_options.stage_nice = {10, 10, 0, 10};
  pipeline_options.watchdog_seconds = options_.watchdog_seconds;
  pipeline_options.tracer = options_.tracer;
  pipeline_options.on_stop = [&gate] { gate.Cancel(); };
  pipeline_options.on_stall = [&](const std::string& stage, int64_t item, double seconds) {
    LOG(WARNING) << "watchdog: stage " << stage << " has been on batch " << item << " for "
                 << static_cast<int64_t>(seconds) << " s";
  };
  std::vector<Step> steps(std::max(1, options_.pipeline_depth));
  auto read = [&](int64_t index, Step& s) -> Result<bool> {
    if (!below_max_steps(index)) return false;
    if (index > 0 && CheckpointDue(job_steps_ + index)) {
      // A barrier: with no later batch read, nothing is in flight once
      // every earlier batch has pushed.
      EMBER_RETURN_IF_ERROR(gate.AwaitPushed(index));
      EMBER_ASSIGN_OR_RETURN(const std::string position, DataPosition(train));
      EMBER_RETURN_IF_ERROR(SaveCheckpoint(job_steps_ + index, position, report));
    }
    Result<bool> more = train.Next(&s.batch);
    if (!more.ok()) return more.status().WithContext("reading the training data");
    s.index = index;
    s.step = job_steps_ + index;
    s.epoch = train.epoch();
    return *more;
  };
  pipeline::PipelineStats stats;
  Status status;
  // The reader runs in the trainer's arena; each stage in its own.
  arena_.Execute([&] {
    status = pipeline::RunPipelined<Step>(stages, steps, read, done, pipeline_options, &stats);
  });
  report->stage_times = stats.times;
  report->staleness = gate.histogram();
  // The pull stage's time waiting for pushes is not work: report it apart.
  report->stage_times.busy_seconds[2] =
      std::max(0.0, report->stage_times.busy_seconds[2] - report->staleness.wait_seconds);
  report->stalls = stats.stalls;
  EMBER_RETURN_IF_ERROR(status);
  // The eviction sequential training does after its last push.
  if (EvictsBefore(job_steps_ + report->steps)) table_->EvictExpired();
  // Every batch read was trained: the source is where the last one ended.
  EMBER_ASSIGN_OR_RETURN(end_position_, DataPosition(train));
  return Status::OK();
}

Result<std::vector<float>> Trainer::Predict(const io::Dataset& data) {
  io::DatasetBatchSourceOptions source_options;
  source_options.batch_size = options_.eval_batch_size;
  io::DatasetBatchSource source(data, source_options);
  std::vector<float> predictions;
  predictions.reserve(data.size() * model_->options().num_tasks);
  EMBER_RETURN_IF_ERROR(Predict(source, &predictions, nullptr));
  return predictions;
}

Status Trainer::Predict(io::BatchSource& data, std::vector<float>* predictions,
                        std::vector<float>* labels) {
  EMBER_RETURN_IF_ERROR(CheckShape(data));
  Status status;
  arena_.Execute([&] {
    SetOpenMpThreads(arena_.threads());
    Step step;
    while (true) {
      Result<bool> more = data.Next(&step.batch);
      if (!more.ok()) status = more.status().WithContext("reading the evaluation data");
      if (!more.ok() || !*more) return;
      const int64_t outputs = step.batch.size * model_->options().num_tasks;
      status = Prepare(step);
      if (status.ok()) status = LookupRows(step);
      if (status.ok()) status = Forward(step);
      if (!status.ok()) return;
      Tensor probabilities = Tensor::Empty({outputs});
      status = ops::Sigmoid(step.logits.Reshape({outputs}), &probabilities);
      if (!status.ok()) return;
      const float* p = probabilities.data<float>();
      predictions->insert(predictions->end(), p, p + outputs);
      if (labels != nullptr) {
        labels->insert(labels->end(), step.batch.labels.begin(), step.batch.labels.end());
      }
    }
  });
  return status;
}

Result<Metrics> Trainer::Evaluate(const io::Dataset& data) {
  EMBER_ASSIGN_OR_RETURN(std::vector<float> predictions, Predict(data));
  return ComputeTaskMetrics(predictions, data.all().labels, model_->options().num_tasks);
}

Result<Metrics> Trainer::Evaluate(io::BatchSource& data) {
  std::vector<float> predictions, labels;
  EMBER_RETURN_IF_ERROR(Predict(data, &predictions, &labels));
  if (predictions.empty()) return Status::InvalidArgument("the evaluation data has no examples");
  return ComputeTaskMetrics(predictions, labels, model_->options().num_tasks);
}

}  // namespace ember::engine
