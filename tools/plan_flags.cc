// The planner's flags and their glue (see plan_flags.h).
#include "tools/flag_validators.h"
#include "tools/plan_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json.h"
#include "core/threads.h"
#include "embedding/distinct_keys.h"
#include "embedding/embedding_table.h"
#include "engine/dense_step_timing.h"
#include "engine/model_zoo.h"
#include "ops/op_registry.h"
#include "scheduler/calibration.h"
#include "scheduler/cluster_file.h"
#include "scheduler/dense_calibration.h"
#include "scheduler/key_trace.h"
#include "scheduler/stage.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/format_flags.h"
#include "tools/model_flags.h"
#include "tools/train_flags.h"

DEFINE_string(plan, "auto",
              "train: how the job is planned: auto (the planner picks the threads, pipelining, "
              "depth and staleness the command line leaves unset, from this host's calibrated "
              "cost model), off (the flags as given), or a plan file written by `ember plan "
              "--plan_out` (its knobs are used).");
DEFINE_string(cluster, "",
              "plan: a cluster file (JSON, see scheduler/cluster_file.h) describing the machines "
              "to plan for; empty: this host, discovered and calibrated.");
DEFINE_int32(ranks, 0,
             "plan: ranks of the job (mpirun -np N ember train): each trains --batch_size "
             "examples a step with --threads threads, the ranks fill the hosts (this one, or "
             "--cluster's) evenly, and the plan adds the key, row and gradient exchanges and "
             "the dense all-reduce. 0: the MPI world when run under mpirun, else 1.");
DEFINE_validator(ranks, &ember::tools::IsNonNegative32);
DEFINE_bool(recalibrate, false,
            "Measure this host's rates again (about a second) instead of reading them from the "
            "calibration cache.");
DEFINE_string(calibration_dir, "",
              "Directory of the calibration cache; empty: $XDG_CACHE_HOME/ember or "
              "~/.cache/ember.");
DEFINE_string(plan_batch_sizes, "",
              "Comma-separated batch sizes the planner may choose from; empty: --batch_size only "
              "(the batch size changes what is learned, so it is the user's choice by default).");
DEFINE_string(plan_threads, "",
              "Comma-separated thread counts the planner may choose from; empty: --threads when "
              "set on the command line, else 1 .. the host's hardware threads.");
DEFINE_string(plan_memory_limit, "",
              "DRAM the embedding memory tier may use per host (e.g. 4GB); beyond it rows go to "
              "the disk tier. Empty: --embedding_memory_budget if set, else 80% of DRAM less "
              "1 GiB.");
DEFINE_string(plan_refine_from, "",
              "A --metrics_out file of a finished `ember train` run with the same flags: its "
              "measured stage times refine the cost model (a factor per stage, saved beside "
              "the calibration cache for later plans).");

