#include "scheduler/planner.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "scheduler/simulator.h"

namespace ember::scheduler {
namespace {

std::string LinkName(const ResourceGraph& graph, int a, int b, LinkKind kind) {
  return graph.devices[a].id + " <-> " + graph.devices[b].id + " (" + LinkKindName(kind) + ")";
}

// Fills the memory, disk and bandwidth needs of `plan`.
void AddNeeds(const Program& program, const CostModel& cost, const Placement& placement,
              const StepCost& step, const PlanKnobs& knobs, Plan* plan) {
  const ResourceGraph& graph = cost.graph();
  const DeviceNode& cpu = graph.devices[placement.cpu];
  const double per_host_table = placement.table_bytes / placement.sparse_hosts;
  const double in_memory = placement.memory_tier_bytes > 0
                               ? std::min<double>(placement.memory_tier_bytes, per_host_table)
                               : per_host_table;
  plan->needs.push_back(
      {cpu.id, "embedding memory tier", static_cast<int64_t>(in_memory), cpu.memory_bytes});
  // Batches in flight: the batch, its rows and gradients, pooled vectors.
  const double b = static_cast<double>(knobs.batch);
  const double dim = program.sparse.embedding_dim;
  const double per_batch =
      b * (4.0 * (program.sparse.num_dense + program.sparse.num_labels) +
           16.0 * program.sparse.ids_per_example + 8.0 * program.sparse.num_slots * dim) +
      8.0 * step.unique_ids * dim;
  const int slots = knobs.pipeline ? knobs.depth : 1;
  const int replicas_here = std::max<int>(1, placement.replicas.size() / graph.hosts.size());
  plan->needs.push_back({cpu.id, "batches in flight",
                         static_cast<int64_t>(per_batch * slots * replicas_here),
                         cpu.memory_bytes});
  const DeviceNode& dense = graph.devices[placement.dense_device];
  plan->needs.push_back({dense.id, "dense parameters and activations",
                         static_cast<int64_t>(placement.dense_bytes), dense.memory_bytes});
  if (placement.disk >= 0) {
    const DeviceNode& disk = graph.devices[placement.disk];
    plan->needs.push_back(
        {disk.id, "embedding disk tier", static_cast<int64_t>(per_host_table), disk.memory_bytes});
  }
  const double step_seconds = plan->predicted_step_seconds;
  if (step_seconds <= 0) return;
  if (step.pcie_bytes > 0) {
    const Link* link = graph.LinkBetween(placement.cpu, placement.dense_device);
    plan->links.push_back({LinkName(graph, placement.cpu, placement.dense_device, LinkKind::kPcie),
                           step.pcie_bytes / step_seconds / 1e9, link ? link->gbps : 0.0});
  }
  if (placement.disk >= 0) {
    const Link* link = graph.LinkBetween(placement.cpu, placement.disk);
    const double row_bytes = cost.RowBytes(program, placement.cpu);
    plan->links.push_back({LinkName(graph, placement.cpu, placement.disk, LinkKind::kPcie),
                           2.0 * step.disk_rows * row_bytes / step_seconds / 1e9,
                           link ? link->gbps : 0.0});
  }
  if (step.network_bytes > 0 && graph.hosts.size() > 1) {
    const int other = graph.DevicesOf(DeviceKind::kCpu, 1)[0];
    const Link* link = graph.LinkBetween(placement.cpu, other);
    plan->links.push_back({"network per host (all-to-all)", step.network_bytes / step_seconds / 1e9,
                           link ? link->gbps : 0.0});
  }
  if (placement.replicas.size() > 1) {
    const double gbps = cost.RingOf(placement.replicas).gbps;
    const double n = placement.replicas.size();
    plan->links.push_back({"all-reduce ring (slowest hop)",
                           2.0 * (n - 1) / n * 4.0 * program.dense_parameters / step_seconds / 1e9,
                           gbps});
  }
}

}  // namespace

int RanksPerHost(int ranks, int hosts) {
  ranks = std::max(1, ranks);
  hosts = std::max(1, hosts);
  return (ranks + hosts - 1) / hosts;
}

PerStage<int> TrainerStageThreads(int threads, bool pipeline) {
  threads = std::max(1, threads);
  if (!pipeline) return PerStage<int>::Filled(threads);
  PerStage<int> split = PerStage<int>::Filled(1);
  const int sparse = std::max(1, threads / 4);
  split[Stage::kPull] = sparse;
  split[Stage::kDense] = threads;
  split[Stage::kPush] = sparse;
  return split;
}

Result<Plan> PredictPlan(const Program& program, const CostModel& cost, const PlanKnobs& knobs,
                         const PlacerOptions& placer) {
  const ResourceGraph& graph = cost.graph();
  // A job of ranks runs its dense stages on CPU (the MPI all-reduce).
  const bool ranked = knobs.ranks > 1;
  PlacerOptions placer_options = placer;
  if (ranked) placer_options.allow_gpu = false;
  EMBER_ASSIGN_OR_RETURN(Placement placement,
                         Place(program, cost, knobs.batch, placer_options));
  const int hosts = static_cast<int>(graph.hosts.size());
  const int ranks_per_host = ranked ? RanksPerHost(knobs.ranks, hosts) : 1;
  if (ranked) {
    // One dense replica per rank, on its CPU; the table over the ranks'
    // hosts (the exchange is costed per rank, not per host).
    placement.replicas = {placement.cpu};
    placement.sparse_hosts = (knobs.ranks + ranks_per_host - 1) / ranks_per_host;
  }
  // A split applies to the pipeline's stages; sequential steps give every
  // stage every thread.
  const bool split_given = knobs.pipeline && std::any_of(knobs.split.begin(), knobs.split.end(),
                                                         [](int t) { return t > 0; });
  StepSetup setup;
  setup.batch = knobs.batch;
  setup.threads = split_given ? knobs.split : TrainerStageThreads(knobs.threads, knobs.pipeline);
  setup.cpu = placement.cpu;
  setup.dense_device = placement.dense_device;
  setup.memory_budget_bytes = placement.memory_tier_bytes;
  setup.prefetch = knobs.prefetch;
  setup.pipelined = knobs.pipeline;
  setup.early_pulls = knobs.pipeline && knobs.early_pulls;
  setup.staleness = knobs.staleness;
  setup.depth = knobs.depth;
  const bool gpu = graph.devices[placement.dense_device].kind == DeviceKind::kGpu;
  setup.replicas = static_cast<int>(placement.replicas.size());
  setup.replicas_per_host = std::max<int>(1, setup.replicas / graph.hosts.size());
  setup.sparse_hosts = placement.sparse_hosts;
  if (ranked) {
    // Each rank has its share of the host's cores and memory bandwidth; its
    // exchanges replace the host-level all-to-all.
    setup.replicas_per_host = ranks_per_host;
    setup.sparse_hosts = 1;
    setup.ranks = knobs.ranks;
    setup.ranks_per_host = ranks_per_host;
    setup.dense_bucket_bytes = knobs.dense_bucket_bytes;
  }
  const Ring& ring = cost.RingOf(placement.replicas);
  setup.ring_gbps = ring.gbps;
  setup.ring_latency_us = ring.latency_us;
  if (graph.hosts.size() > 1) {
    const Link* net = graph.LinkBetween(graph.DevicesOf(DeviceKind::kCpu, 0)[0],
                                        graph.DevicesOf(DeviceKind::kCpu, 1)[0]);
    if (net) setup.network_gbps = net->gbps, setup.network_latency_us = net->latency_us;
  }
  const StepCost step = cost.Estimate(program, setup);
  std::vector<SimStage> stages = step.stages;
  SimOptions sim;
  sim.items = 64;  // Enough for the start-up and drain to leave the middle half.
  sim.slots = knobs.pipeline ? knobs.depth : 1;
  // The host's cores, shared by the replicas on it.
  sim.cores = static_cast<double>(graph.devices[placement.cpu].cores) / setup.replicas_per_host;
  if (ranked) {
    // The ranks of a host share all its sockets' cores.
    double host_cores = 0.0;
    for (int c : graph.DevicesOf(DeviceKind::kCpu, graph.devices[placement.cpu].host)) {
      host_cores += graph.devices[c].cores;
    }
    sim.cores = std::max(1.0, host_cores) / ranks_per_host;
  }
  sim.pool_capacity = {1.0};  // The network link: one all-to-all at full speed.
  if (knobs.pipeline) {
    // Bounded staleness: pull i completes after push i - (k + 1).
    SimStage& pull = stages[step.stage_index[Stage::kPull]];
    pull.waits_for = step.stage_index[Stage::kPush];
    pull.lag = knobs.staleness + 1;
  }
  const SimResult result = SimulatePipeline(stages, sim);

  Plan plan;
  plan.model = program.model;
  plan.threads = knobs.threads;
  plan.batch_size = knobs.batch;
  plan.pipeline = knobs.pipeline;
  plan.pipeline_depth = knobs.depth;
  plan.max_staleness = knobs.staleness;
  plan.prefetch = knobs.prefetch;
  plan.early_pulls = knobs.early_pulls;
  plan.stage_threads = setup.threads;
  plan.embedding_memory_budget_bytes = placement.memory_tier_bytes;
  plan.memory_tier_hit_rate = step.hit_rate;
  plan.disk_reads_per_step = step.disk_rows;
  plan.disk_writes_per_step = step.disk_writes;
  plan.sparse_hosts = placement.sparse_hosts;
  if (gpu) plan.dense_device = Device::Cuda(graph.devices[placement.dense_device].index);
  for (int r : placement.replicas) plan.replicas.push_back(graph.devices[r].id);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    plan.placement.push_back({program.ops[i].name, graph.devices[placement.op_device[i]].id});
  }
  plan.predicted_step_seconds = result.seconds_per_item;
  plan.predicted_samples_per_sec =
      result.seconds_per_item > 0 ? setup.replicas * knobs.batch / result.seconds_per_item : 0.0;
  if (ranked) {
    plan.ranks = knobs.ranks;
    plan.ranks_per_host = ranks_per_host;
    plan.predicted_samples_per_sec *= knobs.ranks;
    plan.exchange_bytes_per_step = step.rank_bytes.total();
    plan.expert_exchange_bytes_per_step = step.rank_bytes.experts;
    plan.expert_exchange_seconds_per_step = step.expert_exchange_seconds;
    plan.exchange_seconds_per_step = step.rank_exchange_seconds;
    double work = 0.0;
    for (const SimStage& s : step.stages) work += s.seconds;
    plan.exchange_share = work > 0 ? step.rank_exchange_seconds / work : 0.0;
  }
  double worst = -1.0;
  for (size_t s = 0; s < stages.size(); ++s) {
    StagePrediction p;
    p.name = stages[s].name;
    const bool on_dense = static_cast<int>(s) == step.stage_index[Stage::kDense];
    p.device = stages[s].pool > 0 ? "network"
               : stages[s].cores == 0
                   ? "pcie"
                   : graph.devices[on_dense ? placement.dense_device : placement.cpu].id;
    if (p.name == "disk" && placement.disk >= 0) p.device = graph.devices[placement.disk].id;
    p.seconds = result.busy_seconds[s] / sim.items;
    p.cores = stages[s].cores;
    p.busy_fraction =
        result.seconds_per_item > 0 ? std::min(1.0, p.seconds / result.seconds_per_item) : 0;
    if (p.seconds > worst) worst = p.seconds, plan.bottleneck = p.name;
    plan.stages.push_back(p);
  }
  // Sequential runs have no bottleneck stage: every stage adds up.
  if (!knobs.pipeline) plan.bottleneck = "sequential: sum of the stages";
  plan.rationale = placement.rationale;
  AddNeeds(program, cost, placement, step, knobs, &plan);
  if (ranked && plan.predicted_step_seconds > 0) {
    const bool one_host = ranks_per_host >= knobs.ranks;
    plan.links.push_back({one_host ? "ranks' exchange per rank (loopback)"
                                   : "ranks' exchange per rank (network)",
                          step.rank_bytes.total() / plan.predicted_step_seconds / 1e9,
                          one_host ? cost.options().loopback_gbps
                                   : setup.network_gbps / ranks_per_host});
  }
  return plan;
}

