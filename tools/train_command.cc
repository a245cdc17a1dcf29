// `ember train`: trains a CTR model and reports test AUC and logloss.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/file.h"
#include "core/json.h"
#include "core/trace.h"
#include "engine/job.h"
#include "engine/training_data.h"
#include "engine/model_hash.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "ops/precision.h"
#include "scheduler/layout.h"
#include "scheduler/plan.h"
#include "scheduler/resource_graph.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/job_flags.h"
#include "tools/plan_flags.h"
#include "tools/run_curves.h"
#include "tools/serving_flags.h"
#include "tools/stop_signals.h"
#include "tools/train_data.h"
#include "tools/train_report.h"
#include "tools/train_flags.h"

namespace ember::tools {

Result<engine::TrainOptions> TrainOptionsFromFlags() {
  engine::TrainOptions options;
  // The trainer sets the data's shape (num_dense, num_slots, num_tasks) and
  // embedding_dim from the data and the table.
  EMBER_ASSIGN_OR_RETURN(options.model, ModelOptionsFromFlags());
  options.table.dim = FLAGS_embedding_dim;
  options.batch_size = FLAGS_batch_size;
  options.epochs = FLAGS_epochs;
  options.max_steps = FLAGS_max_steps;
  options.timing_warmup_steps = FLAGS_timing_warmup_steps;
  options.threads = FLAGS_threads;
  options.seed = FLAGS_seed;
  options.shuffle = FLAGS_shuffle;
  options.dense_bucket_bytes = FLAGS_dense_bucket_kib * 1024;
  Result<embedding::SparseOptimizer> sparse =
      embedding::ParseSparseOptimizer(FLAGS_sparse_optimizer);
  if (!sparse.ok()) return sparse.status().WithContext("--sparse_optimizer");
  options.table.optimizer.type = *sparse;
  options.table.optimizer.learning_rate = static_cast<float>(FLAGS_sparse_lr);
  options.table.optimizer.ftrl_beta = static_cast<float>(FLAGS_ftrl_beta);
  options.table.optimizer.l1 = static_cast<float>(FLAGS_ftrl_l1);
  options.table.optimizer.l2 = static_cast<float>(FLAGS_ftrl_l2);
  using Admission = embedding::AdmissionOptions::Kind;
  if (FLAGS_admission == "none") {
    options.table.admission.kind = Admission::kNone;
  } else if (FLAGS_admission == "frequency") {
    options.table.admission.kind = Admission::kFrequency;
  } else if (FLAGS_admission == "probability") {
    options.table.admission.kind = Admission::kProbability;
  } else {
    return Status::InvalidArgument("--admission=", FLAGS_admission,
                                   " is not known; use none, frequency or probability");
  }
  options.table.admission.min_count = FLAGS_admission_min_count;
  options.table.admission.probability = FLAGS_admission_probability;
  options.table.ttl_steps = FLAGS_embedding_ttl_steps;
  EMBER_ASSIGN_OR_RETURN(options.table.memory_budget_bytes, EmbeddingMemoryBudgetFromFlags());
  {
    Result<embedding::EmbeddingTableOptions::EvictionPolicy> policy =
        embedding::ParseEvictionPolicy(FLAGS_embedding_eviction);
    if (!policy.ok()) {
      return Status::InvalidArgument("--embedding_eviction=", FLAGS_embedding_eviction,
                                     " is not known; use lru or lfu");
    }
    options.table.eviction_policy = *policy;
  }
  {
    Result<embedding::WeightStorage> storage = embedding::ParseWeightStorage(FLAGS_embedding_weights);
    if (!storage.ok()) return storage.status().WithContext("--embedding_weights");
    options.table.weight_storage = *storage;
  }
  options.table.disk_path = FLAGS_embedding_dir;
  options.embedding_reserve_rows = FLAGS_embedding_reserve_rows;
  options.pipeline.prefetch = FLAGS_prefetch;
  options.pipeline.read_ahead = FLAGS_read_ahead;
  Result<ops::DenseOptimizer> dense = ops::ParseDenseOptimizer(FLAGS_dense_optimizer);
  if (!dense.ok()) return dense.status().WithContext("--dense_optimizer");
  options.dense_optimizer.type = *dense;
  options.dense_optimizer.learning_rate = static_cast<float>(FLAGS_dense_lr);
  if (FLAGS_pipeline != "on" && FLAGS_pipeline != "off") {
    return Status::InvalidArgument("--pipeline=", FLAGS_pipeline, " is not known; use on or off");
  }
  options.pipeline.pipelined = FLAGS_pipeline == "on";
  Result<ops::ComputePrecision> precision = ops::ParseComputePrecision(FLAGS_dense_precision);
  if (!precision.ok()) return precision.status().WithContext("--dense_precision");
  options.model.precision = *precision;
  options.model.cpu_row_shards = FLAGS_dense_row_shards;
  if (FLAGS_dense_device != "auto") {
    Result<Device> device = ParseDevice(FLAGS_dense_device);
    if (!device.ok()) return device.status().WithContext("--dense_device");
    options.model.device = *device;
  }
  options.pipeline.depth = FLAGS_pipeline_depth;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> stage_threads,
                         ParseWidths("stage_threads", FLAGS_stage_threads));
  EMBER_ASSIGN_OR_RETURN(options.pipeline.stage_threads,
                         pipeline::WorkerStageThreads(stage_threads));
  options.pipeline.max_staleness = FLAGS_max_staleness;
  options.pipeline.early_pulls = FLAGS_early_pulls;
  options.pipeline.watchdog_seconds = FLAGS_watchdog_seconds;
  options.eval_every_steps = FLAGS_eval_every_steps;
  options.eval_every_epoch = FLAGS_eval_every_epoch;
  // The ranks and their communicators come with the job's ranks (engine::Job).
  options.pipeline_parallel.virtual_stages = FLAGS_virtual_stages;
  options.pipeline_parallel.micro_batches = FLAGS_micro_batches;
  options.pipeline_parallel.schedule = FLAGS_pipeline_schedule;
  options.pipeline_parallel.group = FLAGS_pipeline_group;
  EMBER_RETURN_IF_ERROR(engine::ValidateTrainOptions(options));
  return options;
}