namespace ember::tools {
namespace {

// Whether the flag `name` was given (on the command line or in a flagfile)
// rather than left at its default: the planner chooses only what was not.
bool SetOnCommandLine(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}

int SparseStatePerFloat(const std::string& optimizer) {
  // Row-wise Adagrad's one float a row is within the row's overhead.
  if (optimizer == "sgd" || optimizer == "rowwise_adagrad") return 0;
  if (optimizer == "adagrad") return 1;
  return 2;  // adam: two moments; ftrl: z and n.
}

Result<ops::DenseOptimizerOptions> DenseOptimizerFromFlags() {
  ops::DenseOptimizerOptions optimizer;
  EMBER_ASSIGN_OR_RETURN(optimizer.type, ops::ParseDenseOptimizer(FLAGS_dense_optimizer));
  optimizer.learning_rate = static_cast<float>(FLAGS_dense_lr);
  return optimizer;
}

// What the training files say about the table a run makes.
struct DataKeys {
  int64_t examples = 0;           // In the files (estimated when sampled).
  double keys_per_example = 0.0;  // Over every slot.
  int64_t distinct_keys = 0;      // Estimated (DistinctKeyCounter).
  int64_t read_examples = 0;      // Examples read to count them.
  bool sampled = false;           // Read only the first read_examples.
  // The keys of the examples read, sampled by key (scheduler/key_trace.h).
  std::shared_ptr<scheduler::KeyTrace> trace;
};

// Ranks of the job: --ranks, else the world mpirun started (from its
// environment; MPI itself is not needed to plan), else 1.
int PlanRanks() {
  if (FLAGS_ranks > 0) return FLAGS_ranks;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::max(1, std::atoi(value));
  }
  return 1;
}

// Examples read to count the distinct keys of --train_data: all of smaller
// data, the first this many of larger data.
constexpr int64_t kKeySampleExamples = 2000000;

// Reads `paths` (up to kKeySampleExamples examples, in file order) and
// counts their keys. Sampled data's distinct keys are scaled up by the
// share of its examples read: an upper bound, since a larger sample repeats
// more of its keys.
Result<DataKeys> MeasureTrainingKeys(const std::vector<std::string>& paths) {
  io::StreamReaderOptions options;
  options.batch_size = 4096;
  options.num_epochs = 1;
  options.threads = std::max(1, HardwareThreads() / 2);
  EMBER_ASSIGN_OR_RETURN(InputStream input, OpenInputStream(paths, options));
  DataKeys keys;
  keys.examples = input.reader->EpochLines(0);
  keys.trace = std::make_shared<scheduler::KeyTrace>();
  embedding::DistinctKeyCounter distinct;
  int64_t key_count = 0;
  io::Batch batch;
  while (keys.read_examples < kKeySampleExamples) {
    EMBER_ASSIGN_OR_RETURN(const bool more, input.reader->Next(&batch));
    if (!more) break;
    for (int64_t i = 0; i < batch.size; ++i) {
      for (int64_t k = batch.offsets[i * batch.num_slots];
           k < batch.offsets[(i + 1) * batch.num_slots]; ++k) {
        keys.trace->Add(keys.read_examples + i, batch.keys[k]);
      }
    }
    keys.read_examples += batch.size;
    key_count += static_cast<int64_t>(batch.keys.size());
    distinct.Add(batch.keys);
  }
  if (keys.read_examples == 0) return Status::InvalidArgument("the training data has no examples");
  keys.sampled = keys.examples > keys.read_examples;
  if (!keys.sampled) keys.examples = keys.read_examples;
  keys.keys_per_example = static_cast<double>(key_count) / keys.read_examples;
  keys.distinct_keys = distinct.Estimate();
  if (keys.sampled) {
    keys.distinct_keys = static_cast<int64_t>(std::ceil(
        static_cast<double>(keys.distinct_keys) * keys.examples / keys.read_examples));
  }
  return keys;
}

Result<scheduler::Program> ProgramFromFlags(const engine::ModelOptions& model,
                                            std::string* table_sizing) {
  EMBER_ASSIGN_OR_RETURN(const io::SyntheticOptions data, SyntheticOptionsFromFlags());
  EMBER_ASSIGN_OR_RETURN(auto graph, engine::BuildModelGraph(model, ops::DefaultOpRegistry()));

  scheduler::SparseFeatures sparse;
  sparse.num_dense = model.num_dense;
  sparse.num_slots = model.num_slots;
  sparse.num_labels = model.num_tasks;
  sparse.embedding_dim = model.embedding_dim;
  sparse.ids_per_example =
      (model.num_slots - data.multi_hot_slots) + data.multi_hot_slots * data.max_bag_size / 2.0;
  if (FLAGS_train_data.empty()) {
    // The generated data: its vocabularies and Zipf exponent are known.
    sparse.slot_vocabulary = data.slot_vocabularies;
    if (sparse.slot_vocabulary.empty())
      sparse.slot_vocabulary.assign(model.num_slots, data.vocabulary);
    sparse.zipf_exponent = data.zipf_exponent;
    int64_t examples =
        static_cast<int64_t>(FLAGS_rows * (1.0 - FLAGS_test_fraction)) * FLAGS_epochs;
    if (FLAGS_max_steps > 0) examples = std::min(examples, FLAGS_max_steps * FLAGS_batch_size);
    sparse.training_examples = std::max<int64_t>(1, examples);
    *table_sizing = "table sized from the generated data's vocabularies (--rows x --epochs)";
    // With a memory limit, the memory tier's traffic is played on one
    // epoch of keys drawn as the generator draws them.
    if (!FLAGS_embedding_memory_budget.empty() || !FLAGS_plan_memory_limit.empty()) {
      const int64_t epoch = std::min<int64_t>(
          {sparse.training_examples, static_cast<int64_t>(FLAGS_rows * (1.0 - FLAGS_test_fraction)),
           kKeySampleExamples});
      sparse.key_trace =
          scheduler::ZipfKeyTrace(sparse.slot_vocabulary, sparse.zipf_exponent,
                                  data.multi_hot_slots, data.max_bag_size, epoch, FLAGS_seed);
    }
  } else {
    // The table holds the data's distinct keys, however many epochs go over
    // them. Each slot's vocabulary is unknown: every id of a batch is costed
    // as distinct, and the program's examples are those that make
    // TableRows() the distinct keys.
    EMBER_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                           ExpandPathList("train_data", FLAGS_train_data));
    Result<DataKeys> keys = MeasureTrainingKeys(paths);
    if (!keys.ok()) return keys.status().WithContext("--train_data");
    sparse.ids_per_example = std::max(1e-9, keys->keys_per_example);
    // Without --test_data, training holds out the last --test_fraction.
    const double train_share = FLAGS_test_data.empty() ? 1.0 - FLAGS_test_fraction : 1.0;
    double examples = keys->examples * train_share * FLAGS_epochs;
    if (FLAGS_max_steps > 0) {
      examples = std::min(examples, static_cast<double>(FLAGS_max_steps) * FLAGS_batch_size);
    }
    const double rows =
        std::min(static_cast<double>(keys->distinct_keys), examples * sparse.ids_per_example);
    sparse.training_examples =
        std::max<int64_t>(1, std::llround(std::ceil(rows / sparse.ids_per_example)));
    // The memory tier's traffic is played on the keys of one epoch's
    // training examples (those read), in the order the run reads them.
    int64_t traced = keys->sampled ? keys->read_examples
                                   : std::llround(keys->read_examples * train_share);
    if (FLAGS_max_steps > 0) traced = std::min(traced, FLAGS_max_steps * FLAGS_batch_size);
    keys->trace->Truncate(traced);
    if (FLAGS_shuffle) keys->trace->Shuffle(FLAGS_seed);
    sparse.key_trace = keys->trace;
    *table_sizing = ::ember::internal::StrCat(
        "table sized from --train_data's distinct keys, ", keys->distinct_keys,
        keys->sampled ? " (estimated from the first " : " (measured in ",
        keys->sampled ? std::to_string(keys->read_examples) + " of ~" +
                            std::to_string(keys->examples)
                      : std::to_string(keys->examples),
        " examples; epochs add none)");
  }
  LOG(INFO) << "plan: " << *table_sizing;
  sparse.sparse_state_per_float = SparseStatePerFloat(FLAGS_sparse_optimizer);
  {
    Result<embedding::WeightStorage> storage = embedding::ParseWeightStorage(FLAGS_embedding_weights);
    if (!storage.ok()) return storage.status().WithContext("--embedding_weights");
    sparse.sparse_weight_bytes = *storage == embedding::WeightStorage::kBFloat16 ? 2 : 4;
  }
  sparse.dense_state_per_param = FLAGS_dense_optimizer == "sgd"       ? 0
                                 : FLAGS_dense_optimizer == "adagrad" ? 1
                                                                      : 2;
  return scheduler::BuildProgram(model.name, *graph, sparse);
}

