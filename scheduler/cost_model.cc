#include "scheduler/cost_model.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

namespace ember::scheduler {
namespace {

double Or(double value, double fallback) { return value > 0 ? value : fallback; }

// Bandwidth `threads` CPU threads draw for memory-bound work: the measured
// one-thread copy rate, times threads^0.8 (they share the memory system).
double CpuStreamGbps(const DeviceRates& r, int threads, int cores) {
  return r.memory_gbps * std::pow(std::clamp(threads, 1, std::max(1, cores)), 0.8);
}

// y at x of the points (x, y), sorted by x with distinct x: linear between
// two, the nearest one's y beyond them. REQUIRES: points not empty.
double Interpolate(const std::vector<std::pair<double, double>>& points, double x) {
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  const auto hi = std::lower_bound(points.begin(), points.end(), x,
                                   [](const auto& p, double v) { return p.first < v; });
  const auto lo = hi - 1;
  return lo->second + (hi->second - lo->second) * (x - lo->first) / (hi->first - lo->first);
}

}  // namespace

DeviceRates DefaultCpuRates() {
  DeviceRates r;
  r.gemm_gflops_per_core = 30.0;
  r.memory_gbps = 10.0;
  r.read_ns_per_id = 40.0;
  r.unique_ns_per_key = 40.0;
  r.sort_ns_per_key_log2 = 2.0;
  r.pull_ns_per_row = 100.0;
  r.pull_ns_per_float = 2.0;
  r.push_ns_per_row = 150.0;
  r.push_ns_per_float = 4.0;
  r.row_overhead_bytes = 64.0;
  r.tier_pull_us_per_miss = 20.0;
  r.tier_push_us_per_miss = 5.0;
  r.tier_create_us_per_row = 5.0;
  return r;
}

RankExchangeBytes RankExchangePerStep(double distinct_keys, int ranks, int dim,
                                      double gradient_bytes, double expert_floats) {
  RankExchangeBytes bytes;
  if (ranks <= 1) return bytes;
  const double n = ranks;
  const double remote = distinct_keys * (n - 1) / n;
  const double counts = 8.0 * (n - 1);
  bytes.pull = remote * (8.0 + 4.0 * dim) + counts;
  bytes.push = remote * (8.0 + 4.0 * dim) + counts;
  bytes.dense = 2.0 * (n - 1) / n * gradient_bytes;
  bytes.experts = 4.0 * expert_floats * 2.0 * (n - 1) / n;
  return bytes;
}

double RankExchangeSeconds(double bytes, int rounds, const RankLinks& links) {
  if (links.ranks <= 1) return 0.0;
  const double peers = links.ranks - 1;
  const double near = std::clamp(links.ranks_per_host, 1, links.ranks) - 1;
  const double far = peers - near;
  double seconds = 0.0;
  if (near > 0) {
    seconds += bytes * near / peers / (links.loopback_gbps * 1e9) +
               rounds * near * links.loopback_latency_us * 1e-6;
  }
  if (far > 0) {
    // The host's ranks share its link.
    const double gbps = links.network_gbps / std::max(1, links.ranks_per_host);
    seconds += bytes * far / peers / (gbps * 1e9) + rounds * far * links.network_latency_us * 1e-6;
  }
  return seconds;
}

CostModel::CostModel(const ResourceGraph* graph, CostModelOptions options)
    : graph_(graph), options_(options) {}

double CostModel::TransferSeconds(double bytes, double gbps, double latency_us) {
  if (bytes <= 0) return 0.0;
  return latency_us * 1e-6 + bytes / (gbps * 1e9);
}

double CostModel::RingAllReduceSeconds(double bytes, int ranks, double gbps, double latency_us) {
  if (ranks <= 1 || bytes <= 0) return 0.0;
  const double n = ranks;
  return 2.0 * (n - 1) / n * bytes / (gbps * 1e9) + 2.0 * (n - 1) * latency_us * 1e-6;
}

double CostModel::AllToAllSeconds(double bytes_per_rank, int ranks, double gbps,
                                  double latency_us) {
  if (ranks <= 1 || bytes_per_rank <= 0) return 0.0;
  const double n = ranks;
  return (n - 1) / n * bytes_per_rank / (gbps * 1e9) + (n - 1) * latency_us * 1e-6;
}

DeviceRates CostModel::RatesOf(int device) const {
  const DeviceNode& node = graph_->devices[device];
  DeviceRates r = node.rates;
  if (node.kind == DeviceKind::kGpu) {
    r.gemm_gflops = Or(r.gemm_gflops, options_.gpu_gemm_gflops);
    r.memory_gbps = Or(r.memory_gbps, options_.gpu_memory_gbps);
    return r;
  }
  const DeviceRates& d = options_.cpu_defaults;
  r.gemm_gflops_per_core = Or(r.gemm_gflops_per_core, d.gemm_gflops_per_core);
  r.gemm_gflops = Or(r.gemm_gflops, r.gemm_gflops_per_core * std::max(1, node.cores));
  r.memory_gbps = Or(r.memory_gbps, d.memory_gbps);
  r.read_ns_per_id = Or(r.read_ns_per_id, d.read_ns_per_id);
  r.unique_ns_per_key = Or(r.unique_ns_per_key, d.unique_ns_per_key);
  r.sort_ns_per_key_log2 = Or(r.sort_ns_per_key_log2, d.sort_ns_per_key_log2);
  r.pull_ns_per_row = Or(r.pull_ns_per_row, d.pull_ns_per_row);
  r.pull_ns_per_float = Or(r.pull_ns_per_float, d.pull_ns_per_float);
  r.push_ns_per_row = Or(r.push_ns_per_row, d.push_ns_per_row);
  r.push_ns_per_float = Or(r.push_ns_per_float, d.push_ns_per_float);
  r.row_overhead_bytes = Or(r.row_overhead_bytes, d.row_overhead_bytes);
  return r;
}

double CostModel::GemmGflops(int device, int threads) const {
  const DeviceNode& node = graph_->devices[device];
  const DeviceRates r = RatesOf(device);
  if (node.kind == DeviceKind::kGpu) return r.gemm_gflops;
  // Linear in the threads at the per-core rate, capped by the measured rate
  // of all cores (which includes their contention for memory and clocks).
  const int cores = std::max(1, node.cores);
  const double t = std::clamp(threads, 1, cores);
  const double efficiency = r.gemm_gflops / (r.gemm_gflops_per_core * cores);
  return r.gemm_gflops_per_core * t *
         std::min(1.0, 1.0 - (1.0 - efficiency) * (t - 1) / std::max(1, cores - 1));
}

double CostModel::DenseOpSeconds(const ProgramOp& op, int64_t batch, int device,
                                 int threads) const {
  const bool gpu = graph_->devices[device].kind == DeviceKind::kGpu;
  const double gflops = GemmGflops(device, threads);
  const DeviceRates r = RatesOf(device);
  // Memory-bound ops on a CPU stream at the bandwidth their threads draw.
  const int cores = std::max(1, graph_->devices[device].cores);
  const double gbps = gpu ? r.memory_gbps : CpuStreamGbps(r, threads, cores);
  double seconds = 0.0;
  for (const ops::OpCost& c : {op.forward, op.backward}) {
    if (c.flops <= 0 && c.bytes <= 0) continue;
    seconds += std::max(c.flops * batch / (gflops * 1e9), c.bytes * batch / (gbps * 1e9));
    seconds += (gpu ? options_.gpu_call_overhead_us : options_.cpu_call_overhead_us) * 1e-6;
  }
  return seconds;
}

double CostModel::DenseRooflineSeconds(const Program& program, int64_t batch, int device,
                                       int threads) const {
  const bool gpu = graph_->devices[device].kind == DeviceKind::kGpu;
  double seconds = 0.0;
  for (const ProgramOp& op : program.ops) {
    if (op.stage == Stage::kDense) seconds += DenseOpSeconds(op, batch, device, threads);
  }
  const DeviceRates rates = RatesOf(device);
  const int cores = std::max(1, graph_->devices[device].cores);
  const double gbps = gpu ? rates.memory_gbps : CpuStreamGbps(rates, threads, cores);
  // Adam-like update: value, gradient and state read, value and state written.
  return seconds + program.DenseStateBytes() * 1.75 / (gbps * 1e9) +
         (gpu ? options_.gpu_call_overhead_us : options_.cpu_call_overhead_us) * 1e-6 *
             program.OpsIn(Stage::kDense);
}

void CostModel::set_dense_measurement(DenseMeasurement measurement) {
  std::erase_if(measurement.points, [](const DenseStepTiming& p) { return !(p.seconds > 0); });
  std::sort(measurement.points.begin(), measurement.points.end(),
            [](const DenseStepTiming& a, const DenseStepTiming& b) {
              return std::tie(a.threads, a.batch) < std::tie(b.threads, b.batch);
            });
  dense_ = std::move(measurement);
}

double CostModel::DenseStageSeconds(const Program& program, int64_t batch, int device,
                                    int threads) const {
  const double roofline = DenseRooflineSeconds(program, batch, device, threads);
  if (device != dense_.device || dense_.points.empty() ||
      graph_->devices[device].kind != DeviceKind::kCpu) {
    return roofline;
  }
  // measured / roofline of the points at `at_threads` (sorted by batch),
  // linear in the batch between them, the nearest one's beyond.
  auto factor_at = [&](int at_threads) {
    std::vector<std::pair<double, double>> factors;  // (batch, factor)
    for (const DenseStepTiming& p : dense_.points) {
      if (p.threads != at_threads) continue;
      factors.emplace_back(static_cast<double>(p.batch),
                           p.seconds / DenseRooflineSeconds(program, p.batch, device, p.threads));
    }
    return Interpolate(factors, static_cast<double>(batch));
  };
  std::vector<std::pair<double, double>> by_threads;  // (threads, factor)
  for (const DenseStepTiming& p : dense_.points) {
    if (by_threads.empty() || by_threads.back().first != p.threads) {
      by_threads.emplace_back(p.threads, factor_at(p.threads));
    }
  }
  return roofline * Interpolate(by_threads, static_cast<double>(threads));
}

double CostModel::RowBytes(const Program& program, int cpu) const {
  const double dim = program.sparse.embedding_dim;
  return dim * (program.sparse.sparse_weight_bytes + 4.0 * program.sparse.sparse_state_per_float) +
         RatesOf(cpu).row_overhead_bytes;
}

StepCost CostModel::Estimate(const Program& program, const StepSetup& setup) const {
  StepCost cost;
  const DeviceRates cpu = RatesOf(setup.cpu);
  const double b = static_cast<double>(setup.batch);
  const double dim = program.sparse.embedding_dim;
  const double ids = program.sparse.ids_per_example * b;
  cost.unique_ids = program.UniqueIdsPerBatch(setup.batch);
  const double u = cost.unique_ids;
  auto speedup = [&](int threads) {
    return std::pow(std::max(1, threads), options_.sparse_scaling_exponent);
  };
  const int cores = std::max(1, graph_->devices[setup.cpu].cores);
  // A replica's share of the host's memory bandwidth.
  const double gbps = cpu.memory_gbps / std::max(1, setup.replicas_per_host);
  PerStage<double> seconds;

  // read: the batch is gathered out of the dataset; at the calibrated rate
  // per id, or bounded by the memory bandwidth the batch's bytes need.
  const ops::OpCost read = program.StageCost(Stage::kRead, false);
  seconds[Stage::kRead] =
      std::max(ids * cpu.read_ns_per_id * 1e-9, 2.0 * read.bytes * b / (gbps * 1e9)) +
      options_.cpu_call_overhead_us * 1e-6;
  // unique: hash every id; pipelined, also sort the distinct ones for the
  // staleness gate (one thread: std::sort), which sequential runs skip.
  seconds[Stage::kUnique] = ids * cpu.unique_ns_per_key * 1e-9;
  if (setup.pipelined) {
    seconds[Stage::kUnique] += u * std::log2(std::max(2.0, u)) * cpu.sort_ns_per_key_log2 * 1e-9;
  }
  // pull and push: per distinct id, at the calibrated per-row cost (dim 16)
  // and per extra float; rows created during the run cost their creation.
  const double extra = dim - 16.0;
  // Between the small and the large calibrated table, by log of the rows;
  // beyond the large one every row misses the caches anyway.
  const double rows = program.TableRows();
  const double size = std::clamp(
      std::log(std::max(1.0, rows) / kSmallTableRows) / std::log(kLargeTableRows / kSmallTableRows),
      0.0, 1.0);
  auto sized = [size](double small, double large) {
    return large > 0 ? small + size * (large - small) : small;
  };
  const double pull_row =
      (sized(cpu.pull_ns_per_row, cpu.pull_ns_per_row_large) + cpu.pull_ns_per_float * extra) *
      1e-9;
  const double push_row =
      (sized(cpu.push_ns_per_row, cpu.push_ns_per_row_large) + cpu.push_ns_per_float * extra) *
      1e-9;
  const double batches = std::max(1.0, program.sparse.training_examples / b);
  const double new_rows = rows / batches;
  // A new row costs its creation where that was measured, else a push.
  const double create_row =
      cpu.create_ns_per_row > 0
          ? (sized(cpu.create_ns_per_row, cpu.create_ns_per_row_large) +
             cpu.push_ns_per_float * extra) *
                1e-9
          : push_row;
  seconds[Stage::kPull] =
      (u * pull_row + new_rows * create_row) / speedup(setup.threads[Stage::kPull]);
  seconds[Stage::kPush] = u * push_row / speedup(setup.threads[Stage::kPush]);

  // The memory tier: the rows it lacks cost a pull from the disk tier (read,
  // insert, evict and write back another) and a push (update, spill), at
  // the disk tier's calibrated cost per miss. With prefetch the reads start
  // in the background when the batch's ids are known (a stage of their own,
  // on the prefetcher's threads); the pull still pays for the rest.
  double disk_seconds = 0.0, disk_cores = 0.0, pull_wait_seconds = 0.0;
  if (setup.memory_budget_bytes > 0) {
    const double held = setup.memory_budget_bytes / RowBytes(program, setup.cpu);
    const TierTraffic traffic = program.MemoryTierTraffic(held, setup.batch);
    cost.hit_rate = traffic.distinct > 0 ? traffic.hits / traffic.distinct : 1.0;
    cost.disk_rows = traffic.reads;
    cost.disk_writes = traffic.writes;
    DeviceRates tier = options_.cpu_defaults;
    for (int d : graph_->DevicesOf(DeviceKind::kDisk, graph_->devices[setup.cpu].host)) {
      const DeviceRates& r = graph_->devices[d].rates;
      tier.tier_pull_us_per_miss = Or(r.tier_pull_us_per_miss, tier.tier_pull_us_per_miss);
      tier.tier_push_us_per_miss = Or(r.tier_push_us_per_miss, tier.tier_push_us_per_miss);
      tier.random_reads_per_sec = Or(r.random_reads_per_sec, tier.random_reads_per_sec);
      tier.tier_create_us_per_row = Or(r.tier_create_us_per_row, tier.tier_create_us_per_row);
      // At the table's size: between the two calibrated tables by log of
      // the rows, and on along that line beyond the larger one: each
      // doubling of an LSM tree's rows adds to the files and levels a
      // lookup probes and to the times compaction rewrites a row.
      const double tier_size = std::log(std::max(rows, kSmallTierRows) / kSmallTierRows) /
                               std::log(kLargeTierRows / kSmallTierRows);
      auto at_size = [tier_size](double small, double large) {
        return small > 0 && large > 0 ? std::max(0.0, small + tier_size * (large - small)) : small;
      };
      tier.tier_pull_us_per_miss =
          at_size(tier.tier_pull_us_per_miss, r.tier_pull_us_per_miss_large);
      tier.tier_push_us_per_miss =
          at_size(tier.tier_push_us_per_miss, r.tier_push_us_per_miss_large);
      tier.tier_create_us_per_row =
          at_size(tier.tier_create_us_per_row, r.tier_create_us_per_row_large);
    }
    // The rows written to disk beyond those read back: the new rows memory
    // cannot keep (making each, in the pull, evicts and writes another).
    const double spilled = std::max(0.0, traffic.writes - traffic.reads);
    seconds[Stage::kPull] +=
        spilled * tier.tier_create_us_per_row * 1e-6 / speedup(setup.threads[Stage::kPull]);
    // A miss reads a block from the device (its random-read time, waiting
    // on no core) and decodes, inserts and evicts (CPU); the calibrated cost
    // per miss includes both, so it is at least the read.
    const double read_us = tier.random_reads_per_sec > 0 ? 1e6 / tier.random_reads_per_sec : 0.0;
    const double miss_us = std::max(tier.tier_pull_us_per_miss, read_us);
    const double pull_miss = cost.disk_rows * miss_us * 1e-6;
    seconds[Stage::kPush] +=
        cost.disk_rows * tier.tier_push_us_per_miss * 1e-6 / speedup(setup.threads[Stage::kPush]);
    if (setup.prefetch) {
      disk_seconds = pull_miss / speedup(options_.prefetch_threads);
      // The prefetcher's threads keep cores busy only while not waiting on
      // the device.
      disk_cores = options_.prefetch_threads * (miss_us - read_us) / miss_us;
    } else {
      seconds[Stage::kPull] += pull_miss / speedup(setup.threads[Stage::kPull]);
      pull_wait_seconds = cost.disk_rows * read_us * 1e-6 / speedup(setup.threads[Stage::kPull]);
    }
  }

  // dense: every dense op, pooling included, and the optimizer.
  const bool gpu = graph_->devices[setup.dense_device].kind == DeviceKind::kGpu;
  const int dense_threads = gpu ? 1 : setup.threads[Stage::kDense];
  seconds[Stage::kDense] =
      DenseStageSeconds(program, setup.batch, setup.dense_device, dense_threads);

  PerStage<SimStage> trainer;
  for (Stage s : kAllStages) {
    const double scale = (setup.pipelined ? scales_.pipelined : scales_.sequential)[s];
    trainer[s] = SimStage{StageName(s), seconds[s] * scale, 1.0, -1, 1};
    trainer[s].cores =
        std::min<double>(cores, s == Stage::kDense ? dense_threads : setup.threads[s]);
  }
  // A job of ranks: the pull and push exchange keys, rows and gradients with
  // the owners (three collectives each: counts, keys, rows or gradients),
  // and the dense stage all-reduces the gradients (two rounds: each rank
  // sums its block of the N gradients and copies in the others' summed
  // blocks, about twice the gradient's bytes at the memory bandwidth). MPI
  // polls while it waits: the stages keep their cores.
  if (setup.ranks > 1) {
    RankLinks links;
    links.ranks = setup.ranks;
    links.ranks_per_host = setup.ranks_per_host;
    links.loopback_gbps = options_.loopback_gbps;
    links.loopback_latency_us = options_.loopback_latency_us;
    links.network_gbps = setup.network_gbps;
    links.network_latency_us = setup.network_latency_us;
    const double gradient_bytes = 4.0 * program.dense_parameters;
    // Expert parallelism: per expert MLP a capacity gather and four
    // all-to-alls (dispatch and combine, forward and backward), in the
    // dense stage.
    const bool experts = setup.expert_parallel && program.expert_chains > 0;
    cost.rank_bytes = RankExchangePerStep(
        u, setup.ranks, program.sparse.embedding_dim, gradient_bytes,
        experts ? program.expert_floats_per_example * static_cast<double>(setup.batch) : 0.0);
    const double pull = RankExchangeSeconds(cost.rank_bytes.pull, 3, links);
    const double push = RankExchangeSeconds(cost.rank_bytes.push, 3, links);
    cost.expert_exchange_seconds = RankExchangeSeconds(
        cost.rank_bytes.experts, experts ? 5 * program.expert_chains : 0, links);
    double all_reduce = RankExchangeSeconds(cost.rank_bytes.dense, 2, links) +
                        2.0 * gradient_bytes / (gbps * 1e9);
    if (setup.dense_bucket_bytes > 0 && !gpu && gradient_bytes > 0) {
      // Buckets, the last layers' first, each all-reduced (two rounds of
      // latency) once the backward has its gradients: all but the last
      // bucket run during the rest of the backward (about two thirds of a
      // dense step, forward : backward ~ 1 : 2), what they exceed it by and
      // the last bucket after it.
      const double buckets =
          std::max(1.0, std::ceil(gradient_bytes / static_cast<double>(setup.dense_bucket_bytes)));
      const double per_bucket =
          RankExchangeSeconds(cost.rank_bytes.dense / buckets, 2, links) +
          2.0 * gradient_bytes / buckets / (gbps * 1e9);
      const double backward = 2.0 / 3.0 * seconds[Stage::kDense];
      all_reduce = per_bucket + std::max(0.0, (buckets - 1) * per_bucket - backward);
    }
    cost.dense_all_reduce_seconds = all_reduce;
    const double dense = all_reduce + cost.expert_exchange_seconds;
    trainer[Stage::kPull].seconds += pull;
    trainer[Stage::kPush].seconds += push;
    trainer[Stage::kDense].seconds += dense;
    cost.rank_exchange_seconds = pull + push + dense;
  }
  // The dense stage's oneDNN ops run as an OpenMP team: on cores shared
  // with the sparse stages it goes at the pace of its slowest thread.
  trainer[Stage::kDense].team = !gpu;
  // A pull that reads the disk tier itself waits on the device part of it.
  if (seconds[Stage::kPull] > 0) {
    trainer[Stage::kPull].cores *= 1.0 - pull_wait_seconds / seconds[Stage::kPull];
  }
  // Host <-> device copies of the pooled vectors, their gradients, the dense
  // features and labels (pinned buffers over PCIe), on the replica's own
  // link.
  double h2d = 0.0, d2h = 0.0;
  if (gpu) {
    const Link* link = graph_->LinkBetween(setup.cpu, setup.dense_device);
    const double link_gbps = link ? link->gbps : 12.0;
    const double latency = link ? link->latency_us : 10.0;
    const double pooled = 4.0 * b * program.sparse.num_slots * dim;
    const double in = pooled + 4.0 * b * (program.sparse.num_dense + program.sparse.num_labels);
    cost.pcie_bytes = in + pooled;
    h2d = TransferSeconds(in, link_gbps, latency);
    d2h = TransferSeconds(pooled, link_gbps, latency);
  }
  // Data parallel: the dense gradients are all-reduced over the replicas
  // (part of the dense stage: the optimizer needs them); the ids and rows of
  // a sharded table cross the network both ways.
  if (setup.replicas > 1) {
    trainer[Stage::kDense].seconds += RingAllReduceSeconds(
        4.0 * program.dense_parameters, setup.replicas, setup.ring_gbps, setup.ring_latency_us);
  }
  double a2a = 0.0;
  if (setup.sparse_hosts > 1) {
    const double per_host = setup.replicas_per_host * (8.0 * ids + 4.0 * u * dim);
    // Each all-to-all sends all but this host's own share.
    const double n = setup.sparse_hosts;
    cost.network_bytes = 2.0 * (n - 1) / n * per_host;
    a2a =
        AllToAllSeconds(per_host, setup.sparse_hosts, setup.network_gbps, setup.network_latency_us);
  }
  // In pipeline order; transfers and collectives use no core.
  auto add = [&cost](const SimStage& stage) {
    cost.stages.push_back(stage);
    return static_cast<int>(cost.stages.size()) - 1;
  };
  cost.stage_index[Stage::kRead] = add(trainer[Stage::kRead]);
  cost.stage_index[Stage::kUnique] = add(trainer[Stage::kUnique]);
  if (disk_seconds > 0 && setup.prefetch) {
    add({"disk", disk_seconds, disk_cores, -1, 1});
  }
  if (setup.early_pulls) {
    const double late =
        program.LateFraction(setup.batch, std::max(1, setup.depth - 1), setup.staleness);
    SimStage early = trainer[Stage::kPull];
    early.name = "pull.early";
    early.seconds *= 1.0 - late;
    trainer[Stage::kPull].seconds *= late;
    add(early);
  }
  cost.stage_index[Stage::kPull] = add(trainer[Stage::kPull]);
  // The two all-to-alls share the host's network link (pool 1).
  if (a2a > 0) add({"alltoall_fwd", a2a, 1.0, -1, 1, 1});
  if (h2d > 0) add({"h2d", h2d, 0.0, -1, 1});
  cost.stage_index[Stage::kDense] = add(trainer[Stage::kDense]);
  if (d2h > 0) add({"d2h", d2h, 0.0, -1, 1});
  if (a2a > 0) add({"alltoall_bwd", a2a, 1.0, -1, 1, 1});
  cost.stage_index[Stage::kPush] = add(trainer[Stage::kPush]);
  return cost;
}

const Ring& CostModel::RingOf(const std::vector<int>& devices) const {
  auto it = rings_.find(devices);
  if (it != rings_.end()) return it->second;
  Ring ring;
  ring.order = GreedyRingOrder(*graph_, devices);
  std::tie(ring.gbps, ring.latency_us) = RingBottleneck(*graph_, ring.order);
  return rings_.emplace(devices, std::move(ring)).first->second;
}

void CostModel::Refine(const PerStage<double>& predicted, const PerStage<double>& measured,
                       bool pipelined) {
  PerStage<double>& scale = pipelined ? scales_.pipelined : scales_.sequential;
  for (Stage s : kAllStages) {
    if (predicted[s] > 0 && measured[s] > 0) scale[s] *= measured[s] / predicted[s];
  }
}

}  // namespace ember::scheduler
