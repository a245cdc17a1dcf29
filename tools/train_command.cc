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
#include "engine/bundle.h"
#include "engine/model_hash.h"
#include "engine/model_zoo.h"
#include "engine/trainer.h"
#include "ops/precision.h"
#include "scheduler/plan.h"
#include "scheduler/resource_graph.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/job_flags.h"
#include "tools/job_ranks.h"
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
  EMBER_ASSIGN_OR_RETURN(options.table.optimizer.type,
                         embedding::ParseSparseOptimizer(FLAGS_sparse_optimizer));
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
  if (!FLAGS_embedding_memory_budget.empty()) {
    EMBER_ASSIGN_OR_RETURN(options.table.memory_budget_bytes,
                           ParseByteSize("embedding_memory_budget", FLAGS_embedding_memory_budget));
    if (options.table.memory_budget_bytes == 0) {
      return Status::InvalidArgument("--embedding_memory_budget must be > 0 when set");
    }
  }
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
  EMBER_ASSIGN_OR_RETURN(options.dense_optimizer.type,
                         ops::ParseDenseOptimizer(FLAGS_dense_optimizer));
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
  // The ranks and their communicators come with the job's ranks (ApplyRanks).
  options.pipeline_parallel.virtual_stages = FLAGS_virtual_stages;
  options.pipeline_parallel.micro_batches = FLAGS_micro_batches;
  options.pipeline_parallel.schedule = FLAGS_pipeline_schedule;
  EMBER_RETURN_IF_ERROR(engine::ValidateTrainOptions(options));
  return options;
}

namespace {

// Whether the metrics JSON at `path` is that of a run that finished the job
// at step `step`: not interrupted, and ending there.
bool MetricsOfJobFinishedAt(const std::string& path, int64_t step) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return false;
  Result<JsonValue> json = ParseJson(*text);
  if (!json.ok()) return false;
  const JsonValue* train = json->Find("train");
  if (train == nullptr) return false;
  const JsonValue* interrupted = train->Find("interrupted");
  const JsonValue* steps = train->Find("steps");
  const JsonValue* resumed = train->Find("resumed_from_step");
  if (interrupted == nullptr || interrupted->boolean || steps == nullptr || resumed == nullptr) {
    return false;
  }
  return std::strtoll(steps->text.c_str(), nullptr, 10) +
             std::strtoll(resumed->text.c_str(), nullptr, 10) ==
         step;
}

// The files whose flags configure a training job.
const std::vector<std::string> kTrainFlagFiles = {"tools/train_flags.cc",
                                                  "tools/format_flags.cc"};

// SIGINT/SIGTERM during training (tools/stop_signals.h): the first asks it
// to stop after the step in progress (the checkpoint, summary and evaluation
// still run); a second one exits at once.
std::atomic<bool> g_stop_requested{false};