std::string RefinementPath(const scheduler::ResourceGraph& graph) {
  scheduler::CalibrationOptions options;
  options.cache_dir = FLAGS_calibration_dir;
  std::string path = scheduler::CalibrationCachePath(graph, options);
  return path.substr(0, path.size() - 5) + ".refine.json";
}

// The version of saved refinements: their factors are relative to the cost
// model of that version, so one of another version is not applied (2: the
// dense stage comes from the model's timed dense step, which the factors
// of version 1 would correct a second time).
constexpr int kRefinementVersion = 2;

// Stage scales saved by an earlier --plan_refine_from; all 1 when none.
scheduler::StageScales LoadRefinement(const scheduler::ResourceGraph& graph) {
  scheduler::StageScales scales;
  const std::string path = RefinementPath(graph);
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return scales;
  Result<Json> json = ParseJsonText(*text);
  if (!json.ok() || !json->is_object()) return scales;
  const auto version = json->find("version");
  if (version == json->end() || !version->is_number() || *version != kRefinementVersion) {
    LOG(INFO) << path << ": a refinement of an older cost model, not applied";
    return scales;
  }
  for (auto [mode, scale] :
       {std::pair{"pipelined", &scales.pipelined}, std::pair{"sequential", &scales.sequential}}) {
    const auto part = json->find(mode);
    if (part == json->end() || !part->is_object()) continue;
    for (scheduler::Stage s : scheduler::kAllStages) {
      const auto v = part->find(scheduler::StageName(s));
      if (v != part->end() && v->is_number()) (*scale)[s] = std::max(0.01, v->get<double>());
    }
  }
  return scales;
}

