#include "engine/job.h"

#include <fcntl.h>
#include <unistd.h>

#include <glog/logging.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "core/allocator.h"
#include "core/device.h"
#include "core/json.h"
#include "engine/bundle.h"
#include "engine/model_hash.h"
#include "engine/model_zoo.h"

namespace ember::engine {
namespace {

// Fails, naming `output`, unless a file can be written at `path`: its
// directory exists and takes a new file of the name the atomic writer gives
// it first (<path>.tmp.<pid>.<n>; a name too long, a read-only or full file
// system fail here rather than after training).
Status CheckOutputPath(const char* output, const std::string& path) {
  EMBER_RETURN_IF_ERROR(CheckWritableDestination(path).WithContext(output));
  const std::string probe = path + ".tmp." + std::to_string(::getpid()) + ".check";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::InvalidArgument(output, "=", path, ": cannot create a file there (",
                                   std::strerror(errno), ")");
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

// The experts of a MoE model, which an expert axis divides; 0 for other
// models (options that do not resolve fail when the model is built).
int ExpertCount(const ModelOptions& options) {
  const Result<ModelOptions> model = ResolveModelOptions(options);
  return model.ok() && model->name == "moe" ? model->params.Int("num_experts") : 0;
}

// What the runtime runs so far: one parallel axis, tables row-wise over
// every rank.
Status CheckRunnable(const scheduler::Layout& layout) {
  const scheduler::Mesh& mesh = layout.mesh;
  if ((mesh.pipeline > 1) + (mesh.data > 1) + (mesh.expert > 1) > 1) {
    return Status::InvalidArgument("--mesh=", scheduler::MeshText(mesh),
                                   ": this Ember runs one parallel axis at a time (data, pipeline "
                                   "or expert); layouts of several are not supported yet");
  }
  auto check = [&](const std::string& which, const scheduler::TableSharding& s) -> Status {
    scheduler::MeshAxis axis;
    const bool every_rank = s.kind == scheduler::TableShardingKind::kRowWise &&
                            (s.axis.empty() || (scheduler::ParseMeshAxis(s.axis, &axis) &&
                                                mesh.size(axis) == mesh.world()));
    if (every_rank) return Status::OK();
    return Status::InvalidArgument("--table_sharding: ", which, " is ",
                                   scheduler::TableShardingText(s),
                                   "; this Ember runs tables row-wise over every rank only, so far");
  };
  EMBER_RETURN_IF_ERROR(check("default", layout.tables.fallback));
  for (const auto& [slot, sharding] : layout.tables.slots) {
    EMBER_RETURN_IF_ERROR(check("slot " + std::to_string(slot), sharding));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Job>> Job::Join(JobOptions options) {
  std::unique_ptr<Job> job(new Job(std::move(options)));
  EMBER_ASSIGN_OR_RETURN(job->ranks_, JobRanks::Join(job->options_.rank_timeout_seconds));
  EMBER_RETURN_IF_ERROR(job->LayOut());
  return job;
}

Job::~Job() = default;

Status Job::UseLocalGpu() {
  Device& device = options_.train.model.device;
  if (!device.is_cuda()) return Status::OK();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const int devices = CudaDeviceCount();
  if (devices > 0) device = Device::Cuda((local != nullptr ? std::atoi(local) : 0) % devices);
  return ranks_->UseNcclForDense(device.index, options_.rank_timeout_seconds);
}

Status Job::LayOut() {
  TrainOptions& train = options_.train;
  train.stop_requested = options_.stop_requested;
  const int n = ranks_->size(), rank = ranks_->rank();
  if (options_.pipeline_parallel != n && options_.pipeline_parallel > 1) {
    return Status::InvalidArgument(
        "--pipeline_parallel=", options_.pipeline_parallel, " splits the dense model over that "
        "many ranks, and this job has ", n, ": run it under mpirun -np ",
        options_.pipeline_parallel, " (data parallelism across pipelines is not supported yet)");
  }
  EMBER_RETURN_IF_ERROR(ChooseLayout());
  if (n > 1) train.expert_parallel = layout_.mesh.expert > 1;
  if (!ranks_->several()) return Status::OK();
  const std::string rank_suffix = ".rank-" + std::to_string(rank);
  if (!options_.outputs.trace_file.empty()) options_.outputs.trace_file += rank_suffix;
  train.show_progress = train.show_progress && rank == 0;
  if (layout_.mesh.pipeline == n) {
    // A pipeline: rank 0 trains as a job of one rank (all the data, the
    // whole table) whose dense stage runs the pipeline; the others serve.
    EMBER_RETURN_IF_ERROR(UseLocalGpu());
    train.pipeline_parallel.ranks = n;
    train.pipeline_parallel.stages = ranks_->pipeline_stages();
    train.pipeline_parallel.commands = ranks_->pipeline_commands();
    return Status::OK();
  }
  if (options_.data_sharded) {
    return Status::InvalidArgument(
        "--num_shards/--shard_index: under mpirun every rank reads shard <rank> of <ranks> of "
        "--train_data by itself; drop these flags");
  }
  EMBER_RETURN_IF_ERROR(UseLocalGpu());
  train.ranks = ranks_->group();
  if (!train.table.disk_path.empty()) train.table.disk_path += "/rank-" + std::to_string(rank);
  return Status::OK();
}

Status Job::ChooseLayout() {
  const TrainOptions& train = options_.train;
  const int n = ranks_->size();
  const int experts = ExpertCount(train.model);
  scheduler::Layout& layout = layout_;
  layout.tables = options_.tables;
  const pipeline::PipelineParallelOptions& pp = train.pipeline_parallel;
  layout.virtual_stages = pp.virtual_stages;
  layout.micro_batches = pp.micro_batches;
  layout.schedule = pipeline::ScheduleKindOf(pp);
  if (options_.mesh.has_value()) {
    layout.mesh = *options_.mesh;
    if (options_.pipeline_parallel > 1 && layout.mesh.pipeline != options_.pipeline_parallel) {
      return Status::InvalidArgument("--pipeline_parallel=", options_.pipeline_parallel,
                                     " and --mesh=", scheduler::MeshText(layout.mesh),
                                     " disagree: give the mesh alone");
    }
    if (options_.expert_parallel_chosen && train.expert_parallel && layout.mesh.expert == 1 &&
        n > 1 && experts > 0) {
      return Status::InvalidArgument("--expert_parallel and --mesh=",
                                     scheduler::MeshText(layout.mesh),
                                     " disagree: the mesh has no expert axis");
    }
  } else if (options_.pipeline_parallel > 1) {
    layout.mesh.pipeline = n;
  } else if (train.expert_parallel && experts > 0 && n > 1 &&
             (experts % n == 0 || options_.expert_parallel_chosen)) {
    layout.mesh.expert = n;  // Indivisible experts: CheckLayout names --num_experts.
  } else {
    if (train.expert_parallel && experts > 0 && n > 1) {
      LOG(WARNING) << "--expert_parallel: off, --num_experts=" << experts
                   << " does not divide among " << n << " ranks; every rank computes every expert";
    }
    layout.mesh.data = n;
  }
  // The model's tables are known at Create, which checks their shardings.
  EMBER_RETURN_IF_ERROR(
      scheduler::CheckLayout(layout, n, std::numeric_limits<int>::max(), experts));
  return CheckRunnable(layout);
}

bool Job::serves_pipeline() const {
  return options_.train.pipeline_parallel.ranks > 1 && !reports();
}

Status Job::CheckSameSettings(const std::vector<JobRanks::Setting>& settings) {
  return ranks_->CheckSameSettings(settings);
}

Status Job::CheckOutputs() const {
  const JobOutputs& out = options_.outputs;
  for (const auto& [output, path] : {std::pair{"--metrics_out", out.metrics_out},
                                     std::pair{"--trace_file", out.trace_file},
                                     std::pair{"--plot_out", out.plot_out}}) {
    if (!path.empty() && (reports() || std::string(output) == "--trace_file")) {
      EMBER_RETURN_IF_ERROR(CheckOutputPath(output, path));
    }
  }
  if (!out.export_dir.empty() && reports()) {
    EMBER_RETURN_IF_ERROR(CheckWritableDestination(out.export_dir).WithContext("--export_dir"));
  }
  if (!out.plot_out.empty() && std::filesystem::path(out.plot_out).extension() != ".svg") {
    return Status::InvalidArgument("--plot_out=", out.plot_out,
                                   ": the curves are drawn as SVG; name a .svg file");
  }
  return Status::OK();
}

Status Job::ServePipeline() {
  if (!serves_pipeline()) {
    return Status::FailedPrecondition("only ranks 1.. of a pipeline of ranks serve it");
  }
  std::vector<int64_t> shape(3);
  EMBER_RETURN_IF_ERROR(options_.train.pipeline_parallel.commands->Broadcast(shape, 0)
                            .WithContext("waiting for rank 0 to read the data"));
  // The embedding table is rank 0's: a stage keeps an empty one in memory.
  TrainOptions stage = options_.train;
  stage.table.memory_budget_bytes = 0;
  stage.table.disk_path.clear();
  EMBER_ASSIGN_OR_RETURN(trainer_, Trainer::Create(stage, static_cast<int>(shape[0]),
                                                   static_cast<int>(shape[1]),
                                                   static_cast<int>(shape[2])));
  // A stage of rank 0's pipeline: rank 0 trains, checkpoints and reports.
  return trainer_->ServePipeline();
}

Status Job::Create(const DataShape& shape) {
  TrainOptions& train = options_.train;
  EMBER_RETURN_IF_ERROR(scheduler::CheckLayout(layout_, ranks_->size(),
                                               static_cast<int>(shape.num_slots),
                                               ExpertCount(train.model)));
  if (train.pipeline_parallel.ranks > 1) {
    std::vector<int64_t> sent = {shape.num_dense, shape.num_slots, shape.num_labels};
    EMBER_RETURN_IF_ERROR(train.pipeline_parallel.commands->Broadcast(sent, 0)
                              .WithContext("telling the pipeline's stages the data's shape"));
  }
  if (train.table.memory_budget_bytes > 0 && train.table.disk_path.empty()) {
    EMBER_ASSIGN_OR_RETURN(train.table.disk_path, embedding_temp_dir_.Create("ember-train"));
  }
  if (train.table.memory_budget_bytes == 0) TuneProcessAllocatorWithoutMemoryBudget();
  if (!options_.outputs.trace_file.empty()) {
    tracer_ = std::make_unique<Tracer>();
    train.pipeline.tracer = tracer_.get();
  }
  if (open_evaluation_) {
    // Evaluations during training, at a barrier between steps: the model as
    // trained so far on the held-out data, read afresh each time.
    train.evaluate = [this]() -> Result<Metrics> {
      EMBER_ASSIGN_OR_RETURN(std::unique_ptr<io::BatchSource> data, open_evaluation_());
      return trainer_->Evaluate(*data);
    };
  }
  EMBER_ASSIGN_OR_RETURN(trainer_,
                         Trainer::Create(train, shape.num_dense, shape.num_slots, shape.num_labels));
  return Status::OK();
}

Result<int64_t> Job::NewestCheckpointStep() const { return trainer_->NewestCheckpointStep(); }

Result<int64_t> Job::Resume() {
  const std::string& dir = options_.train.checkpoint.dir;
  if (dir.empty()) return int64_t{-1};
  EMBER_ASSIGN_OR_RETURN(const int64_t newest, trainer_->NewestCheckpointStep());
  if (newest < 0) return int64_t{-1};
  if (!options_.resume) {
    return Status::InvalidArgument("--checkpoint_dir ", dir, " holds a checkpoint of step ",
                                   newest,
                                   "; pass --resume to continue it, or choose another directory");
  }
  Result<int64_t> step = trainer_->Restore();
  if (!step.ok()) return step.status().WithContext("--checkpoint_dir");
  LOG(INFO) << "resumed from the checkpoint of step " << *step << " in " << dir;
  return *step;
}

Result<TrainReport> Job::Train(io::BatchSource& train) {
  EMBER_ASSIGN_OR_RETURN(TrainReport report, trainer_->Fit(train));
  EMBER_RETURN_IF_ERROR(trainer_->FinishPipeline());
  if (data_parallel()) {
    // The job's examples and speed: every rank's, trained in step.
    EMBER_ASSIGN_OR_RETURN(const int64_t job_examples, ranks_->SumOverRanks(report.examples));
    const double scale =
        report.examples > 0 ? static_cast<double>(job_examples) / report.examples : 0.0;
    report.examples = job_examples;
    report.samples_per_sec *= scale;
    report.steady_samples_per_sec *= scale;
  }
  return report;
}

Status Job::Gather() {
  if (!data_parallel() || gathered_) return Status::OK();
  EMBER_ASSIGN_OR_RETURN(gathered_,
                         ranks_->GatherTable(trainer_->table(), trainer_->options().table));
  gathered_all_ = true;
  return Status::OK();
}

Result<embedding::EmbeddingTable*> Job::WholeTable() {
  if (data_parallel() && !gathered_all_) {
    return Status::FailedPrecondition("the ranks' rows were not gathered (Job::Gather)");
  }
  return gathered_ ? gathered_.get() : &trainer_->table();
}

Result<std::string> Job::ModelHash() {
  if (!reports()) return std::string();
  EMBER_ASSIGN_OR_RETURN(embedding::EmbeddingTable* whole, WholeTable());
  EMBER_ASSIGN_OR_RETURN(const uint64_t hash, HashTrainedModel(trainer_->model(), *whole));
  return ModelHashHex(hash);
}

Status Job::Export(const io::FormatSpec& input, bool columnar, int64_t step) {
  const std::string& dir = options_.outputs.export_dir;
  const BundleConfig config = BundleConfigOf(trainer_->options(), input, columnar, step);
  if (exports_shards()) {
    // Each rank writes the rows it holds; rank 0 the rest.
    EMBER_RETURN_IF_ERROR(WriteShardedBundle(dir, config, trainer_->model(), trainer_->table(),
                                             *options_.train.ranks.control)
                              .WithContext("--export_dir"));
    if (reports()) {
      LOG(INFO) << "wrote the serving bundle of step " << config.step << " to " << dir << " ("
                << ranks() << " shards, each rank's rows)";
    }
    return Status::OK();
  }
  if (!reports()) return Status::OK();
  EMBER_ASSIGN_OR_RETURN(embedding::EmbeddingTable* whole, WholeTable());
  EMBER_RETURN_IF_ERROR(WriteBundle(dir, config, trainer_->model(), *whole)
                            .WithContext("--export_dir"));
  LOG(INFO) << "wrote the serving bundle of step " << config.step << " to " << dir;
  return Status::OK();
}

Status Job::WriteTrace() const {
  if (!tracer_) return Status::OK();
  tracer_->SetOtherData("rank", std::to_string(rank()));
  tracer_->SetOtherData("layout", Json(layout_).dump());
  EMBER_RETURN_IF_ERROR(
      tracer_->WriteJson(options_.outputs.trace_file).WithContext("--trace_file"));
  LOG(INFO) << "wrote trace " << options_.outputs.trace_file;
  return Status::OK();
}

std::string Job::WhoForMessages() const {
  if (!ranks_->several()) return "";
  return " (rank " + std::to_string(rank()) + " of " + std::to_string(ranks()) + ")";
}

}  // namespace ember::engine
