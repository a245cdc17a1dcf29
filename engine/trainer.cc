#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <utility>

#include "embedding/distinct_keys.h"
#include "embedding/sharded_table.h"
#include "engine/model_zoo.h"
#include "engine/prediction.h"
#include "engine/rank_checkpoint.h"
#include "engine/reshard_checkpoint.h"
#include "engine/training_data.h"
#include "pipeline/pipeline_parallel.h"
#include "pipeline/training_loop.h"
#include "scheduler/pipeline_partition.h"

namespace ember::engine {

Result<std::unique_ptr<Trainer>> Trainer::Create(const TrainOptions& given, int num_dense,
                                                 int num_slots, int num_tasks) {
  EMBER_RETURN_IF_ERROR(ValidateTrainOptions(given));
  TrainOptions options = given;
  // What follows from the data and the job (see TrainOptions).
  options.model.num_dense = num_dense;
  options.model.num_slots = num_slots;
  options.model.num_tasks = num_tasks;
  options.model.embedding_dim = options.table.dim;
  options.model.seed = options.seed;
  // Every parameter of the model, defaults included: what checkpoints and
  // bundles record.
  EMBER_ASSIGN_OR_RETURN(options.model, ResolveModelOptions(options.model));
  options.table.seed = options.seed;
  options.table.track_changes = !options.checkpoint.dir.empty();
  options.checkpoint.sparse_optimizer =
      embedding::SparseOptimizerName(options.table.optimizer.type);
  const int64_t ttl = options.table.ttl_steps;
  options.pipeline.evict_every_steps = ttl > 0 ? std::max<int64_t>(1, ttl / 2) : 0;
  options.pipeline.prefetch = given.pipeline.prefetch && options.table.memory_budget_bytes > 0;
  // One writer per directory: the checkpoints' and the disk tier's are
  // locked before anything in them is read, created or removed.
  // With ranks, each keeps its checkpoints in a directory of its own and
  // rank 0 commits the job's (engine/rank_checkpoint.h).
  // One process resuming a job of ranks keeps that layout, as rank 0 of 1.
  const std::string job_checkpoint_dir = options.checkpoint.dir;
  const bool ranks_layout = !job_checkpoint_dir.empty() &&
                            (options.ranks.active() || HasRanksRecord(job_checkpoint_dir));
  // A pipeline's ranks 1.. write nothing: rank 0 checkpoints for them.
  const pipeline::PipelineParallelOptions& pp = options.pipeline_parallel;
  const bool serves_pipeline = pp.active() && pp.ranks > 1 && pp.stages->rank() != 0;
  std::vector<std::unique_ptr<DirectoryLock>> locks;
  if (!job_checkpoint_dir.empty() && !serves_pipeline) {
    Result<std::vector<std::unique_ptr<DirectoryLock>>> locked =
        LockCheckpointDirectories(job_checkpoint_dir, options.ranks.rank(), ranks_layout);
    if (!locked.ok()) return locked.status().WithContext("the checkpoint directory");
    locks = *std::move(locked);
  }
  if (options.table.memory_budget_bytes > 0 && !options.table.disk_path.empty()) {
    Result<std::unique_ptr<DirectoryLock>> locked =
        DirectoryLock::Acquire(options.table.disk_path);
    if (!locked.ok()) return locked.status().WithContext("the embedding directory");
    locks.push_back(*std::move(locked));
  }
  EMBER_ASSIGN_OR_RETURN(auto table, embedding::NewEmbeddingTable(options.table));
  if (options.ranks.active()) {
    // This rank's rows in its own table, the others' behind the exchanges;
    // evaluation's lookups run between steps, on the pull communicator.
    options.pipeline.early_pulls = false;
    options.pipeline.who = "rank " + std::to_string(options.ranks.rank()) + " of " +
                           std::to_string(options.ranks.size());
    EMBER_ASSIGN_OR_RETURN(table, embedding::NewShardedTable(
                                      std::move(table), {options.ranks.pull, options.ranks.push,
                                                         options.ranks.pull}));
    // Micro-batches on every data rank: their gradients summed over the
    // ranks before each step (gradient accumulation).
    if (options.pipeline_parallel.active()) options.pipeline_parallel.data = options.ranks.dense;
  }
  Result<std::unique_ptr<DenseModel>> model = NewDenseModel(options.model);
  if (!model.ok()) {
    return model.status().WithContext("the dense model on " + options.model.device.ToString());
  }
  EMBER_RETURN_IF_ERROR((*model)->InitOptimizer(options.dense_optimizer));
  if (options.ranks.active() && options.expert_parallel) {
    EMBER_RETURN_IF_ERROR((*model)->EnableExpertParallel(options.ranks.dense));
  }
  if (ranks_layout) {
    options.checkpoint.dir = RankCheckpointDir(job_checkpoint_dir, options.ranks.rank());
  }
  std::unique_ptr<Trainer> trainer(new Trainer(options, std::move(table), *std::move(model)));
  trainer->locks_ = std::move(locks);
  trainer->job_checkpoint_dir_ = job_checkpoint_dir;
  trainer->ranks_layout_ = ranks_layout;
  if (pp.active() && (pp.ranks == 1 || pp.stages->rank() == 0)) {
    const ops::Graph& graph = trainer->model_->graph();
    EMBER_ASSIGN_OR_RETURN(
        const scheduler::PipelinePartition partition,
        pipeline::PartitionForPipeline(
            graph, pp, (options.batch_size + pp.micro_batches - 1) / pp.micro_batches));
    LOG(INFO) << "pipeline: " << pp.ranks << " ranks, " << pp.virtual_stages
              << " chunks a rank, " << pp.micro_batches << " micro-batches a step, schedule "
              << pipeline::ScheduleKindOf(pp) << "; chunks:\n"
              << scheduler::ToText(graph, partition);
    EMBER_ASSIGN_OR_RETURN(trainer->pipeline_stage_,
                           pipeline::PipelineDenseStage::Create(graph, partition, pp, options.seed,
                                                                options.dense_optimizer,
                                                                options.model.device));
    trainer->step_.set_pipeline(trainer->pipeline_stage_.get());
  }
  // Data parallel on the host: the gradients' all-reduce overlaps the backward.
  if (options.ranks.active() && options.ranks.gradients != nullptr &&
      options.dense_bucket_bytes > 0 && !pp.active() && options.model.device.is_cpu()) {
    EMBER_RETURN_IF_ERROR(
        trainer->step_.UseGradientBuckets(options.ranks.gradients, options.dense_bucket_bytes));
    if (options.ranks.rank() == 0) {
      LOG(INFO) << "dense gradients: all-reduced in "
                << trainer->step_.gradient_buckets()->buckets() << " bucket(s) of about " << options.dense_bucket_bytes / 1024
                << " KiB during the backward";
    }
  }
  if (!options.checkpoint.dir.empty()) {
    EMBER_ASSIGN_OR_RETURN(trainer->checkpointer_,
                           TrainingCheckpointer::Create(*trainer->table_, options.checkpoint));
  }
  return trainer;
}

Trainer::Trainer(const TrainOptions& options, std::unique_ptr<embedding::EmbeddingTable> table,
                 std::unique_ptr<DenseModel> model)
    : options_(options),
      table_(std::move(table)),
      model_(std::move(model)),
      step_(table_.get(), model_.get(), options.dense_optimizer, options.ranks.dense),
      arena_(options.threads) {}

Trainer::~Trainer() = default;

Status Trainer::CheckShape(const io::BatchSource& data) const {
  const ModelOptions& model = options_.model;
  if (data.num_labels() != model.num_tasks) {
    const std::string multi_task = MultiTaskModels();
    const bool hint = model.num_tasks == 1 && !multi_task.empty();
    return Status::InvalidArgument("the data has ", data.num_labels(),
                                   " labels per example, the model predicts ", model.num_tasks,
                                   hint ? " (use " + multi_task + " for multi-task data)" : "");
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
  std::ostringstream message;
  message << "embedding rows: room for " << rows << " (" << why << "), "
          << (table_->memory_bytes() - before) / (1 << 20) << " MiB, in "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
          << " s";
  // A run that shows no progress (a calibration's, a test's) says it at --v=1.
  if (options_.show_progress) {
    LOG(INFO) << message.str();
  } else {
    VLOG(1) << message.str();
  }
  return Status::OK();
}

Result<TrainReport> Trainer::Fit(const io::Dataset& train) {
  EMBER_ASSIGN_OR_RETURN(const std::unique_ptr<io::BatchSource> source,
                         NewDatasetTrainingSource(train, options_));
  return Fit(*source);
}

Result<TrainReport> Trainer::Fit(io::BatchSource& train) {
  EMBER_RETURN_IF_ERROR(CheckShape(train));
  TrainReport report;
  const io::Dataset* in_memory = train.InMemoryData();
  if (in_memory != nullptr && options_.embedding_reserve_rows == -1 &&
      options_.table.memory_budget_bytes == 0 &&
      options_.table.admission.kind == embedding::AdmissionOptions::Kind::kNone) {
    embedding::DistinctKeyCounter distinct;
    distinct.Add(in_memory->all().keys);
    const int64_t rows = distinct.Estimate() * 51 / 50;
    const Status status = ReserveRows(rows, "the training data's distinct keys + 2%");
    if (status.ok()) {
      report.reserved_embedding_rows = rows;
    } else {
      LOG(WARNING) << status << "; rows are made as they come";
    }
  }
  if (options_.embedding_reserve_rows > 0) {
    EMBER_RETURN_IF_ERROR(ReserveRows(options_.embedding_reserve_rows, "--embedding_reserve_rows"));
    report.reserved_embedding_rows = options_.embedding_reserve_rows;
  }
  const int64_t skip = std::exchange(skip_batches_, 0);
  const std::string resume_position = std::exchange(resume_position_, std::string());
  bool exhausted = false;
  if (skip > 0) {
    EMBER_RETURN_IF_ERROR(SkipTrainedBatches(train, skip, resume_position, &exhausted));
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
    report.already_finished = true;
    return report;
  }
  TrainingProgress progress(options_.show_progress, total_steps, options_.timing_warmup_steps,
                            table_.get(), options_.table.memory_budget_bytes > 0, &report);
  pipeline::TrainingLoopHooks hooks;
  hooks.go_on = [&](int64_t trained) {
    if (options_.stop_requested != nullptr && options_.stop_requested->load()) {
      report.interrupted = true;
      return false;
    }
    return options_.max_steps == 0 || trained < max_steps;
  };
  const auto checkpoint_due = [&](int64_t step) {
    const int64_t every = options_.checkpoint.every_steps;
    return checkpointer_ != nullptr && every > 0 && step > 0 && step % every == 0;
  };
  // Evaluations: every eval_every_steps steps, and at the end of every epoch
  // (the source's batches over the epochs; unknown: none).
  const bool evaluates = static_cast<bool>(options_.evaluate);
  const int64_t estimated = train.EstimatedBatches();
  const int64_t steps_per_epoch =
      options_.eval_every_epoch && estimated > 0 ? std::max<int64_t>(1, estimated / options_.epochs)
                                                 : 0;
  if (evaluates && options_.eval_every_epoch && steps_per_epoch == 0) {
    LOG(WARNING) << "evaluation every epoch: the training data does not say how many steps an "
                 << "epoch has; evaluating only at the end";
  }
  const auto eval_due = [&](int64_t step) {
    if (!evaluates || step <= 0) return false;
    const int64_t every = options_.eval_every_steps;
    return (every > 0 && step % every == 0) || (steps_per_epoch > 0 && step % steps_per_epoch == 0);
  };
  const auto evaluate = [&](int64_t step) -> Status {
    const auto start = std::chrono::steady_clock::now();
    TraceSpan span(options_.pipeline.tracer, "evaluation", "evaluation", step);
    EvalPoint point;
    point.step = step;
    point.examples = report.examples;
    point.train_loss = progress.TakeIntervalLoss();
    const double seconds = progress.TrainSeconds();
    point.samples_per_sec = seconds > 0 ? report.examples / seconds : 0.0;
    Result<Metrics> metrics = options_.evaluate();
    if (!metrics.ok()) {
      return metrics.status().WithContext("evaluating after step " + std::to_string(step));
    }
    point.test = *metrics;
    report.history.push_back(point);
    report.eval_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    LOG(INFO) << "evaluation after step " << step << " (" << point.examples
              << " examples): train loss " << point.train_loss << ", test AUC " << point.test.auc
              << ", test logloss " << point.test.logloss << ", "
              << static_cast<int64_t>(point.samples_per_sec) << " samples/s";
    return Status::OK();
  };
  hooks.barrier_due = [&](int64_t step) { return checkpoint_due(step) || eval_due(step); };
  hooks.at_barrier = [&](int64_t step, const std::string& position) {
    if (checkpoint_due(step)) EMBER_RETURN_IF_ERROR(SaveCheckpoint(step, position, &report));
    if (eval_due(step)) EMBER_RETURN_IF_ERROR(evaluate(step));
    return Status::OK();
  };
  hooks.track_position = checkpointer_ != nullptr;
  hooks.done = [&](pipeline::StepState& s) { progress.Done(s); };
  pipeline::TrainingLoopResult loop;
  report.pipelined = options_.pipeline.pipelined;
  EMBER_RETURN_IF_ERROR(
      (report.pipelined ? pipeline::RunPipelinedTraining : pipeline::RunSequentialTraining)(
          step_, train, arena_, job_steps_, options_.pipeline, hooks, &loop));
  report.stage_times = loop.times;
  report.stage_threads = loop.threads;
  report.staleness = loop.staleness;
  report.stalls = loop.stalls;
  if (report.steps == 0 && !report.interrupted && skip == 0) {
    return Status::InvalidArgument("the training data has no examples");
  }
  if (report.steps == 0 && !report.interrupted) {
    // The source sought past the checkpoint's batches and found its end.
    LOG(INFO) << "the checkpoint of step " << skip << " had finished training";
    report.already_finished = true;
  }
  job_steps_ += report.steps;
  if (pipeline_stage_) EMBER_RETURN_IF_ERROR(pipeline_stage_->CopyParametersTo(*model_));
  // The last point of the history: the trained model (unless the last
  // barrier evaluated it).
  if (evaluates && report.steps > 0 &&
      (report.history.empty() || report.history.back().step != job_steps_)) {
    EMBER_RETURN_IF_ERROR(evaluate(job_steps_));
  }
  // The final checkpoint: training finished, or stopped by a signal.
  if (checkpointer_ != nullptr && report.steps > 0 && report.last_checkpoint_step != job_steps_) {
    EMBER_RETURN_IF_ERROR(SaveCheckpoint(job_steps_, loop.end_position, &report));
  }
  progress.Finish();
  return report;
}

Status Trainer::ServePipeline() {
  const pipeline::PipelineParallelOptions& pp = options_.pipeline_parallel;
  if (!pp.active() || pp.ranks == 1 || pp.stages->rank() == 0) {
    return Status::FailedPrecondition("only ranks 1.. of a pipeline of ranks serve it");
  }
  return pipeline::ServePipelineStages(model_->graph(), pp, options_.seed,
                                       options_.dense_optimizer, options_.model.device);
}

Status Trainer::FinishPipeline() {
  return pipeline_stage_ ? pipeline_stage_->Finish() : Status::OK();
}

}  // namespace ember::engine