// Measured seconds per batch of each stage in a --metrics_out file.
Result<scheduler::PerStage<double>> MeasuredStageSeconds(const std::string& path) {
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  EMBER_ASSIGN_OR_RETURN(const Json root, ParseJsonText(text, path));
  // The field `key` of `object` when both are there, else nullptr.
  const auto field = [](const Json* object, const char* key) -> const Json* {
    if (object == nullptr || !object->is_object()) return nullptr;
    const auto it = object->find(key);
    return it == object->end() ? nullptr : &*it;
  };
  const Json* train = field(&root, "train");
  const Json* stages = field(train, "stage_seconds");
  const Json* steps = field(train, "steps");
  if (!stages || !steps || !steps->is_number() || steps->get<double>() <= 0) {
    return Status::InvalidArgument(path,
                                   ": expected train.stage_seconds and train.steps > 0 "
                                   "(a --metrics_out file of ember train)");
  }
  scheduler::PerStage<double> seconds;
  for (scheduler::Stage s : scheduler::kAllStages) {
    const Json* v = field(stages, scheduler::StageName(s));
    if (v && v->is_number()) seconds[s] = v->get<double>() / steps->get<double>();
  }
  return seconds;
}

Result<std::vector<int64_t>> ParseList(const char* flag, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : SplitList(text)) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || value < 1) {
      return Status::InvalidArgument("--", flag, ": '", item, "' is not a positive integer");
    }
    out.push_back(value);
  }
  return out;
}

// Times the dense step of `model` at the thread counts and batch sizes
// `in.planner` considers on this host (cached per host and model).
Result<scheduler::DenseMeasurement> CalibrateDense(const PlanInputs& in,
                                                   const engine::ModelOptions& model,
                                                   const scheduler::CalibrationOptions& options) {
  EMBER_ASSIGN_OR_RETURN(const ops::DenseOptimizerOptions optimizer, DenseOptimizerFromFlags());
  // The planner's thread counts; none given: 1 .. the host's (MakePlan's rule).
  std::vector<int> threads = in.planner.threads;
  if (threads.empty()) {
    for (int t = 1; t <= std::max(1, in.graph.cpu_threads()); ++t) threads.push_back(t);
  }
  const std::string descriptor = engine::DenseStepDescriptor(model, optimizer);
  const scheduler::DenseStepTimer timer = [&](int t, int64_t batch) {
    engine::DenseStepTimingOptions timing;
    timing.model = model;
    timing.optimizer = optimizer;
    timing.threads = t;
    timing.batch = batch;
    return engine::TimeDenseStep(timing);
  };
  bool from_cache = false;
  EMBER_ASSIGN_OR_RETURN(scheduler::DenseMeasurement measured,
                         scheduler::CalibrateDenseStep(in.graph, options, descriptor, threads,
                                                       in.planner.batch_sizes, timer, &from_cache));
  std::string points;
  for (const scheduler::DenseStepTiming& p : measured.points) {
    char point[96];
    std::snprintf(point, sizeof(point), "%s%d threads, batch %lld: %.2f ms",
                  points.empty() ? "" : "; ", p.threads, static_cast<long long>(p.batch),
                  p.seconds * 1e3);
    points += point;
  }
  VLOG(1) << "dense step " << (from_cache ? "read from the cache" : "measured") << ": " << points;
  return measured;
}

}  // namespace

