#include "scheduler/plan.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "core/json.h"
#include "scheduler/planner.h"

namespace ember::scheduler {
namespace {

std::string Bytes(int64_t bytes) {
  char text[32];
  if (bytes >= (int64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / 1048576.0);
  }
  return text;
}

// `value` with `digits` decimals.
std::string Fixed(double value, int digits) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// The field `key` of `f` into `*out` (required unless `optional`), within
// [lo, hi].
template <typename T>
void GetWithin(JsonFields& f, const char* key, T lo, T hi, T* out, bool optional = false) {
  if (optional) {
    f.Optional(key, out);
  } else {
    f.Get(key, out);
  }
  if (!(*out >= lo && *out <= hi)) {
    throw JsonFieldError(
        key, internal::StrCat("is ", *out, "; expected a number in [", lo, ", ", hi, "]"));
  }
}

// The split of the plan's threads, in the order of kAllStages: each stage a
// whole number of threads within the plan's.
void ReadStageThreads(JsonFields& f, Plan& plan) {
  std::vector<int> split;
  f.Optional("stage_threads", &split);
  if (!f.Has("stage_threads")) return;
  if (split.size() != static_cast<size_t>(kNumStages)) {
    throw JsonFieldError(
        "stage_threads",
        internal::StrCat("has ", split.size(), " items; expected one per stage, ", kNumStages));
  }
  for (size_t i = 0; i < kAllStages.size(); ++i) {
    const Stage stage = kAllStages[i];
    if (split[i] < 1 || split[i] > plan.threads) {
      throw JsonFieldError(internal::StrCat("stage_threads[", i, "]"),
                           internal::StrCat("(", StageName(stage), ") is ", split[i],
                                            "; expected a number of threads in [1, ", plan.threads,
                                            "] (the plan's threads)"));
    }
    plan.stage_threads[stage] = split[i];
  }
}

}  // namespace

// The stage's name is its key in the plan's "stages".
constexpr auto kStagePredictionFields = [](auto& s, auto&& field) {
  field("device", s.device);
  field("seconds", s.seconds);
  field("cores", s.cores);
  field("busy_fraction", s.busy_fraction);
};
void to_json(Json& j, const StagePrediction& s) { WriteJsonFields(j, s, kStagePredictionFields); }
void from_json(const Json& j, StagePrediction& s) { ReadJsonFields(j, s, kStagePredictionFields); }

constexpr auto kDeviceNeedFields = [](auto& n, auto&& field) {
  field("device", n.device);
  field("what", n.what);
  field("bytes", n.bytes);
  field("capacity_bytes", n.capacity_bytes);
};
void to_json(Json& j, const DeviceNeed& n) { WriteJsonFields(j, n, kDeviceNeedFields); }
void from_json(const Json& j, DeviceNeed& n) { ReadJsonFields(j, n, kDeviceNeedFields); }

constexpr auto kLinkNeedFields = [](auto& l, auto&& field) {
  field("link", l.link);
  field("gbps_needed", l.gbps_needed);
  field("gbps_available", l.gbps_available);
};
void to_json(Json& j, const LinkNeed& l) { WriteJsonFields(j, l, kLinkNeedFields); }
void from_json(const Json& j, LinkNeed& l) { ReadJsonFields(j, l, kLinkNeedFields); }

void to_json(Json& j, const PipelineParallelPrediction& p) {
  j = Json{{"ranks", p.ranks},
           {"virtual_stages", p.virtual_stages},
           {"micro_batches", p.micro_batches},
           {"schedule", p.schedule},
           {"step_seconds", p.step_seconds},
           {"samples_per_sec", p.samples_per_sec},
           {"bubble_ratio", p.bubble_ratio},
           {"rank_activation_bytes", p.rank_activation_bytes},
           {"unpipelined_step_seconds", p.unpipelined_step_seconds}};
}

void from_json(const Json& j, PipelineParallelPrediction& p) {
  JsonFields f(j);
  f.Get("ranks", &p.ranks);
  f.Get("virtual_stages", &p.virtual_stages);
  f.Get("micro_batches", &p.micro_batches);
  f.Get("schedule", &p.schedule);
  f.Get("step_seconds", &p.step_seconds);
  f.Get("samples_per_sec", &p.samples_per_sec);
  f.Get("bubble_ratio", &p.bubble_ratio);
  // Plans written before nlohmann wrote these bytes as doubles ("%.10g":
  // 1.2e+10 from ten gigabytes on).
  std::vector<double> bytes;
  f.Get("rank_activation_bytes", &bytes);
  p.rank_activation_bytes.assign(bytes.begin(), bytes.end());
  f.Get("unpipelined_step_seconds", &p.unpipelined_step_seconds);
  f.Done();
}

void to_json(Json& j, const Plan& plan) {
  j = Json{
      {"model", plan.model},
      {"dense_device", plan.dense_device.ToString()},
      {"threads", plan.threads},
      {"batch_size", plan.batch_size},
      {"pipeline", plan.pipeline},
      {"pipeline_depth", plan.pipeline_depth},
      {"max_staleness", plan.max_staleness},
      {"embedding_memory_budget_bytes", plan.embedding_memory_budget_bytes},
      {"prefetch", plan.prefetch},
      {"early_pulls", plan.early_pulls},
      {"stage_threads", std::vector<int>(plan.stage_threads.begin(), plan.stage_threads.end())},
      {"replicas", plan.replicas},
      {"sparse_hosts", plan.sparse_hosts}};
  Json& placement = j["placement"] = Json::object();
  for (const auto& [op, device] : plan.placement) placement[op] = device;
  Json& stages = j["stages"] = Json::object();
  for (const StagePrediction& s : plan.stages) stages[s.name] = s;
  j["bottleneck"] = plan.bottleneck;
  j["predicted_step_seconds"] = plan.predicted_step_seconds;
  j["predicted_samples_per_sec"] = plan.predicted_samples_per_sec;
  if (plan.embedding_memory_budget_bytes > 0) {
    j["memory_tier_hit_rate"] = plan.memory_tier_hit_rate;
    j["disk_reads_per_step"] = plan.disk_reads_per_step;
    j["disk_writes_per_step"] = plan.disk_writes_per_step;
  }
  // Plans of one rank are written as before there were ranks.
  if (plan.ranks > 1) {
    j["ranks"] = plan.ranks;
    j["ranks_per_host"] = plan.ranks_per_host;
    j["exchange_bytes_per_step"] = plan.exchange_bytes_per_step;
    j["expert_exchange_bytes_per_step"] = plan.expert_exchange_bytes_per_step;
    j["expert_exchange_seconds_per_step"] = plan.expert_exchange_seconds_per_step;
    j["exchange_seconds_per_step"] = plan.exchange_seconds_per_step;
    j["exchange_share"] = plan.exchange_share;
  }
  j["needs"] = plan.needs;
  j["links"] = plan.links;
  j["rationale"] = plan.rationale;
  if (plan.pipeline_parallel.ranks > 0) j["pipeline_parallel"] = plan.pipeline_parallel;
}

// Optional, as in the files of older versions: the model, the dense device,
// early pulls and the split (the trainer's default without one), and the
// fields written only for some plans (a memory tier, ranks, pipeline
// parallelism).
void from_json(const Json& j, Plan& plan) {
  JsonFields f(j);
  f.Optional("model", &plan.model);
  std::string device = plan.dense_device.ToString();
  f.Optional("dense_device", &device);
  Result<Device> dense_device = ParseDevice(device);
  if (!dense_device.ok()) {
    throw JsonFieldError("dense_device", "is \"" + device + "\"; expected cpu, cuda or cuda:N");
  }
  plan.dense_device = *dense_device;
  GetWithin(f, "threads", 1, 1 << 16, &plan.threads);
  GetWithin(f, "batch_size", int64_t{1}, int64_t{1} << 24, &plan.batch_size);
  f.Get("pipeline", &plan.pipeline);
  GetWithin(f, "pipeline_depth", 1, 1 << 10, &plan.pipeline_depth);
  GetWithin(f, "max_staleness", 0, 1 << 10, &plan.max_staleness);
  GetWithin(f, "embedding_memory_budget_bytes", int64_t{0}, std::numeric_limits<int64_t>::max(),
            &plan.embedding_memory_budget_bytes);
  f.Get("prefetch", &plan.prefetch);
  f.Optional("early_pulls", &plan.early_pulls);
  plan.stage_threads = TrainerStageThreads(plan.threads, plan.pipeline);
  ReadStageThreads(f, plan);
  f.Get("replicas", &plan.replicas);
  f.Get("sparse_hosts", &plan.sparse_hosts);
  f.Get("placement", &plan.placement);
  std::vector<std::pair<std::string, StagePrediction>> stages;
  f.Get("stages", &stages);
  plan.stages.clear();
  for (auto& [name, stage] : stages) {
    stage.name = name;
    plan.stages.push_back(std::move(stage));
  }
  f.Get("bottleneck", &plan.bottleneck);
  f.Get("predicted_step_seconds", &plan.predicted_step_seconds);
  GetWithin(f, "predicted_samples_per_sec", 0.0, 1e15, &plan.predicted_samples_per_sec);
  f.Optional("memory_tier_hit_rate", &plan.memory_tier_hit_rate);
  f.Optional("disk_reads_per_step", &plan.disk_reads_per_step);
  f.Optional("disk_writes_per_step", &plan.disk_writes_per_step);
  GetWithin(f, "ranks", 1, 1 << 20, &plan.ranks, /*optional=*/true);
  GetWithin(f, "ranks_per_host", 1, plan.ranks, &plan.ranks_per_host, /*optional=*/true);
  f.Optional("exchange_bytes_per_step", &plan.exchange_bytes_per_step);
  f.Optional("expert_exchange_bytes_per_step", &plan.expert_exchange_bytes_per_step);
  f.Optional("expert_exchange_seconds_per_step", &plan.expert_exchange_seconds_per_step);
  f.Optional("exchange_seconds_per_step", &plan.exchange_seconds_per_step);
  f.Optional("exchange_share", &plan.exchange_share);
  f.Get("needs", &plan.needs);
  f.Get("links", &plan.links);
  f.Get("rationale", &plan.rationale);
  f.Optional("pipeline_parallel", &plan.pipeline_parallel);
  f.Done();
}

std::string Plan::ToText() const {
  std::string out;
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "plan for %s: batch %lld, %s (depth %d, max staleness %d, early pulls %s), %d threads "
      "(read %d, unique %d, pull %d, dense %d, push %d)\n",
      model.c_str(), static_cast<long long>(batch_size), pipeline ? "pipelined" : "sequential",
      pipeline_depth, max_staleness, early_pulls ? "on" : "off", threads,
      stage_threads[Stage::kRead], stage_threads[Stage::kUnique], stage_threads[Stage::kPull],
      stage_threads[Stage::kDense], stage_threads[Stage::kPush]);
  out += line;
  out += "placement:\n";
  std::map<std::string, std::string> by_device;
  for (const auto& [op, device] : placement) {
    std::string& ops = by_device[device];
    ops += (ops.empty() ? "" : ", ") + op;
  }
  for (const auto& [device, ops] : by_device) out += "  " + device + ": " + ops + "\n";
  if (replicas.size() > 1) {
    out += "  dense replicas in ring order: ";
    for (size_t i = 0; i < replicas.size(); ++i) out += (i ? " " : "") + replicas[i];
    out += "\n  table sharded over " + std::to_string(sparse_hosts) + " host(s)\n";
  }
  out += "embedding memory tier: " +
         (embedding_memory_budget_bytes > 0
              ? Bytes(embedding_memory_budget_bytes) + " (rows beyond it on disk, prefetch " +
                    (prefetch ? "on" : "off") + "; per batch " + Fixed(100 * memory_tier_hit_rate, 1) +
                    "% of its distinct ids in memory, " + Fixed(disk_reads_per_step, 0) +
                    " rows read from disk and " + Fixed(disk_writes_per_step, 0) + " written)"
              : std::string("the whole table")) +
         "\n";
  out += "predicted stage times per batch:\n";
  for (const StagePrediction& s : stages) {
    std::snprintf(line, sizeof(line), "  %-13s %-22s %9.3f ms  busy %5.1f%%%s\n", s.name.c_str(),
                  s.device.c_str(), s.seconds * 1e3, 100.0 * s.busy_fraction,
                  s.name == bottleneck ? "  <- bottleneck" : "");
    out += line;
  }
  std::snprintf(line, sizeof(line), "predicted: %.3f ms per step, %.0f samples/s\n",
                predicted_step_seconds * 1e3, predicted_samples_per_sec);
  out += line;
  if (ranks > 1) {
    std::snprintf(line, sizeof(line),
                  "ranks: %d (%d per host), %.0f samples/s per rank; exchange per rank and step: "
                  "%s sent, %.3f ms, %.1f%% of the step\n",
                  ranks, ranks_per_host, predicted_samples_per_sec / ranks,
                  Bytes(static_cast<int64_t>(exchange_bytes_per_step)).c_str(),
                  exchange_seconds_per_step * 1e3, 100.0 * exchange_share);
    out += line;
    if (expert_exchange_bytes_per_step > 0) {
      std::snprintf(line, sizeof(line),
                    "  of which the experts' rows (expert parallelism): %s, %.3f ms\n",
                    Bytes(static_cast<int64_t>(expert_exchange_bytes_per_step)).c_str(),
                    expert_exchange_seconds_per_step * 1e3);
      out += line;
    }
  }
  out += "needs:\n";
  for (const DeviceNeed& n : needs) {
    std::snprintf(line, sizeof(line), "  %-22s %-28s %12s of %s\n", n.device.c_str(),
                  n.what.c_str(), Bytes(n.bytes).c_str(), Bytes(n.capacity_bytes).c_str());
    out += line;
  }
  for (const LinkNeed& l : links) {
    std::snprintf(line, sizeof(line), "  %-51s %8.3f GB/s of %.1f\n", l.link.c_str(), l.gbps_needed,
                  l.gbps_available);
    out += line;
  }
  if (!rationale.empty()) out += "why: " + rationale + "\n";
  return out;
}