Result<Plan> MakePlan(const Program& program, const CostModel& cost, const PlannerOptions& options,
                      PlanKnobs start, int* evaluations) {
  // No more threads than the host has (the trainer refuses more).
  int cores = cost.graph().devices[cost.graph().DevicesOf(DeviceKind::kCpu, 0)[0]].cores;
  // Ranks share a host's cores.
  if (start.ranks > 1) {
    int host_cores = 0;
    for (int c : cost.graph().DevicesOf(DeviceKind::kCpu, 0)) {
      host_cores += cost.graph().devices[c].cores;
    }
    cores = std::max(
        1, host_cores / RanksPerHost(start.ranks, static_cast<int>(cost.graph().hosts.size())));
  }
  std::vector<int> threads;
  for (int t : options.threads) {
    if (t <= cores) threads.push_back(t);
  }
  if (threads.empty()) {
    for (int t = 1; t <= cores; ++t) threads.push_back(t);
  }
  // A rank has its share of the host's cores: start within it.
  if (start.ranks > 1) start.threads = std::min(start.threads, threads.back());
  int count = 0;
  // A split the caller gave (start.split) is kept when the planner may not
  // choose one.
  const bool split_fixed =
      !options.free_split &&
      std::any_of(start.split.begin(), start.split.end(), [](int t) { return t > 0; });
  // Two descents: from `start`, and from the most permissive corner (every
  // thread, the deepest pipeline, the largest staleness allowed), since
  // threads and staleness interact (a one-knob move from one may not pay).
  PlanKnobs corner = start;
  corner.threads = threads.back();
  corner.pipeline = options.allow_pipeline;
  corner.depth = *std::max_element(options.depths.begin(), options.depths.end());
  corner.staleness = options.max_staleness;
  Plan overall;
  for (const PlanKnobs& from : {start, corner}) {
    PlanKnobs best = from;
    EMBER_ASSIGN_OR_RETURN(Plan best_plan, PredictPlan(program, cost, best, options.placer));
    ++count;
    // One knob: try its values, keep the best (within 1% of the best, the
    // first value of the list: fewer threads, smaller depth, less staleness;
    // but the current value when it is as good, unless `first_wins`).
    auto descend = [&](const std::vector<PlanKnobs>& candidates,
                       bool first_wins = false) -> Status {
      std::vector<Plan> plans;
      double top = best_plan.predicted_samples_per_sec;
      for (const PlanKnobs& knobs : candidates) {
        Result<Plan> plan = PredictPlan(program, cost, knobs, options.placer);
        ++count;
        if (!plan.ok()) {
          if (plan.status().code() == StatusCode::kResourceExhausted) {
            plans.emplace_back();
            continue;
          }
          return plan.status();
        }
        top = std::max(top, plan->predicted_samples_per_sec);
        plans.push_back(*std::move(plan));
      }
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (plans[i].predicted_samples_per_sec >= 0.99 * top &&
            plans[i].predicted_samples_per_sec > 0) {
          if (!first_wins && best_plan.predicted_samples_per_sec >= 0.99 * top &&
              best_plan.predicted_samples_per_sec >= plans[i].predicted_samples_per_sec) {
            return Status::OK();  // The current value is as good: keep it.
          }
          best = candidates[i];
          best_plan = plans[i];
          return Status::OK();
        }
      }
      return Status::OK();
    };
    for (int round = 0; round < options.max_rounds; ++round) {
      const PlanKnobs before = best;
      std::vector<PlanKnobs> c;
      for (int t : threads) {
        PlanKnobs k = best;
        k.threads = t;
        if (split_fixed) {
          // The given split needs at least its largest stage's threads.
          if (t < *std::max_element(k.split.begin(), k.split.end())) continue;
        } else if (t != best.threads) {
          k.split = {};  // Another budget starts from its own default split.
        }
        c.push_back(k);
      }
      EMBER_RETURN_IF_ERROR(descend(c));
      c.clear();
      for (int64_t b : options.batch_sizes) {
        PlanKnobs k = best;
        k.batch = b;
        c.push_back(k);
      }
      EMBER_RETURN_IF_ERROR(descend(c));
      // Pipelining and its depth are one knob: a pipeline of depth 1 is no
      // better than none, so trying "on" at the current depth alone would
      // keep a descent that went sequential there.
      // Sequential first, and it wins within 1% even over a current
      // pipeline: it runs fewer threads and no handoffs between stages
      // (waking a thread on a busy host), which the model leaves out.
      c.clear();
      if (options.allow_sequential) {
        PlanKnobs k = best;
        k.pipeline = false;
        c.push_back(k);
      }
      for (int d : options.allow_pipeline ? options.depths : std::vector<int>{}) {
        PlanKnobs k = best;
        k.pipeline = true;
        k.depth = d;
        c.push_back(k);
      }
      EMBER_RETURN_IF_ERROR(descend(c, /*first_wins=*/true));
      if (best.pipeline) {
        c.clear();
        for (int s = 0; s <= options.max_staleness; ++s) {
          PlanKnobs k = best;
          k.staleness = s;
          c.push_back(k);
        }
        EMBER_RETURN_IF_ERROR(descend(c));
      }
      // An on/off knob: both values, the rest as they are.
      auto descend_on_off = [&](bool PlanKnobs::*knob) {
        c.clear();
        for (bool on : {true, false}) {
          PlanKnobs k = best;
          k.*knob = on;
          c.push_back(k);
        }
        return descend(c);
      };
      if (options.choose_prefetch && best_plan.embedding_memory_budget_bytes > 0) {
        EMBER_RETURN_IF_ERROR(descend_on_off(&PlanKnobs::prefetch));
      }
      if (options.choose_early_pulls && best.pipeline) {
        EMBER_RETURN_IF_ERROR(descend_on_off(&PlanKnobs::early_pulls));
      }
      if (options.free_split && best.pipeline) {
        // Each sparse stage's threads in turn, the rest as they are.
        if (best.split == PerStage<int>()) best.split = best_plan.stage_threads;
        for (Stage s : {Stage::kUnique, Stage::kPull, Stage::kPush, Stage::kDense}) {
          c.clear();
          for (int t : threads) {
            if (t > best.threads) break;
            PlanKnobs k = best;
            k.split[s] = t;
            c.push_back(k);
          }
          EMBER_RETURN_IF_ERROR(descend(c));
        }
      }
      if (before.threads == best.threads && before.batch == best.batch &&
          before.pipeline == best.pipeline && before.depth == best.depth &&
          before.staleness == best.staleness && before.prefetch == best.prefetch &&
          before.early_pulls == best.early_pulls && before.split == best.split) {
        break;
      }
    }
    if (best_plan.predicted_samples_per_sec > overall.predicted_samples_per_sec)
      overall = best_plan;
  }
  if (evaluations) *evaluations = count;
  char why[160];
  std::snprintf(why, sizeof(why), "; coordinate descent over %d configurations", count);
  overall.rationale += why;
  return overall;
}

}  // namespace ember::scheduler