Result<engine::ModelOptions> ModelOptionsFromFlags() {
  engine::ModelOptions model;
  model.name = ModelFlag();
  model.num_dense = FLAGS_num_dense;
  model.num_slots = FLAGS_num_slots;
  model.num_tasks = FLAGS_tasks > 0 ? FLAGS_tasks : engine::DefaultTaskCount(model.name);
  model.embedding_dim = FLAGS_embedding_dim;
  EMBER_ASSIGN_OR_RETURN(model.top_mlp, ParseWidths("top_mlp", FLAGS_top_mlp));
  EMBER_ASSIGN_OR_RETURN(model.params, ModelParamsFromFlags(model.name));
  return engine::ResolveModelOptions(model);
}


scheduler::CostModel PlanCostModel(const PlanInputs& in) {
  scheduler::CostModel cost(&in.graph);
  cost.set_stage_scales(in.stage_scales);
  cost.set_dense_measurement(in.dense);
  return cost;
}

Result<PlanInputs> PlanInputsFromFlags() {
  PlanInputs in;
  EMBER_ASSIGN_OR_RETURN(const engine::ModelOptions model, ModelOptionsFromFlags());
  EMBER_ASSIGN_OR_RETURN(in.program, ProgramFromFlags(model, &in.table_sizing));
  scheduler::CalibrationOptions calibration;
  calibration.cache_dir = FLAGS_calibration_dir;
  calibration.force = FLAGS_recalibrate;
  calibration.progress = [](const std::string& line) { VLOG(1) << line; };
  if (!FLAGS_cluster.empty()) {
    EMBER_ASSIGN_OR_RETURN(in.graph, scheduler::ReadClusterFile(FLAGS_cluster));
  } else {
    in.graph = scheduler::DiscoverLocalHost();
    bool from_cache = false;
    EMBER_RETURN_IF_ERROR(scheduler::Calibrate(&in.graph, calibration, &from_cache));
    VLOG(1) << "calibration " << (from_cache ? "read from " : "written to ")
              << scheduler::CalibrationCachePath(in.graph, calibration);
    if (!FLAGS_recalibrate) in.stage_scales = LoadRefinement(in.graph);
  }
  // The knobs the training flags give.
  in.start.batch = FLAGS_batch_size;
  in.start.depth = FLAGS_pipeline_depth;
  in.start.staleness = FLAGS_max_staleness;
  in.start.pipeline = FLAGS_pipeline == "on";
  in.start.prefetch = FLAGS_prefetch;
  in.start.early_pulls = FLAGS_early_pulls;
  in.start.ranks = PlanRanks();
  in.start.dense_bucket_bytes = FLAGS_dense_bucket_kib * 1024;
  const int host_threads = in.graph.cpu_threads();
  in.start.threads = FLAGS_threads > 0 ? std::min(FLAGS_threads, host_threads) : host_threads;
  in.fixed_threads = SetOnCommandLine("threads");
  in.fixed_pipeline = SetOnCommandLine("pipeline");
  in.fixed_depth = SetOnCommandLine("pipeline_depth");
  EMBER_ASSIGN_OR_RETURN(const std::vector<int> split,
                         ParseWidths("stage_threads", FLAGS_stage_threads));
  if (!split.empty() && split.size() != 4) {
    return Status::InvalidArgument("--stage_threads=", FLAGS_stage_threads,
                                   ": expected 4 counts (unique, pull, dense, push)");
  }
  // Read runs on the trainer's own thread; the others as given.
  if (!split.empty()) {
    in.start.split = scheduler::PerStage<int>::Filled(1);
    in.start.split[scheduler::Stage::kUnique] = split[0];
    in.start.split[scheduler::Stage::kPull] = split[1];
    in.start.split[scheduler::Stage::kDense] = split[2];
    in.start.split[scheduler::Stage::kPush] = split[3];
  }

  scheduler::PlannerOptions& planner = in.planner;
  EMBER_ASSIGN_OR_RETURN(const std::vector<int64_t> threads,
                         ParseList("plan_threads", FLAGS_plan_threads));
  for (int64_t t : threads) planner.threads.push_back(static_cast<int>(t));
  if (planner.threads.empty() && in.fixed_threads) planner.threads = {in.start.threads};
  EMBER_ASSIGN_OR_RETURN(planner.batch_sizes,
                         ParseList("plan_batch_sizes", FLAGS_plan_batch_sizes));
  if (planner.batch_sizes.empty()) planner.batch_sizes = {in.start.batch};
  if (in.fixed_pipeline) {
    planner.allow_sequential = !in.start.pipeline;
    planner.allow_pipeline = in.start.pipeline;
  }
  if (in.fixed_depth) planner.depths = {in.start.depth};
  if (SetOnCommandLine("prefetch")) planner.choose_prefetch = false;
  if (SetOnCommandLine("early_pulls")) planner.choose_early_pulls = false;
  // The trainer takes any split of its threads: search it unless given.
  planner.free_split = split.empty();
  // Staleness changes what is learned: the planner goes no higher than the
  // user allows with --max_staleness.
  planner.max_staleness = in.start.staleness;
  std::string limit = FLAGS_plan_memory_limit;
  if (limit.empty()) {
    limit = FLAGS_embedding_memory_budget;
  }
  if (!limit.empty()) {
    EMBER_ASSIGN_OR_RETURN(planner.placer.memory_limit_bytes,
                           ParseByteSize("plan_memory_limit", limit));
  }
  // The dense stage may go to a GPU when this build has CUDA (a cluster plan
  // may use GPUs anyway), unless --dense_device=cpu says otherwise.
  planner.placer.allow_gpu =
      FLAGS_dense_device != "cpu" && (!FLAGS_cluster.empty() || CudaCompiledIn());
  if (FLAGS_cluster.empty()) {
    EMBER_ASSIGN_OR_RETURN(in.dense, CalibrateDense(in, model, calibration));
  }
  if (!FLAGS_plan_refine_from.empty()) {
    EMBER_ASSIGN_OR_RETURN(const scheduler::PerStage<double> measured,
                           MeasuredStageSeconds(FLAGS_plan_refine_from));
    scheduler::CostModel cost = PlanCostModel(in);
    EMBER_ASSIGN_OR_RETURN(const scheduler::Plan predicted,
                           scheduler::PredictPlan(in.program, cost, in.start, planner.placer));
    scheduler::PerStage<double> predicted_seconds;
    // By name: a plan's stages are read, unique, [disk], [pull.early], pull,
    // ...; the trainer measures pull.early and pull together as pull.
    for (scheduler::Stage s : scheduler::kAllStages) {
      const std::string name = scheduler::StageName(s);
      for (const scheduler::StagePrediction& p : predicted.stages) {
        if (p.name == name || p.name == name + ".early") predicted_seconds[s] += p.seconds;
      }
    }
    cost.Refine(predicted_seconds, measured, in.start.pipeline);
    in.stage_scales = cost.stage_scales();
    Json saved = {{"version", kRefinementVersion}};
    for (auto [mode, scale] : {std::pair{"pipelined", &in.stage_scales.pipelined},
                               std::pair{"sequential", &in.stage_scales.sequential}}) {
      Json part = Json::object();
      for (scheduler::Stage s : scheduler::kAllStages) part[scheduler::StageName(s)] = (*scale)[s];
      saved[mode] = std::move(part);
    }
    const Status written =
        WriteFileAtomic(RefinementPath(in.graph), JsonText(saved, 2) + "\n");
    if (!written.ok()) LOG(WARNING) << "refinement not saved: " << written.ToString();
    LOG(INFO) << "cost model refined from " << FLAGS_plan_refine_from << ": stage factors "
              << JsonText(saved);
  }
  return in;
}