std::string Plan::ToJson() const { return JsonText(Json(*this), 2) + "\n"; }

std::string Plan::ToDot(const Program& program) const {
  std::map<std::string, std::string> device_of(placement.begin(), placement.end());
  std::map<std::string, std::vector<int>> ops_on;
  for (size_t i = 0; i < program.ops.size(); ++i) {
    ops_on[device_of.count(program.ops[i].name) ? device_of[program.ops[i].name] : "?"].push_back(
        static_cast<int>(i));
  }
  std::string dot = "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=filled];\n";
  int cluster = 0;
  for (const auto& [device, ops] : ops_on) {
    const bool gpu = device.find("/gpu") != std::string::npos;
    dot += "  subgraph cluster_" + std::to_string(cluster++) +
           " {\n    label=" + JsonText(Json(device)) + ";\n";
    for (int i : ops) {
      const ProgramOp& op = program.ops[i];
      dot += "    op" + std::to_string(i) + " [label=" +
             JsonText(Json(op.name + "\\n" + op.op + " (" + StageName(op.stage) + ")")) +
             ", fillcolor=" +
             (op.sparse ? "\"#f4d6a0\""
              : gpu     ? "\"#a0d6a8\""
                        : "\"#a8c8f0\"") +
             "];\n";
    }
    dot += "  }\n";
  }
  for (size_t i = 0; i < program.ops.size(); ++i) {
    for (int t : program.ops[i].inputs) {
      const ProgramTensor& tensor = program.tensors[t];
      if (tensor.producer < 0) continue;
      char label[64];
      std::snprintf(label, sizeof(label), "%.0f B/ex", tensor.bytes_per_example);
      dot += "  op" + std::to_string(tensor.producer) + " -> op" + std::to_string(i) +
             " [label=\"" + label + "\"];\n";
    }
  }
  return dot + "}\n";
}