namespace {

// Whether the metrics JSON at `path` is that of a run that finished the job
// at step `step`: not interrupted, and ending there.
bool MetricsOfJobFinishedAt(const std::string& path, int64_t step) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  Result<Json> json = ParseJsonText(*text);
  if (!json.ok() || !json->is_object()) return false;
  const auto train = json->find("train");
  if (train == json->end() || !train->is_object()) return false;
  const Json& t = *train;
  if (!t.contains("interrupted") || t["interrupted"] != false || !t.contains("steps") ||
      !t["steps"].is_number_integer() || !t.contains("resumed_from_step") ||
      !t["resumed_from_step"].is_number_integer()) {
    return false;
  }
  return t["steps"].get<int64_t>() + t["resumed_from_step"].get<int64_t>() == step;
}

// The files whose flags configure a training job.
const std::vector<std::string> kTrainFlagFiles = {"tools/train_flags.cc", "tools/model_flags.cc",
                                                  "tools/format_flags.cc"};

// SIGINT/SIGTERM during training (tools/stop_signals.h): the first asks it
// to stop after the step in progress (the checkpoint, summary and evaluation
// still run); a second one exits at once.
std::atomic<bool> g_stop_requested{false};

// The job the flags describe, one options value: what to train, where
// its outputs go, how it spreads over the ranks mpirun started.
Result<engine::JobOptions> JobOptionsFromFlags() {
  engine::JobOptions job;
  EMBER_ASSIGN_OR_RETURN(job.train, TrainOptionsFromFlags());
  job.train.checkpoint.dir = FLAGS_checkpoint_dir;
  job.train.checkpoint.every_steps = FLAGS_checkpoint_every_steps;
  job.train.expert_parallel = FLAGS_expert_parallel;
  job.expert_parallel_chosen = !gflags::GetCommandLineFlagInfoOrDie("expert_parallel").is_default;
  job.outputs = {FLAGS_metrics_out, FLAGS_trace_file, FLAGS_plot_out, FLAGS_export_dir,
                 FLAGS_model_hash};
  job.resume = FLAGS_resume;
  job.pipeline_parallel = FLAGS_pipeline_parallel;
  if (!FLAGS_mesh.empty()) {
    EMBER_ASSIGN_OR_RETURN(job.mesh, scheduler::ParseMesh(FLAGS_mesh));
  }
  EMBER_ASSIGN_OR_RETURN(job.tables, scheduler::ParseTableShardings(FLAGS_table_sharding));
  job.rank_timeout_seconds = FLAGS_rank_timeout_seconds;
  job.data_sharded = FLAGS_num_shards > 1 || FLAGS_shard_index > 0;
  job.stop_requested = &g_stop_requested;
  return job;
}