void ApplyPlanToOptions(const scheduler::Plan& plan, engine::TrainOptions* options) {
  options->threads = plan.threads;
  options->batch_size = static_cast<int>(plan.batch_size);
  options->pipeline.pipelined = plan.pipeline;
  options->pipeline.depth = plan.pipeline_depth;
  options->pipeline.max_staleness = plan.max_staleness;
  options->table.memory_budget_bytes = plan.embedding_memory_budget_bytes;
  options->pipeline.prefetch = plan.prefetch;
  options->pipeline.early_pulls = plan.early_pulls;
  // The trainer runs one dense replica: the plan's first.
  options->model.device = plan.dense_device;
  // The trainer's stages: unique, pull, dense, push (read is its own thread).
  options->pipeline.stage_threads = plan.pipeline ? plan.stage_threads : scheduler::PerStage<int>();
  options->pipeline.stage_threads[scheduler::Stage::kRead] = 0;
}

Result<scheduler::Plan> ApplyTrainPlan(engine::TrainOptions* options) {
  if (FLAGS_plan == "off") {
    const scheduler::ResourceGraph resources = scheduler::DiscoverLocalHost();
    scheduler::PlanRequest request;
    request.threads = FLAGS_threads;
    request.dense_device = options->model.device;
    EMBER_ASSIGN_OR_RETURN(scheduler::Plan plan, scheduler::PlanLocalTraining(resources, request));
    VLOG(1) << resources.Summary();
    LOG(INFO) << "plan: " << plan.rationale;
    options->threads = plan.threads;
    return plan;
  }
  scheduler::Plan plan;
  if (FLAGS_plan == "auto") {
    EMBER_ASSIGN_OR_RETURN(PlanInputs in, PlanInputsFromFlags());
    if (FLAGS_threads > in.graph.cpu_threads()) {
      return Status::InvalidArgument("--threads=", FLAGS_threads, " exceeds the ",
                                     in.graph.cpu_threads(), " hardware threads of ",
                                     in.graph.host_name());
    }
    const scheduler::CostModel cost = PlanCostModel(in);
    EMBER_ASSIGN_OR_RETURN(plan, scheduler::MakePlan(in.program, cost, in.planner, in.start));
    plan.rationale += "; " + in.table_sizing;
    VLOG(1) << in.graph.Summary();
    // Keep a budget the user gave even if the planner found the table fits.
    if (options->table.memory_budget_bytes > 0) {
      plan.embedding_memory_budget_bytes = options->table.memory_budget_bytes;
    }
  } else {
    EMBER_ASSIGN_OR_RETURN(const std::string text, ReadFile(FLAGS_plan));
    Result<scheduler::Plan> read = scheduler::ParsePlanJson(text, FLAGS_plan);
    if (!read.ok()) return read.status().WithContext("--plan");
    plan = *std::move(read);
    if (plan.threads > HardwareThreads()) {
      return Status::InvalidArgument("--plan=", FLAGS_plan, " uses ", plan.threads,
                                     " threads; this host has ", HardwareThreads());
    }
  }
  const Device asked = options->model.device;
  ApplyPlanToOptions(plan, options);
  // A device the user named wins over the plan's.
  if (FLAGS_dense_device != "auto") options->model.device = asked;
  LOG(INFO) << "plan (" << FLAGS_plan << "): dense on " << options->model.device.ToString()
            << ", batch " << plan.batch_size << ", " << (plan.pipeline ? "pipelined" : "sequential")
            << ", depth " << plan.pipeline_depth << ", staleness " << plan.max_staleness
            << ", early pulls " << (plan.early_pulls ? "on" : "off") << ", " << plan.threads
            << " threads; predicted " << static_cast<int64_t>(plan.predicted_samples_per_sec)
            << " samples/s (" << plan.rationale << ")";
  return plan;
}

}  // namespace ember::tools
