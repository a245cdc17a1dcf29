#include "pipeline/pipeline_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "ops/op_registry.h"
#include "pipeline/schedule_simulator.h"
#include "scheduler/planner.h"

namespace ember::pipeline {
namespace {

Status ValidateLink(const char* name, const PipelineLink& link) {
  if (!(link.bytes_per_second > 0) || !std::isfinite(link.bytes_per_second)) {
    return Status::InvalidArgument("pipeline choice: placement.", name, ".bytes_per_second ",
                                   link.bytes_per_second, " is not a positive number");
  }
  if (!(link.latency_seconds >= 0) || !std::isfinite(link.latency_seconds)) {
    return Status::InvalidArgument("pipeline choice: placement.", name, ".latency_seconds ",
                                   link.latency_seconds, " is not a number >= 0");
  }
  return Status::OK();
}

Status ValidateOptions(const ops::Graph& graph, const scheduler::CostModel& cost,
                       const PipelineChoiceOptions& o) {
  if (o.batch_size < 1) {
    return Status::InvalidArgument("pipeline choice: batch_size ", o.batch_size, " < 1");
  }
  if (o.max_ranks < 1) {
    return Status::InvalidArgument("pipeline choice: max_ranks ", o.max_ranks, " < 1");
  }
  if (o.rank_activation_limit_bytes < 0) {
    return Status::InvalidArgument("pipeline choice: rank_activation_limit_bytes ",
                                   o.rank_activation_limit_bytes, " < 0");
  }
  if (o.max_virtual_stages < 1) {
    return Status::InvalidArgument("pipeline choice: max_virtual_stages ", o.max_virtual_stages,
                                   " < 1");
  }
  if (o.max_micro_batches < 1) {
    return Status::InvalidArgument("pipeline choice: max_micro_batches ", o.max_micro_batches,
                                   " < 1");
  }
  const RankPlacement& p = o.placement;
  if (p.hosts < 1) {
    return Status::InvalidArgument("pipeline choice: placement.hosts ", p.hosts, " < 1");
  }
  if (p.threads < 1) {
    return Status::InvalidArgument("pipeline choice: placement.threads ", p.threads, " < 1");
  }
  if (p.device < 0 || p.device >= static_cast<int>(cost.graph().devices.size())) {
    return Status::InvalidArgument("pipeline choice: placement.device ", p.device,
                                   " is not a device of the resource graph (",
                                   cost.graph().devices.size(), " devices)");
  }
  EMBER_RETURN_IF_ERROR(ValidateLink("loopback", p.loopback));
  EMBER_RETURN_IF_ERROR(ValidateLink("network", p.network));
  if (graph.nodes().empty())
    return Status::InvalidArgument("pipeline choice: the graph has no nodes");
  return Status::OK();
}

// Each node's forward and backward seconds at `batch` (DenseOpSeconds of
// each alone, which add up to the partition's node seconds).
void NodeSeconds(const ops::Graph& graph, const scheduler::CostModel& cost, int64_t batch,
                 int device, int threads, std::vector<double>* forward,
                 std::vector<double>* backward) {
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    for (const bool is_backward : {false, true}) {
      scheduler::ProgramOp op;
      op.name = graph.nodes()[n].name;
      op.op = graph.nodes()[n].op;
      // DenseOpSeconds wants work per example.
      ops::OpCost c = graph.NodeCost(static_cast<int>(n), batch, is_backward);
      c.flops /= static_cast<double>(batch);
      c.bytes /= static_cast<double>(batch);
      (is_backward ? op.backward : op.forward) = c;
      (is_backward ? backward : forward)
          ->push_back(cost.DenseOpSeconds(op, batch, device, threads));
    }
  }
}

// Bytes per micro-batch of the activations made before node `end` and read
// at or after it: what crosses a chunk boundary there.
int64_t BoundaryBytes(const ops::Graph& graph, int end, int64_t batch) {
  int64_t bytes = 0;
  for (size_t v = 0; v < graph.values().size(); ++v) {
    const ops::GraphValue& value = graph.values()[v];
    if (value.kind != ops::ValueKind::kActivation || value.producer >= end) continue;
    for (size_t n = end; n < graph.nodes().size(); ++n) {
      const std::vector<int>& in = graph.nodes()[n].inputs;
      if (std::find(in.begin(), in.end(), static_cast<int>(v)) != in.end()) {
        bytes += value.elements() * 4 * batch;
        break;
      }
    }
  }
  return bytes;
}

// The most micro-batches any chunk holds at once (forward run, its release
// not: ReleaseKind).
int MaxInFlightPerChunk(const Schedule& schedule) {
  const InstrKind release = ReleaseKind(schedule);
  int most = 1;
  std::vector<int> held(static_cast<size_t>(schedule.shape.chunks()), 0);
  for (const std::vector<Instr>& rank : schedule.ranks) {
    for (const Instr& instr : rank) {
      if (instr.kind == InstrKind::kForward) most = std::max(most, ++held[instr.chunk]);
      if (instr.kind == release) --held[instr.chunk];
    }
  }
  return most;
}

// Each rank's peak activation bytes over its instructions.
std::vector<int64_t> PeakRankBytes(const Schedule& schedule,
                                   const scheduler::PipelinePartition& partition) {
  const InstrKind release = ReleaseKind(schedule);
  std::vector<int64_t> peaks;
  for (const std::vector<Instr>& rank : schedule.ranks) {
    int64_t held = 0, peak = 0;
    for (const Instr& instr : rank) {
      const int64_t bytes = instr.is_compute() ? partition.chunks[instr.chunk].activation_bytes : 0;
      if (instr.kind == InstrKind::kForward) held += bytes;
      if (instr.kind == release) held -= bytes;
      peak = std::max(peak, held);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

// Of each node's backward seconds, those of the parameter gradients a
// zero-bubble schedule runs apart (kBackwardWeight): half the backward of a
// node whose kernel on `device` splits them (the fully connected layer,
// whose dweight is one of its two products), none of another's.
std::vector<double> NodeWeightSeconds(const ops::Graph& graph, DeviceType device,
                                      const std::vector<double>& backward) {
  std::vector<double> weight;
  for (size_t n = 0; n < graph.nodes().size(); ++n) {
    Result<const ops::KernelPair*> kernel = graph.registry().FindKernel(graph.nodes()[n].op, device);
    const bool splits = kernel.ok() && (*kernel)->splits_parameter_gradients;
    weight.push_back(splits ? backward[n] / 2 : 0.0);
  }
  return weight;
}

// Partitions, times and simulates one candidate; ResourceExhausted when no
// partition fits `limit`.
Result<PipelineCandidate> Evaluate(const ops::Graph& graph, const scheduler::CostModel& cost,
                                   const PipelineChoiceOptions& o, const std::string& kind,
                                   const ScheduleShape& shape, int64_t limit) {
  EMBER_ASSIGN_OR_RETURN(const Schedule schedule, BuiltinSchedules().Make(kind, shape));
  const RankPlacement& place = o.placement;
  const int per_host = scheduler::RanksPerHost(shape.ranks, place.hosts);
  const PipelineLink& link = per_host >= shape.ranks ? place.loopback : place.network;
  PipelineCandidate c;
  c.kind = kind;
  c.shape = shape;
  c.micro_batch_size = o.batch_size / shape.micro_batches;
  scheduler::PipelinePartitionOptions part;
  part.ranks = shape.ranks;
  part.virtual_stages = shape.virtual_stages;
  part.micro_batch_size = c.micro_batch_size;
  part.rank_activation_limit_bytes = limit;
  part.micro_batches_in_flight = MaxInFlightPerChunk(schedule);
  part.device = place.device;
  part.threads = place.threads;
  EMBER_ASSIGN_OR_RETURN(c.partition, scheduler::PartitionDenseGraph(graph, cost, part));

  std::vector<double> node_forward, node_backward;
  NodeSeconds(graph, cost, c.micro_batch_size, part.device, part.threads, &node_forward,
              &node_backward);
  const bool on_cpu = cost.graph().devices[static_cast<size_t>(part.device)].kind ==
                      scheduler::DeviceKind::kCpu;
  const std::vector<double> node_weight =
      NodeWeightSeconds(graph, on_cpu ? DeviceType::kCpu : DeviceType::kCuda, node_backward);
  ScheduleCosts costs;
  costs.forward_seconds.clear();
  costs.backward_seconds.clear();
  for (const scheduler::PipelineChunk& chunk : c.partition.chunks) {
    double forward = 0, backward = 0, weight = 0;
    for (int n = chunk.first_node; n < chunk.end_node; ++n) {
      forward += node_forward[n];
      backward += node_backward[n];
      weight += node_weight[n];
    }
    // The host's ranks share its device.
    costs.forward_seconds.push_back(forward * per_host);
    costs.backward_seconds.push_back(backward * per_host);
    costs.weight_seconds.push_back(std::min(weight, backward) * per_host);
    if (shape.ranks > 1 && chunk.end_node < static_cast<int>(graph.nodes().size())) {
      const double bytes =
          static_cast<double>(BoundaryBytes(graph, chunk.end_node, c.micro_batch_size));
      c.send_seconds =
          std::max(c.send_seconds, bytes / link.bytes_per_second + link.latency_seconds);
    }
  }
  costs.send_latency_seconds = c.send_seconds;
  EMBER_ASSIGN_OR_RETURN(const Timeline timeline, SimulateSchedule(schedule, costs));
  c.step_seconds = timeline.step_seconds;
  c.samples_per_second = static_cast<double>(o.batch_size) / timeline.step_seconds;
  c.bubble_ratio = timeline.bubble_ratio();
  c.rank_activation_bytes = PeakRankBytes(schedule, c.partition);
  return c;
}

bool Before(const PipelineCandidate& a, const PipelineCandidate& b) {
  const auto key = [](const PipelineCandidate& c) {
    return std::tuple(c.step_seconds, c.shape.ranks, c.shape.virtual_stages, c.shape.micro_batches,
                      c.peak_activation_bytes(), c.kind);
  };
  return key(a) < key(b);
}

std::string Mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

}  // namespace

RankPlacement RankPlacementOf(const scheduler::CostModel& cost) {
  const scheduler::ResourceGraph& graph = cost.graph();
  RankPlacement place;
  place.hosts = std::max<int>(1, static_cast<int>(graph.hosts.size()));
  const std::vector<int> cpus = graph.DevicesOf(scheduler::DeviceKind::kCpu, 0);
  place.device = cpus.empty() ? 0 : cpus[0];
  place.threads = std::max(1, graph.devices.empty() ? 1 : graph.devices[place.device].cores);
  place.loopback = {cost.options().loopback_gbps * 1e9, cost.options().loopback_latency_us * 1e-6};
  place.network = place.loopback;
  if (place.hosts > 1 && !cpus.empty()) {
    const std::vector<int> other = graph.DevicesOf(scheduler::DeviceKind::kCpu, 1);
    const scheduler::Link* net = other.empty() ? nullptr : graph.LinkBetween(cpus[0], other[0]);
    if (net) place.network = {net->gbps * 1e9, net->latency_us * 1e-6};
  }
  return place;
}

int64_t PipelineCandidate::peak_activation_bytes() const {
  return rank_activation_bytes.empty()
             ? 0
             : *std::max_element(rank_activation_bytes.begin(), rank_activation_bytes.end());
}

Result<PipelineChoice> ChoosePipeline(const ops::Graph& graph, const scheduler::CostModel& cost,
                                      const PipelineChoiceOptions& options) {
  EMBER_RETURN_IF_ERROR(ValidateOptions(graph, cost, options));
  const int nodes = static_cast<int>(graph.nodes().size());
  const int64_t limit = options.rank_activation_limit_bytes;
  PipelineChoice choice;
  EMBER_ASSIGN_OR_RETURN(choice.unpipelined,
                         Evaluate(graph, cost, options, "1f1b", ScheduleShape{1, 1, 1}, 0));
  for (int p = 1; p <= std::min(options.max_ranks, nodes); ++p) {
    for (int v = 1; v <= options.max_virtual_stages && p * v <= nodes; ++v) {
      if (p == 1 && v > 1) break;
      for (int m = 1; m <= options.max_micro_batches && m <= options.batch_size; ++m) {
        if (options.batch_size % m != 0) continue;
        for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
          const std::string k = kind;
          if ((p == 1 && k != "1f1b") || ((k == "1f1b" || k == "zb-h1") && v > 1) ||
              (k == "interleaved" && m % p != 0)) {
            continue;
          }
          Result<PipelineCandidate> c = Evaluate(graph, cost, options, k, {p, v, m}, limit);
          if (c.status().code() == StatusCode::kResourceExhausted) {
            ++choice.over_limit;
            continue;
          }
          if (!c.ok()) return c.status();
          choice.candidates.push_back(*std::move(c));
        }
      }
    }
  }
  if (choice.candidates.empty()) {
    return Status::ResourceExhausted("pipeline choice: no candidate of up to ", options.max_ranks,
                                     " ranks keeps every rank within rank_activation_limit_bytes ",
                                     limit, " (unpipelined, a rank holds ",
                                     choice.unpipelined.peak_activation_bytes(), ")");
  }
  std::sort(choice.candidates.begin(), choice.candidates.end(), Before);
  choice.chosen = choice.candidates.front();
  return choice;
}

std::string ToString(const PipelineCandidate& c) {
  char line[160];
  std::snprintf(line, sizeof(line),
                "%s %s: %.3f ms per step, %.0f samples/s, bubble %.3f, activations per rank",
                c.kind.c_str(), ToString(c.shape).c_str(), c.step_seconds * 1e3,
                c.samples_per_second, c.bubble_ratio);
  std::string text = line;
  for (int64_t bytes : c.rank_activation_bytes) text.append(" ").append(Mib(bytes));
  return text;
}

std::string ToText(const PipelineChoice& choice, int alternatives) {
  std::string text = "pipeline: " + ToString(choice.chosen) + "\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  unpipelined (p=1 v=1 m=1): %.3f ms per step (%.2fx)\n",
                choice.unpipelined.step_seconds * 1e3,
                choice.unpipelined.step_seconds / choice.chosen.step_seconds);
  text += line;
  std::snprintf(line, sizeof(line), "  %zu candidates within the limit, %d over it; next best:\n",
                choice.candidates.size(), choice.over_limit);
  text += line;
  for (size_t i = 1; i < choice.candidates.size() && static_cast<int>(i) <= alternatives; ++i) {
    text += "    " + ToString(choice.candidates[i]) + "\n";
  }
  return text;
}

}  // namespace ember::pipeline
