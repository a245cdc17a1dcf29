#include "scheduler/placer.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace ember::scheduler {
namespace {

std::string GiB(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / 1073741824.0);
  return text;
}

// Per-batch time of the dense side on `device`: the dense stage, and on a
// GPU the copies, which overlap it in the pipeline (the slowest bounds it).
double DenseSeconds(const Program& program, const CostModel& cost, int64_t batch, int cpu,
                    int device) {
  StepSetup setup;
  setup.batch = batch;
  setup.cpu = cpu;
  setup.dense_device = device;
  setup.threads[Stage::kDense] = cost.graph().devices[cpu].cores;
  const StepCost step = cost.Estimate(program, setup);
  double seconds = step.stages[step.stage_index[Stage::kDense]].seconds;
  for (const SimStage& s : step.stages) {
    if (s.name == "h2d" || s.name == "d2h") seconds = std::max(seconds, s.seconds);
  }
  return seconds;
}

}  // namespace

double DenseMemoryBytes(const Program& program, int64_t batch) {
  // Every activation is kept for the backward pass and, unless its op saves
  // it for its own backward only, has a gradient of the same size.
  double activations = 0.0;
  for (const ProgramTensor& t : program.tensors) {
    if (t.producer >= 0 && !program.ops[t.producer].sparse) {
      activations += (t.has_gradient ? 2.0 : 1.0) * t.bytes_per_example;
    }
  }
  return program.DenseStateBytes() + activations * batch;
}

Result<Placement> Place(const Program& program, const CostModel& cost, int64_t batch,
                        const PlacerOptions& options) {
  const ResourceGraph& graph = cost.graph();
  const std::vector<int> cpus = graph.DevicesOf(DeviceKind::kCpu, 0);
  if (cpus.empty())
    return Status::InvalidArgument("the resource graph has no CPU on its first host");
  Placement p;
  p.cpu = cpus[0];
  p.sparse_hosts = static_cast<int>(graph.hosts.size());
  // The table, sharded evenly over the hosts: each keeps 1 / hosts of it.
  p.table_bytes = program.TableRows() * cost.RowBytes(program, p.cpu);
  const double per_host = p.table_bytes / p.sparse_hosts;
  int64_t limit = options.memory_limit_bytes;
  if (limit <= 0) {
    limit = std::max<int64_t>(
        0, static_cast<int64_t>(0.8 * graph.memory_bytes()) - options.reserve_bytes);
  }
  std::string why;
  if (per_host <= limit) {
    why = "table (" + GiB(p.table_bytes) + ") in DRAM";
  } else {
    const std::vector<int> disks = graph.DevicesOf(DeviceKind::kDisk, 0);
    const int64_t free = disks.empty() ? 0 : graph.devices[disks[0]].memory_bytes;
    // The disk tier holds every row it has seen written back: plan for all.
    if (free < per_host) {
      return Status::ResourceExhausted(
          "the embedding table needs ", GiB(per_host), " per host; the memory limit is ",
          GiB(limit), " and ",
          disks.empty() ? std::string("there is no disk") : "the disk has " + GiB(free) + " free",
          " on ", graph.host_name());
    }
    p.disk = disks[0];
    p.memory_tier_bytes = std::max<int64_t>(limit, 1 << 20);
    why = "table (" + GiB(p.table_bytes) + ") over DRAM limit " + GiB(limit) + ": memory tier + " +
          graph.devices[p.disk].id;
  }
  // Dense: the CPU, or the GPUs when they hold it and are faster.
  p.dense_bytes = DenseMemoryBytes(program, batch);
  p.dense_device = p.cpu;
  const double cpu_seconds = DenseSeconds(program, cost, batch, p.cpu, p.cpu);
  std::vector<int> gpus;
  for (int g : graph.DevicesOf(DeviceKind::kGpu)) {
    const DeviceNode& gpu = graph.devices[g];
    if (gpu.memory_bytes == 0 || gpu.memory_bytes - options.gpu_reserve_bytes >= p.dense_bytes) {
      gpus.push_back(g);
    }
  }
  const std::vector<int> host0_gpus = graph.DevicesOf(DeviceKind::kGpu, 0);
  if (options.allow_gpu && !gpus.empty()) {
    const double gpu_seconds = DenseSeconds(program, cost, batch, p.cpu, gpus[0]);
    if (gpu_seconds < cpu_seconds) {
      p.replicas = cost.RingOf(gpus).order;
      p.dense_device = p.replicas[0];
      char text[160];
      std::snprintf(text, sizeof(text),
                    "; dense on %zu GPU(s) (%.3f ms vs %.3f ms per batch on CPU)",
                    p.replicas.size(), gpu_seconds * 1e3, cpu_seconds * 1e3);
      why += text;
    } else {
      why += "; dense on CPU: faster than on GPU at this batch";
    }
  } else if (options.allow_gpu && !host0_gpus.empty()) {
    why += "; dense on CPU: needs " + GiB(p.dense_bytes) + ", more than a GPU holds";
  } else {
    why += "; dense on CPU";
  }
  if (p.replicas.empty()) {
    // One replica per host's CPU in a cluster without GPUs.
    for (size_t h = 0; h < graph.hosts.size(); ++h) {
      p.replicas.push_back(graph.DevicesOf(DeviceKind::kCpu, static_cast<int>(h))[0]);
    }
    p.replicas = cost.RingOf(p.replicas).order;
  }
  p.op_device.resize(program.ops.size());
  for (size_t i = 0; i < program.ops.size(); ++i) {
    p.op_device[i] = program.ops[i].sparse ? p.cpu : p.dense_device;
  }
  p.rationale = why;
  return p;
}

}  // namespace ember::scheduler