Result<Plan> ParsePlanJson(const std::string& text, const std::string& path) {
  return FromJsonText<Plan>(text, path);
}

Result<Plan> PlanLocalTraining(const ResourceGraph& resources, const PlanRequest& request) {
  Plan plan;
  if (request.threads > resources.cpu_threads()) {
    return Status::InvalidArgument("--threads=", request.threads, " exceeds the ",
                                   resources.cpu_threads(), " hardware threads of ",
                                   resources.host_name());
  }
  plan.threads = request.threads > 0 ? request.threads : resources.cpu_threads();
  const std::vector<Device> gpus = resources.cuda_devices();
  if (request.dense_device.is_cuda()) {
    if (std::find(gpus.begin(), gpus.end(), request.dense_device) == gpus.end()) {
      return Status::FailedPrecondition("--dense_device=", request.dense_device.ToString(), ": ",
                                        resources.host_name(), " has ", gpus.size(),
                                        " CUDA device(s)");
    }
    plan.dense_device = request.dense_device;
    plan.rationale = "dense stages on " + plan.dense_device.ToString() + ", sparse on CPU";
  } else if (!gpus.empty()) {
    plan.rationale = "dense stages on CPU (--dense_device=cuda puts them on a GPU)";
  } else {
    plan.rationale = "dense and sparse stages on CPU: no CUDA device";
  }
  plan.rationale += "; " + std::to_string(plan.threads) + " threads";
  return plan;
}

}  // namespace ember::scheduler