// Resumes the job's newest checkpoint if it has one (the flags that decide
// its result checked against the recorded ones), or records the job for a
// fresh one: its flags (a flagfile to run it again, and the resume check)
// and its options (engine/job_record.h, which ember export reads). Returns the step resumed (-1: none).
Result<int64_t> ResumeOrRecord(engine::Job& job, const Data& data) {
  const std::string& dir = job.options().train.checkpoint.dir;
  if (dir.empty()) return int64_t{-1};
  EMBER_ASSIGN_OR_RETURN(const int64_t newest, job.NewestCheckpointStep());
  if (newest >= 0 && job.options().resume) {
    EMBER_RETURN_IF_ERROR(CheckResumeFlags(dir, kTrainFlagFiles));
  }
  EMBER_ASSIGN_OR_RETURN(const int64_t step, job.Resume());
  if (step < 0 && job.reports()) {
    // One record for the job (with ranks: rank 0's, in the job's directory).
    EMBER_RETURN_IF_ERROR(RecordJobFlags(dir, kTrainFlagFiles));
    const bool columnar = data.train_source.format == "columnar";
    EMBER_RETURN_IF_ERROR(
        RecordJobInput(dir, {data.num_dense, data.num_slots, data.num_labels, columnar}));
    EMBER_ASSIGN_OR_RETURN(const io::FormatSpec input, FormatSpecFromFlags());
    engine::JobRecord record = engine::JobRecordOf(job.trainer().options(), input, columnar);
    record.layout = job.layout();
    EMBER_RETURN_IF_ERROR(engine::WriteJobRecord(dir, record));
  }
  return step;
}

// The held-out data as each evaluation during training reads it: the test
// set in memory, or its stream opened afresh.
engine::OpenEvaluationData EvaluationData(const Data& data, int64_t batch_size) {
  return [&data, batch_size]() -> Result<std::unique_ptr<io::BatchSource>> {
    if (!data.test_stream) {
      io::DatasetBatchSourceOptions batches;
      batches.batch_size = batch_size;
      return std::unique_ptr<io::BatchSource>(
          std::make_unique<io::DatasetBatchSource>(data.test, batches));
    }
    Result<InputStream> test = OpenInputStream(data.test_paths, data.test_options);
    if (!test.ok()) return test.status().WithContext("--test_data");
    return std::unique_ptr<io::BatchSource>(std::move(test->reader));
  };
}

// Logs what the run did beyond its summary: stages, staleness, checkpoints,
// the table, the experts and the ranks' exchanges.
void LogRun(const engine::Job& job, const engine::TrainReport& report) {
  LOG(INFO) << "stages: " << StageSummary(report.stage_times, report.train_seconds);
  // Reading runs on the trainer's own thread.
  std::string threads;
  for (pipeline::Stage s : pipeline::kAllStages) {
    if (s == pipeline::Stage::kRead) continue;
    threads += (threads.empty() ? "" : ", ") + std::string(pipeline::StageName(s)) + " " +
               std::to_string(report.stage_threads[s]);
  }
  LOG(INFO) << "stage threads: " << threads;
  if (report.pipelined) {
    LOG(INFO) << "pipeline: staleness of pulled rows " << report.staleness.ToString() << " (mean "
              << report.staleness.mean() << "); " << report.staleness.waits
              << " pulls waited for pushes, " << report.staleness.wait_seconds << " s in all";
  }
  if (report.interrupted) {
    LOG(WARNING) << "training stopped by a signal after " << report.steps << " steps";
  }
  if (report.checkpoints_written > 0) {
    LOG(INFO) << "checkpoints: " << report.checkpoints_written << " written, the last of step "
              << report.last_checkpoint_step << " in " << job.options().train.checkpoint.dir;
  }
  LOG(INFO) << "embeddings: " << EmbeddingSummary(report.embedding, report.train_seconds);
  const std::string who =
      job.data_parallel() ? " (rank " + std::to_string(job.rank()) + ")" : std::string();
  if (report.moe_choices > 0) {
    // With ranks, each rank's own batches.
    LOG(INFO) << "moe" << who << ": "
              << report.moe_dropped_examples / static_cast<double>(report.steps)
              << " examples a step lost a choice to a full expert ("
              << report.moe_dropped_choices << " of " << report.moe_choices
              << " choices dropped); load-balancing loss " << report.moe_aux_loss_sum / report.steps
              << " a step (1 a layer when balanced)";
    if (report.moe_exchanged_bytes > 0) {
      LOG(INFO) << "moe" << who << ": experts divided among the ranks; the expert layers sent "
                << report.moe_exchanged_bytes / report.steps << " bytes a step, exchanging for "
                << 1e3 * report.moe_exchange_seconds / report.steps << " ms a step";
    }
  }
  if (job.data_parallel() && report.steps > 0) {
    const embedding::TableStats& t = report.embedding;
    LOG(INFO) << "exchanges of rank " << job.rank() << ": " << t.exchanged_bytes / report.steps
              << " bytes a step (the least possible: " << t.exchanged_bytes_minimum / report.steps
              << ")";
  }
}

