#include "scheduler/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/json.h"
#include "scheduler/cluster_file.h"
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

std::string JsonStringArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + JsonQuote(items[i]);
  return out + "]";
}

double Number(const JsonValue* v) { return v ? std::strtod(v->text.c_str(), nullptr) : 0.0; }

}  // namespace

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

std::string Plan::ToJson() const {
  JsonObject root;
  root.Add("model", model).Add("dense_device", dense_device.ToString()).Add("threads", threads);
  root.Add("batch_size", batch_size)
      .Add("pipeline", pipeline)
      .Add("pipeline_depth", pipeline_depth)
      .Add("max_staleness", max_staleness)
      .Add("embedding_memory_budget_bytes", embedding_memory_budget_bytes)
      .Add("prefetch", prefetch)
      .Add("early_pulls", early_pulls);
  std::vector<double> split(stage_threads.begin(), stage_threads.end());
  root.AddRaw("stage_threads", JsonNumberArray(split));
  root.AddRaw("replicas", JsonStringArray(replicas)).Add("sparse_hosts", sparse_hosts);
  JsonObject placed;
  for (const auto& [op, device] : placement) placed.Add(op, device);
  root.Add("placement", placed);
  JsonObject stage_json;
  for (const StagePrediction& s : stages) {
    JsonObject one;
    one.Add("device", s.device)
        .Add("seconds", s.seconds)
        .Add("cores", s.cores)
        .Add("busy_fraction", s.busy_fraction);
    stage_json.Add(s.name, one);
  }
  root.Add("stages", stage_json)
      .Add("bottleneck", bottleneck)
      .Add("predicted_step_seconds", predicted_step_seconds)
      .Add("predicted_samples_per_sec", predicted_samples_per_sec);
  if (embedding_memory_budget_bytes > 0) {
    root.Add("memory_tier_hit_rate", memory_tier_hit_rate)
        .Add("disk_reads_per_step", disk_reads_per_step)
        .Add("disk_writes_per_step", disk_writes_per_step);
  }
  // Plans of one rank are written as before there were ranks.
  if (ranks > 1) {
    root.Add("ranks", ranks)
        .Add("ranks_per_host", ranks_per_host)
        .Add("exchange_bytes_per_step", exchange_bytes_per_step)
        .Add("expert_exchange_bytes_per_step", expert_exchange_bytes_per_step)
        .Add("expert_exchange_seconds_per_step", expert_exchange_seconds_per_step)
        .Add("exchange_seconds_per_step", exchange_seconds_per_step)
        .Add("exchange_share", exchange_share);
  }
  std::string needs_json = "[";
  for (size_t i = 0; i < needs.size(); ++i) {
    JsonObject n;
    n.Add("device", needs[i].device)
        .Add("what", needs[i].what)
        .Add("bytes", needs[i].bytes)
        .Add("capacity_bytes", needs[i].capacity_bytes);
    needs_json += (i ? ", " : "") + n.ToString(-1);
  }
  root.AddRaw("needs", needs_json + "]");
  std::string links_json = "[";
  for (size_t i = 0; i < links.size(); ++i) {
    JsonObject l;
    l.Add("link", links[i].link)
        .Add("gbps_needed", links[i].gbps_needed)
        .Add("gbps_available", links[i].gbps_available);
    links_json += (i ? ", " : "") + l.ToString(-1);
  }
  root.AddRaw("links", links_json + "]").Add("rationale", rationale);
  if (pipeline_parallel.ranks > 0) {
    const PipelineParallelPrediction& p = pipeline_parallel;
    JsonObject pp;
    pp.Add("ranks", p.ranks)
        .Add("virtual_stages", p.virtual_stages)
        .Add("micro_batches", p.micro_batches)
        .Add("schedule", p.schedule)
        .Add("step_seconds", p.step_seconds)
        .Add("samples_per_sec", p.samples_per_sec)
        .Add("bubble_ratio", p.bubble_ratio)
        .AddRaw("rank_activation_bytes",
                JsonNumberArray(std::vector<double>(p.rank_activation_bytes.begin(),
                                                    p.rank_activation_bytes.end())))
        .Add("unpipelined_step_seconds", p.unpipelined_step_seconds);
    root.Add("pipeline_parallel", pp);
  }
  return root.ToString();
}

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
           " {\n    label=" + JsonQuote(device) + ";\n";
    for (int i : ops) {
      const ProgramOp& op = program.ops[i];
      dot += "    op" + std::to_string(i) +
             " [label=" + JsonQuote(op.name + "\\n" + op.op + " (" + StageName(op.stage) + ")") +
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
  EMBER_ASSIGN_OR_RETURN(const JsonValue root, ParseJsonAt(text, path));
  if (root.type != JsonValue::Type::kObject)
    return Status::InvalidArgument(path, ": expected an object");
  Plan plan;
  auto number = [&](const char* key, double lo, double hi, double* out) -> Status {
    const JsonValue* v = root.Find(key);
    if (v == nullptr) return Status::InvalidArgument(path, ": field \"", key, "\" is missing");
    if (v->type != JsonValue::Type::kNumber || Number(v) < lo || Number(v) > hi) {
      return Status::InvalidArgument(path, ": ", key, ": expected a number in [", lo, ", ", hi,
                                     "]");
    }
    *out = Number(v);
    return Status::OK();
  };
  auto boolean = [&](const char* key, bool* out) -> Status {
    const JsonValue* v = root.Find(key);
    if (v == nullptr || v->type != JsonValue::Type::kBool) {
      return Status::InvalidArgument(path, ": ", key, ": expected true or false");
    }
    *out = v->boolean;
    return Status::OK();
  };
  double threads = 0, batch = 0, depth = 0, staleness = 0, budget = 0, samples = 0;
  EMBER_RETURN_IF_ERROR(number("threads", 1, 1 << 16, &threads));
  EMBER_RETURN_IF_ERROR(number("batch_size", 1, 1 << 24, &batch));
  EMBER_RETURN_IF_ERROR(number("pipeline_depth", 1, 1 << 10, &depth));
  EMBER_RETURN_IF_ERROR(number("max_staleness", 0, 1 << 10, &staleness));
  EMBER_RETURN_IF_ERROR(number("embedding_memory_budget_bytes", 0, 9.0e18, &budget));
  EMBER_RETURN_IF_ERROR(number("predicted_samples_per_sec", 0, 1e15, &samples));
  EMBER_RETURN_IF_ERROR(boolean("pipeline", &plan.pipeline));
  EMBER_RETURN_IF_ERROR(boolean("prefetch", &plan.prefetch));
  // Plans written before there was the choice have early pulls.
  if (root.Find("early_pulls") != nullptr) {
    EMBER_RETURN_IF_ERROR(boolean("early_pulls", &plan.early_pulls));
  }
  plan.threads = static_cast<int>(threads);
  plan.batch_size = static_cast<int64_t>(batch);
  plan.pipeline_depth = static_cast<int>(depth);
  plan.max_staleness = static_cast<int>(staleness);
  plan.embedding_memory_budget_bytes = static_cast<int64_t>(budget);
  plan.predicted_samples_per_sec = samples;
  // Plans of one rank have no ranks.
  if (root.Find("ranks") != nullptr) {
    double ranks = 1;
    EMBER_RETURN_IF_ERROR(number("ranks", 1, 1 << 20, &ranks));
    plan.ranks = static_cast<int>(ranks);
    if (root.Find("ranks_per_host") != nullptr) {
      double per_host = 1;
      EMBER_RETURN_IF_ERROR(number("ranks_per_host", 1, ranks, &per_host));
      plan.ranks_per_host = static_cast<int>(per_host);
    }
  }
  if (const JsonValue* model = root.Find("model");
      model && model->type == JsonValue::Type::kString) {
    plan.model = model->text;
  }
  // A plan without a split (written before there was one) has the
  // trainer's default.
  plan.stage_threads = TrainerStageThreads(plan.threads, plan.pipeline);
  if (const JsonValue* split = root.Find("stage_threads")) {
    if (split->type != JsonValue::Type::kArray || split->items.size() != kNumStages) {
      return Status::InvalidArgument(path, ": stage_threads: expected ", kNumStages, " numbers");
    }
    // The array lists the stages in the order of kAllStages.
    for (size_t i = 0; i < kAllStages.size(); ++i) {
      const Stage stage = kAllStages[i];
      const JsonValue& item = split->items[i];
      const double t = Number(&item);
      if (item.type != JsonValue::Type::kNumber || !(t >= 1 && t <= plan.threads) ||
          t != std::floor(t)) {
        return Status::InvalidArgument(path, ": stage_threads[", i, "] (", StageName(stage),
                                       ") is ", t, "; expected a whole number of threads in [1, ",
                                       plan.threads, "] (the plan's threads)");
      }
      plan.stage_threads[stage] = static_cast<int>(t);
    }
  }
  if (const JsonValue* device = root.Find("dense_device");
      device && device->type == JsonValue::Type::kString && device->text.rfind("cuda:", 0) == 0) {
    plan.dense_device = Device::Cuda(std::atoi(device->text.c_str() + 5));
  }
  return plan;
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