// Fails, naming `flag`, unless an output can be written at `path`: its
// directory exists and takes a new file of the name the atomic writer gives
// it first (<path>.tmp.<pid>.<n>; a name too long, a read-only or full
// file system fail here rather than after training).
Status CheckOutputPath(const char* flag, const std::string& path) {
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(path).WithContext(flag));
  const std::string probe = path + ".tmp." + std::to_string(::getpid()) + ".check";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::InvalidArgument(flag, "=", path, ": cannot create a file there (",
                                   std::strerror(errno), ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

// --export_dir: the serving bundle of the trained model, with the input
// format training read (`source_format`: "columnar" or a text format).
Status ExportTrained(engine::Trainer& trainer, embedding::EmbeddingTable& table,
                     const engine::TrainReport& report, const std::string& source_format) {
  EMBER_ASSIGN_OR_RETURN(const io::FormatSpec input, FormatSpecFromFlags());
  const engine::BundleConfig config =
      engine::BundleConfigOf(trainer.options(), input, source_format == "columnar",
                             report.resumed_from_step + report.steps);
  EMBER_RETURN_IF_ERROR(engine::WriteBundle(FLAGS_export_dir, config, trainer.model(), table)
                            .WithContext("--export_dir"));
  LOG(INFO) << "wrote the serving bundle of step " << config.step << " to " << FLAGS_export_dir;
  return Status::OK();
}

// With a dense model on a GPU under mpirun: one GPU per rank of a host (its
// local rank among the host's ranks), and the dense stage's communicator
// over NCCL (the data-parallel gradients' all-reduce, or a pipeline's
// activations and gradients).
Status UseLocalGpu(JobRanks& ranks, engine::TrainOptions* options) {
  if (!options->model.device.is_cuda()) return Status::OK();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int devices = CudaDeviceCount();
  if (devices > 0) {
    options->model.device = Device::Cuda((local != nullptr ? std::atoi(local) : 0) % devices);
  }
  return ranks.UseNcclForDense(options->model.device.index, FLAGS_rank_timeout_seconds);
}

// Under mpirun: each rank trains its shard of the data with its own rows,
// in its own directories; rank 0 reports. Refuses what does not apply.
Status ApplyRanks(JobRanks& ranks, engine::TrainOptions* options) {
  if (FLAGS_pipeline_parallel != ranks.size()) {
    if (FLAGS_pipeline_parallel > 1) {
      return Status::InvalidArgument(
          "--pipeline_parallel=", FLAGS_pipeline_parallel, " splits the dense model over that "
          "many ranks, and this job has ", ranks.size(), ": run it under mpirun -np ",
          FLAGS_pipeline_parallel, " (data parallelism across pipelines is not supported yet)");
    }
  } else if (ranks.several()) {
    // A pipeline: rank 0 trains as a job of one rank (all the data, the
    // whole table) whose dense stage runs the pipeline; the others serve.
    EMBER_RETURN_IF_ERROR(UseLocalGpu(ranks, options));
    options->pipeline_parallel.ranks = ranks.size();
    options->pipeline_parallel.stages = ranks.pipeline_stages();
    options->pipeline_parallel.commands = ranks.pipeline_commands();
    options->show_progress = options->show_progress && ranks.rank() == 0;
    if (!FLAGS_trace_file.empty()) FLAGS_trace_file += ".rank-" + std::to_string(ranks.rank());
    return Status::OK();
  }
  if (!ranks.several()) return Status::OK();
  if (FLAGS_num_shards > 1 || FLAGS_shard_index > 0) {
    return Status::InvalidArgument(
        "--num_shards/--shard_index: under mpirun every rank reads shard <rank> of <ranks> of "
        "--train_data by itself; drop these flags");
  }
  EMBER_RETURN_IF_ERROR(UseLocalGpu(ranks, options));
  options->ranks = ranks.group();
  options->expert_parallel = FLAGS_expert_parallel;
  if (FLAGS_expert_parallel && options->model.name == "moe" &&
      options->model.num_experts % ranks.size() != 0 &&
      gflags::GetCommandLineFlagInfoOrDie("expert_parallel").is_default) {
    LOG(WARNING) << "--expert_parallel: off, --num_experts=" << options->model.num_experts
                 << " does not divide among " << ranks.size()
                 << " ranks; every rank computes every expert";
    options->expert_parallel = false;
  }
  options->show_progress = options->show_progress && ranks.rank() == 0;
  if (!options->table.disk_path.empty()) {
    options->table.disk_path += "/rank-" + std::to_string(ranks.rank());
  }
  if (!FLAGS_trace_file.empty()) FLAGS_trace_file += ".rank-" + std::to_string(ranks.rank());
  return Status::OK();
}

Status Train(JobRanks& ranks, int* stopped_by) {
  LogEffectiveFlags(kTrainFlagFiles);
  EMBER_RETURN_IF_ERROR(ranks.CheckSameFlags(EffectiveFlags(kTrainFlagFiles)));
  EMBER_ASSIGN_OR_RETURN(engine::TrainOptions options, TrainOptionsFromFlags());
  EMBER_RETURN_IF_ERROR(ApplyRanks(ranks, &options));
  const bool reports = ranks.rank() == 0;
  // Ranks that train data in parallel (not the stages of a pipeline).
  const bool data_parallel = options.ranks.active();
  // Fail now rather than after hours of training.
  for (const auto& [flag, path] : {std::pair{"--metrics_out", FLAGS_metrics_out},
                                   std::pair{"--trace_file", FLAGS_trace_file},
                                   std::pair{"--plot_out", FLAGS_plot_out}}) {
    if (!path.empty() && (reports || std::string(flag) == "--trace_file")) {
      EMBER_RETURN_IF_ERROR(CheckOutputPath(flag, path));
    }
  }
  if (!FLAGS_export_dir.empty() && reports) {
    EMBER_RETURN_IF_ERROR(CheckWritableDestination(FLAGS_export_dir).WithContext("--export_dir"));
  }
  if (!FLAGS_plot_out.empty() && std::filesystem::path(FLAGS_plot_out).extension() != ".svg") {
    return Status::InvalidArgument("--plot_out=", FLAGS_plot_out,
                                   ": the curves are drawn as SVG; name a .svg file");
  }
  // --plan=auto|off|FILE (tools/plan_flags.h) sets threads and pipeline knobs.
  EMBER_ASSIGN_OR_RETURN(const scheduler::Plan plan, ApplyTrainPlan(&options));
  // A pipeline's stages read no data: rank 0 tells them the examples' shape
  // (their model's inputs and outputs) once it has read the data.
  const bool pipeline_stages = options.pipeline_parallel.ranks > 1;
  std::vector<int64_t> shape(3);
  if (pipeline_stages && !reports) {
    EMBER_RETURN_IF_ERROR(options.pipeline_parallel.commands->Broadcast(shape, 0)
                              .WithContext("waiting for rank 0 to read the data"));
    // The embedding table is rank 0's: a stage keeps an empty one in memory.
    options.table.memory_budget_bytes = 0;
    options.table.disk_path.clear();
    EMBER_ASSIGN_OR_RETURN(auto stage,
                           engine::Trainer::Create(options, static_cast<int>(shape[0]),
                                                   static_cast<int>(shape[1]),
                                                   static_cast<int>(shape[2])));
    // A stage of rank 0's pipeline: rank 0 trains, checkpoints and reports.
    return stage->ServePipeline();
  }

  TempDir temp_dir;
  EMBER_ASSIGN_OR_RETURN(Data data, LoadData(&temp_dir, plan.threads,
                                          data_parallel ? Shard{ranks.size(), ranks.rank()}
                                                        : Shard{FLAGS_num_shards, FLAGS_shard_index},
                                          data_parallel));
  if (pipeline_stages) {
    shape = {data.num_dense, data.num_slots, data.num_labels};
    EMBER_RETURN_IF_ERROR(options.pipeline_parallel.commands->Broadcast(shape, 0)
                              .WithContext("telling the pipeline's stages the data's shape"));
  }
  TempDir embedding_temp_dir;
  if (options.table.memory_budget_bytes > 0 && options.table.disk_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(options.table.disk_path, embedding_temp_dir.Create("ember-train"));
  }
  if (options.table.memory_budget_bytes == 0) TuneProcessAllocatorWithoutMemoryBudget();
  std::unique_ptr<Tracer> tracer;
  if (!FLAGS_trace_file.empty()) {
    tracer = std::make_unique<Tracer>();
    options.pipeline.tracer = tracer.get();
  }
  options.stop_requested = &g_stop_requested;
  // Evaluations during training: the test data as the final evaluation
  // reads it (a stream is read afresh each time).
  engine::Trainer* evaluated_trainer = nullptr;
  if (FLAGS_eval_every_steps > 0 || FLAGS_eval_every_epoch || !FLAGS_plot_out.empty()) {
    options.evaluate = [&]() -> Result<engine::Metrics> {
      if (!data.test_stream) return evaluated_trainer->Evaluate(data.test);
      Result<InputStream> test = OpenInputStream(data.test_paths, data.test_options);
      if (!test.ok()) return test.status().WithContext("--test_data");
      return evaluated_trainer->Evaluate(*test->reader);
    };
  }
  options.checkpoint.dir = FLAGS_checkpoint_dir;
  options.checkpoint.every_steps = FLAGS_checkpoint_every_steps;
  EMBER_ASSIGN_OR_RETURN(auto trainer,
                         engine::Trainer::Create(options, data.num_dense, data.num_slots,
                                                 data.num_labels));
  evaluated_trainer = trainer.get();
  if (!FLAGS_checkpoint_dir.empty()) {
    EMBER_ASSIGN_OR_RETURN(const int64_t newest, trainer->NewestCheckpointStep());
    if (newest >= 0 && !FLAGS_resume) {
      return Status::InvalidArgument("--checkpoint_dir ", FLAGS_checkpoint_dir,
                                     " holds a checkpoint of step ", newest,
                                     "; pass --resume to continue it, or choose another directory");
    }
    if (newest >= 0) {
      EMBER_RETURN_IF_ERROR(CheckResumeFlags(FLAGS_checkpoint_dir, kTrainFlagFiles));
      Result<int64_t> step = trainer->Restore();
      if (!step.ok()) return step.status().WithContext("--checkpoint_dir");
      LOG(INFO) << "resumed from the checkpoint of step " << *step << " in "
                << FLAGS_checkpoint_dir;
    } else if (reports) {
      // One record for the job (with ranks: rank 0's, in the job's directory).
      EMBER_RETURN_IF_ERROR(RecordJobFlags(FLAGS_checkpoint_dir, kTrainFlagFiles));
      EMBER_RETURN_IF_ERROR(RecordJobInput(FLAGS_checkpoint_dir,
                                           {data.num_dense, data.num_slots, data.num_labels,
                                            data.train_source.format == "columnar"}));
    }
  }
  // A first SIGINT/SIGTERM ends training after the batches in flight.
  Result<engine::TrainReport> fit = [&] {
    StopOnSignal stop_on_signal(&g_stop_requested);
    Result<engine::TrainReport> result =
        data.train_stream ? trainer->Fit(*data.train_elastic) : trainer->Fit(data.train);
    *stopped_by = stop_on_signal.signal();
    return result;
  }();
  if (data.train_stream) {
    data.train_source.stream = data.train_stream->stats();
    data.train_source.bad_lines = data.train_source.stream->bad_lines;
  }
  EMBER_RETURN_IF_ERROR(fit.status());
  EMBER_RETURN_IF_ERROR(trainer->FinishPipeline());
  engine::TrainReport report = *std::move(fit);
  if (data_parallel) {
    // The job's examples and speed: every rank's, trained in step.
    EMBER_ASSIGN_OR_RETURN(const int64_t job_examples, ranks.SumOverRanks(report.examples));
    const double scale = report.examples > 0 ? static_cast<double>(job_examples) / report.examples
                                             : 0.0;
    report.examples = job_examples;
    report.samples_per_sec *= scale;
    report.steady_samples_per_sec *= scale;
  }
  // With ranks, the whole table on rank 0 for the hash and the bundle. A
  // job that had finished still says its hash: that of its checkpoint, as
  // restored (on another number of ranks, resharded).
  std::unique_ptr<embedding::EmbeddingTable> gathered;
  if (data_parallel && (FLAGS_model_hash || !FLAGS_export_dir.empty())) {
    EMBER_ASSIGN_OR_RETURN(gathered,
                           ranks.GatherTable(trainer->table(), trainer->options().table));
  }
  embedding::EmbeddingTable* whole = gathered ? gathered.get() : &trainer->table();
  std::string model_hash;
  if (FLAGS_model_hash && reports) {
    EMBER_ASSIGN_OR_RETURN(const uint64_t hash,
                           engine::HashTrainedModel(trainer->model(), *whole));
    model_hash = engine::ModelHashHex(hash);
    std::printf("model hash: %s\n", model_hash.c_str());
  }
  // A finished job's metrics, trace and plot are those of the run that
  // finished it, unless that run was stopped between its last checkpoint and
  // writing them (--metrics_out is then missing, or an earlier run's: one
  // stopped by a signal, or one that ended at an earlier step): then they
  // are written now, from the checkpoint.
  const bool outputs_written =
      FLAGS_metrics_out.empty() ||
      MetricsOfJobFinishedAt(FLAGS_metrics_out, report.resumed_from_step);
  if (report.already_finished && !outputs_written) {
    LOG(WARNING) << "the job in --checkpoint_dir=" << FLAGS_checkpoint_dir
                 << " had finished training, but --metrics_out=" << FLAGS_metrics_out
                 << " does not hold the metrics of the run that finished it (that run stopped "
                    "first): writing them from the checkpoint";
  }
  if (report.already_finished && outputs_written) {
    std::printf("ember train: the job in --checkpoint_dir=%s had finished training at step %lld; "
                "nothing to train, its outputs are left as they were (raise --epochs or "
                "--max_steps to train on)\n",
                FLAGS_checkpoint_dir.c_str(), static_cast<long long>(report.resumed_from_step));
    std::fflush(stdout);
    return Status::OK();
  }
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
              << report.last_checkpoint_step << " in " << FLAGS_checkpoint_dir;
  }
  LOG(INFO) << "embeddings: " << EmbeddingSummary(report.embedding, report.train_seconds);
  if (report.moe_choices > 0) {
    // With ranks, each rank's own batches.
    const std::string who =
        data_parallel ? " (rank " + std::to_string(ranks.rank()) + ")" : std::string();
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
  if (data_parallel && report.steps > 0) {
    const embedding::TableStats& t = report.embedding;
    LOG(INFO) << "exchanges of rank " << ranks.rank() << ": " << t.exchanged_bytes / report.steps
              << " bytes a step (the least possible: " << t.exchanged_bytes_minimum / report.steps
              << ")";
  }
  Result<engine::Metrics> evaluated =
      data.test_stream ? trainer->Evaluate(*data.test_stream) : trainer->Evaluate(data.test);
  if (data.test_stream) {
    data.test_source->stream = data.test_stream->stats();
    data.test_source->bad_lines = data.test_source->stream->bad_lines;
  }
  if (!evaluated.ok()) return evaluated.status().WithContext("--test_data");
  const engine::Metrics& test = *evaluated;
  if (!reports) {
    // Every rank took part in the evaluation; rank 0 reports and writes.
    if (tracer) {
      EMBER_RETURN_IF_ERROR(tracer->WriteJson(FLAGS_trace_file).WithContext("--trace_file"));
    }
    return Status::OK();
  }

  std::string steady;
  if (FLAGS_timing_warmup_steps > 0 && report.steady_samples_per_sec > 0) {
    steady = " (" + std::to_string(std::llround(report.steady_samples_per_sec)) +
             " after the first " + std::to_string(FLAGS_timing_warmup_steps) + " steps)";
  }
  // A run a signal stopped says so in its summary, not only in the log.
  const std::string interrupted =
      *stopped_by != 0 ? "interrupted (signal " + std::to_string(*stopped_by) + ") after " : "";
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

  if (!FLAGS_export_dir.empty()) {
    EMBER_RETURN_IF_ERROR(ExportTrained(*trainer, *whole, report, data.train_source.format));
  }
  if (tracer) {
    EMBER_RETURN_IF_ERROR(tracer->WriteJson(FLAGS_trace_file).WithContext("--trace_file"));
    LOG(INFO) << "wrote trace " << FLAGS_trace_file;
  }
  if (!FLAGS_plot_out.empty()) {
    const std::string svg = RunCurvesSvg(report.history, options.model.name);
    EMBER_RETURN_IF_ERROR(WriteFileAtomic(FLAGS_plot_out, svg).WithContext("--plot_out"));
    LOG(INFO) << "wrote the run's curves to " << FLAGS_plot_out;
  }
  if (!FLAGS_metrics_out.empty()) {
    JsonObject test_json = TestMetricsJson(test);
    if (!data.ceiling_auc.empty()) test_json.Add("ceiling_auc", data.ceiling_auc[0]);
    if (data.ceiling_auc.size() > 1 && !test.tasks.empty()) {
      test_json.AddRaw("task_ceiling_auc", JsonNumberArray(data.ceiling_auc));
    }
    JsonObject train_json = TrainReportJson(report, FLAGS_timing_warmup_steps);
    if (!model_hash.empty()) train_json.Add("model_hash", model_hash);
    JsonObject input_json;
    input_json.Add("train", SourceJson(data.train_source));
    if (data.test_source) input_json.Add("test", SourceJson(*data.test_source));
    JsonObject root;
    root.Add("model", options.model.name).Add("test", test_json).Add("train", train_json);
    root.Add("input", input_json);
    EMBER_RETURN_IF_ERROR(
        WriteFileAtomic(FLAGS_metrics_out, root.ToString()).WithContext("--metrics_out"));
  }
  return Status::OK();
}

}  // namespace

int RunTrain() {
  int stopped_by = 0;
  Result<std::unique_ptr<JobRanks>> ranks = JobRanks::Join(FLAGS_rank_timeout_seconds);
  const Status status = ranks.ok() ? Train(**ranks, &stopped_by) : ranks.status();
  if (!status.ok()) {
    // The other ranks' exchanges with this one fail at once, naming it.
    if (ranks.ok()) (*ranks)->Abort(status);
    const std::string who = ranks.ok() && (*ranks)->several()
                                ? " (rank " + std::to_string((*ranks)->rank()) + " of " +
                                      std::to_string((*ranks)->size()) + ")"
                                : "";
    std::fprintf(stderr, "ember train%s: %s\n", who.c_str(), status.ToString().c_str());
    return ExitCodeFor(status);
  }
  ranks->reset();
  const Status finished = FinishJobRanks();
  if (!finished.ok()) {
    std::fprintf(stderr, "ember train: %s\n", finished.ToString().c_str());
    return ExitCodeFor(finished);
  }
  // A job stopped by a signal has not finished, though everything it did is
  // saved: a scheduler that sees a failure restarts it (with --resume).
  return stopped_by != 0 ? kExitSignalBase + stopped_by : kExitOk;
}

}  // namespace ember::tools