// Prints the run's summary: training, the test metrics, the planted
// model's ceiling, the input.
void PrintSummary(const engine::TrainReport& report, const engine::Metrics& test,
                  const Data& data, int stopped_by) {
  std::string steady;
  if (FLAGS_timing_warmup_steps > 0 && report.steady_samples_per_sec > 0) {
    steady = " (" + std::to_string(std::llround(report.steady_samples_per_sec)) +
             " after the first " + std::to_string(FLAGS_timing_warmup_steps) + " steps)";
  }
  // A run a signal stopped says so in its summary, not only in the log.
  const std::string interrupted =
      stopped_by != 0 ? "interrupted (signal " + std::to_string(stopped_by) + ") after " : "";
  std::printf("train: %s%lld steps, %lld examples, %.0f samples/s%s, last epoch loss %.4f\n",
              interrupted.c_str(), static_cast<long long>(report.steps),
              static_cast<long long>(report.examples),
              report.samples_per_sec, steady.c_str(), report.last_epoch_loss);
  PrintTestMetrics(test);
  if (data.ceiling_auc.size() == 1 ||
      (data.ceiling_auc.size() > 1 && data.ceiling_auc.size() != test.tasks.size())) {
    std::printf("planted-model ceiling AUC %.4f (gap %.4f)\n", data.ceiling_auc[0],
                data.ceiling_auc[0] - test.auc);
  } else {
    for (size_t t = 0; t < data.ceiling_auc.size(); ++t) {
      std::printf("planted-model ceiling AUC, task %zu: %.4f (gap %.4f)\n", t,
                  data.ceiling_auc[t], data.ceiling_auc[t] - test.tasks[t].auc);
    }
  }
  std::printf("input: train data %s\n", SourceSummary(data.train_source).c_str());
  if (data.test_source) {
    std::printf("input: test data %s\n", SourceSummary(*data.test_source).c_str());
  }
  std::fflush(stdout);
}

// "0123456789abcdef": the layout's hash as the ranks compare it.
std::string LayoutHashText(const scheduler::Layout& layout) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(layout.Hash()));
  return text;
}

// Writes the run's curves and metrics (rank 0).
Status WriteReports(const engine::Job& job, const engine::TrainReport& report,
                    const engine::Metrics& test, const Data& data, const std::string& model_hash) {
  const engine::JobOutputs& out = job.options().outputs;
  if (!out.plot_out.empty()) {
    const std::string svg = RunCurvesSvg(report.history, job.options().train.model.name);
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(out.plot_out, svg).WithContext("--plot_out"));
    LOG(INFO) << "wrote the run's curves to " << out.plot_out;
  }
  if (out.metrics_out.empty()) return Status::OK();
  Json test_json = TestMetricsJson(test);
  if (!data.ceiling_auc.empty()) test_json["ceiling_auc"] = data.ceiling_auc[0];
  if (data.ceiling_auc.size() > 1 && !test.tasks.empty()) {
    test_json["task_ceiling_auc"] = data.ceiling_auc;
  }
  Json train_json = TrainReportJson(report, FLAGS_timing_warmup_steps);
  if (!model_hash.empty()) train_json["model_hash"] = model_hash;
  Json input_json = {{"train", SourceJson(data.train_source)}};
  if (data.test_source) input_json["test"] = SourceJson(*data.test_source);
  const scheduler::Layout& layout = job.layout();
  const Json root = {{"model", job.options().train.model.name},
                     {"world", job.ranks()},
                     {"mesh", layout.mesh},
                     {"layout", layout.OneLine(static_cast<int>(data.num_slots))},
                     {"layout_hash", LayoutHashText(layout)},
                     {"threads_per_rank", job.options().train.threads},
                     {"test", std::move(test_json)},
                     {"train", std::move(train_json)},
                     {"input", std::move(input_json)}};
  return WriteFileAtomic(out.metrics_out, JsonText(root, 2) + "\n").WithContext("--metrics_out");
}

// Whether a job that had finished already has the outputs of the run that
// finished it (see below); otherwise they are written again now.
bool FinishedJobHasItsOutputs(const engine::Job& job, const engine::TrainReport& report) {
  // A finished job's metrics, trace and plot are those of the run that
  // finished it, unless that run was stopped between its last checkpoint and
  // writing them (--metrics_out is then missing, or an earlier run's: one
  // stopped by a signal, or one that ended at an earlier step).
  const std::string& metrics = job.options().outputs.metrics_out;
  const bool written = metrics.empty() || MetricsOfJobFinishedAt(metrics, report.resumed_from_step);
  if (!written) {
    LOG(WARNING) << "the job in --checkpoint_dir=" << job.options().train.checkpoint.dir
                 << " had finished training, but --metrics_out=" << metrics
                 << " does not hold the metrics of the run that finished it (that run stopped "
                    "first): writing them from the checkpoint";
  }
  return written;
}

// `ember train`: the job's steps, in order.
Status Train(engine::Job& job, int* stopped_by) {
  std::vector<engine::JobRanks::Setting> settings;
  for (const EffectiveFlag& flag : EffectiveFlags(kTrainFlagFiles)) {
    settings.push_back({flag.name, flag.value});
  }
  // The layout follows from the flags; its hash is what a planner's layout
  // will be checked by.
  settings.push_back({"layout", LayoutHashText(job.layout())});
  EMBER_RETURN_IF_ERROR(job.CheckSameSettings(settings));
  // Fail now rather than after hours of training.
  EMBER_RETURN_IF_ERROR(job.CheckOutputs());
  // --plan=auto|off|FILE (tools/plan_flags.h) sets threads and pipeline knobs.
  EMBER_ASSIGN_OR_RETURN(const scheduler::Plan plan, ApplyTrainPlan(job.mutable_train_options()));
  // A pipeline's stages read no data: rank 0 tells them the examples' shape.
  if (job.serves_pipeline()) return job.ServePipeline();

  TempDir temp_dir;
  const engine::TrainOptions& options = job.options().train;
  EMBER_ASSIGN_OR_RETURN(Data data,
                         LoadData(&temp_dir, options, plan.threads,
                                  job.data_parallel() ? Shard{job.ranks(), job.rank()}
                                                      : Shard{FLAGS_num_shards, FLAGS_shard_index},
                                  job.data_parallel()));
  if (FLAGS_eval_every_steps > 0 || FLAGS_eval_every_epoch || !FLAGS_plot_out.empty()) {
    job.EvaluateDuringTraining(EvaluationData(data, options.eval_batch_size));
  }
  EMBER_RETURN_IF_ERROR(job.Create({data.num_dense, data.num_slots, data.num_labels}));
  if (job.reports()) LOG(INFO) << "layout: " << job.layout().OneLine(data.num_slots);
  EMBER_RETURN_IF_ERROR(ResumeOrRecord(job, data).status());
  // One path for the training data: a stream, or the examples in memory.
  std::unique_ptr<io::BatchSource> in_memory;
  if (data.train_is_share) {
    const io::ExampleShape shape{data.num_dense, data.num_slots, data.num_labels};
    EMBER_ASSIGN_OR_RETURN(in_memory, engine::NewShardTrainingSource(
                                          std::move(data.train), std::move(data.train_indices),
                                          data.train_examples, shape, job.trainer().options()));
  } else if (!data.train_stream) {
    EMBER_ASSIGN_OR_RETURN(in_memory,
                           engine::NewDatasetTrainingSource(data.train, job.trainer().options()));
  }
  io::BatchSource& train = data.train_stream ? *data.train_elastic : *in_memory;
  // A first SIGINT/SIGTERM ends training after the batches in flight.
  Result<engine::TrainReport> trained = [&] {
    StopOnSignal stop_on_signal(&g_stop_requested);
    Result<engine::TrainReport> result = job.Train(train);
    *stopped_by = stop_on_signal.signal();
    return result;
  }();
  if (data.train_stream) {
    data.train_source.stream = data.train_stream->stats();
    data.train_source.bad_lines = data.train_source.stream->bad_lines;
  }
  EMBER_ASSIGN_OR_RETURN(const engine::TrainReport report, std::move(trained));
  // The whole model's hash and bundle; a job that had finished still says
  // its hash: that of its checkpoint, as restored (on another number of
  // ranks, resharded).
  const engine::JobOutputs& out = job.options().outputs;
  if (out.model_hash || (!out.export_dir.empty() && !job.exports_shards())) {
    EMBER_RETURN_IF_ERROR(job.Gather());
  }
  std::string model_hash;
  if (out.model_hash && job.reports()) {
    EMBER_ASSIGN_OR_RETURN(model_hash, job.ModelHash());
    std::printf("model hash: %s\n", model_hash.c_str());
  }
  if (report.already_finished && FinishedJobHasItsOutputs(job, report)) {
    std::printf("ember train: the job in --checkpoint_dir=%s had finished training at step %lld; "
                "nothing to train, its outputs are left as they were (raise --epochs or "
                "--max_steps to train on)\n",
                options.checkpoint.dir.c_str(), static_cast<long long>(report.resumed_from_step));
    std::fflush(stdout);
    return Status::OK();
  }
  LogRun(job, report);
  Result<engine::Metrics> evaluated = data.test_stream
                                          ? job.trainer().Evaluate(*data.test_stream)
                                          : job.trainer().Evaluate(data.test);
  if (data.test_stream) {
    data.test_source->stream = data.test_stream->stats();
    data.test_source->bad_lines = data.test_source->stream->bad_lines;
  }
  if (!evaluated.ok()) return evaluated.status().WithContext("--test_data");
  // Every rank took part in the evaluation; rank 0 reports and writes (with
  // ranks, every rank writes its rows of the bundle).
  if (job.reports()) PrintSummary(report, *evaluated, data, *stopped_by);
  if (!out.export_dir.empty()) {
    EMBER_ASSIGN_OR_RETURN(const io::FormatSpec input, FormatSpecFromFlags());
    EMBER_RETURN_IF_ERROR(job.Export(input, data.train_source.format == "columnar",
                                     report.resumed_from_step + report.steps));
  }
  if (!job.reports()) return job.WriteTrace();
  EMBER_RETURN_IF_ERROR(job.WriteTrace());
  return WriteReports(job, report, *evaluated, data, model_hash);
}

}  // namespace

int RunTrain() {
  int stopped_by = 0;
  LogEffectiveFlags(kTrainFlagFiles);
  Result<engine::JobOptions> options = JobOptionsFromFlags();
  Result<std::unique_ptr<engine::Job>> job =
      options.ok() ? engine::Job::Join(*std::move(options)) : options.status();
  const Status status = job.ok() ? Train(**job, &stopped_by) : job.status();
  if (!status.ok()) {
    // The other ranks' exchanges with this one fail at once, naming it.
    if (job.ok()) (*job)->Abort(status);
    const std::string who = job.ok() ? (*job)->WhoForMessages() : "";
    std::fprintf(stderr, "ember train%s: %s\n", who.c_str(), status.ToString().c_str());
    return ExitCodeFor(status);
  }
  job->reset();
  const Status finished = engine::Job::Finish();
  if (!finished.ok()) {
    std::fprintf(stderr, "ember train: %s\n", finished.ToString().c_str());
    return ExitCodeFor(finished);
  }
  // A job stopped by a signal has not finished, though everything it did is
  // saved: a scheduler that sees a failure restarts it (with --resume).
  return stopped_by != 0 ? kExitSignalBase + stopped_by : kExitOk;
}

}  // namespace ember::tools
