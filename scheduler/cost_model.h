#pragma once

// CostModel: the time of each stage of a training step on the devices of a
// ResourceGraph, from the Program's FLOPs, bytes and key counts and the
// devices' calibrated rates plus a per-call overhead; transfers on links;
// all-reduce and all-to-all by their standard formulas. A dense step timed
// on this host's CPU (scheduler/dense_calibration.h) sets the dense stage's
// time there; measured stage times of a real run refine it (a factor per
// stage).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/program.h"
#include "scheduler/resource_graph.h"
#include "scheduler/simulator.h"
#include "scheduler/stage.h"

namespace ember::scheduler {

// Rates of a CPU core of a 2020s server, for devices nobody measured.
DeviceRates DefaultCpuRates();

// Rates used where the resource graph says nothing (0), and overheads.
struct CostModelOptions {
  DeviceRates cpu_defaults = DefaultCpuRates();
  double gpu_gemm_gflops = 10000.0;
  double gpu_memory_gbps = 1000.0;
  // Per op call: a CPU kernel (dispatch, oneDNN setup) and a GPU launch.
  double cpu_call_overhead_us = 4.0;
  double gpu_call_overhead_us = 10.0;
  // Speed-up of a sparse stage's threads over one (shards contend, lines
  // bounce): threads^exponent.
  double sparse_scaling_exponent = 0.8;
  // Threads the disk tier's prefetcher uses (EmbeddingTableOptions).
  int prefetch_threads = 2;
  // Between two ranks of a job on one host (MPI over shared memory): the
  // bandwidth one rank gets and the latency of a message. Defaults: what
  // tools/bench/mpi_loopback measures on a small server.
  double loopback_gbps = 4.0;
  double loopback_latency_us = 5.0;
};

// The bytes one rank of a job of `ranks` (mpirun -np N ember train) sends in
// a step, as the key-sharded table and the MPI backend count them
// (embedding/sharded_table.cc, core/mpi_communicator.h). A rank's distinct
// keys are owned by the others with probability (N - 1) / N.
struct RankExchangeBytes {
  // Pull: the remotely owned keys out (8 bytes each) and, as an owner, the
  // rows others asked for back (4 * dim each; as many by symmetry), plus one
  // count (8 bytes) to every peer.
  double pull = 0.0;
  // Push: the remotely owned keys again and their gradients (8 + 4 * dim
  // each), plus the counts.
  double push = 0.0;
  // The dense all-reduce as the MPI backend runs it (a reduce-scatter, then
  // an all-gather: core/mpi_communicator.h): 2 (N - 1) / N x gradient bytes.
  double dense = 0.0;
  // Expert parallelism (ops/expert_parallel.h): the routed rows of the
  // experts owned elsewhere, (N - 1) / N of them, out and back in the
  // forward and again in the backward: 4 bytes x expert floats x 2.
  double experts = 0.0;
  double total() const { return pull + push + dense + experts; }
};

// All zero for one rank. `expert_floats`: what a rank's expert layers move
// each way in a forward (Program::expert_floats_per_example x its batch; 0
// without expert parallelism). REQUIRES: ranks >= 1.
RankExchangeBytes RankExchangePerStep(double distinct_keys, int ranks, int dim,
                                      double gradient_bytes, double expert_floats = 0.0);

// Where the ranks of a job are and what joins them.
struct RankLinks {
  int ranks = 1;
  // Ranks on each host (the last host may hold fewer); ranks on one host
  // share its network link.
  int ranks_per_host = 1;
  double loopback_gbps = 0.0, loopback_latency_us = 0.0;
  double network_gbps = 0.0, network_latency_us = 0.0;
};

// Seconds for one rank to send `bytes` spread evenly over its peers in
// `rounds` collectives (each a message to every peer): the share for peers
// on its host over the loopback, the rest over the host's network link
// (shared by its ranks), plus a latency per message. 0 for one rank.
double RankExchangeSeconds(double bytes, int rounds, const RankLinks& links);


// One configuration of a step, as the planner varies it.
struct StepSetup {
  int64_t batch = 256;
  // Threads of each stage.
  PerStage<int> threads = PerStage<int>::Filled(1);
  // The CPU socket of the sparse stages and the device of the dense stage
  // (a CPU socket or a GPU), indices into ResourceGraph::devices.
  int cpu = 0;
  int dense_device = 0;
  // Bytes of the embedding memory tier; 0: the whole table in memory.
  int64_t memory_budget_bytes = 0;
  bool prefetch = true;
  // Stages overlapped in a pipeline (picks the stage scales).
  bool pipelined = true;
  // Pipelined with early pulls: the rows no batch in flight updates are
  // pulled at once ("pull.early"); the rest after the pushes the staleness
  // bound waits for. false: the whole pull waits.
  bool early_pulls = false;
  int staleness = 0;
  // Batches in flight (the pipeline's depth): a pull's batch is in flight
  // with up to depth - 1 earlier ones.
  int depth = 1;
  // Cluster plans: dense replicas (data parallel, one per GPU) sharing the
  // step's all-reduce, and hosts the table is sharded over (all-to-all).
  int replicas = 1;
  int replicas_per_host = 1;
  int sparse_hosts = 1;
  // The ring of the all-reduce (its slowest link and largest latency), and
  // the network between hosts.
  double ring_gbps = 0.0, ring_latency_us = 0.0;
  double network_gbps = 0.0, network_latency_us = 0.0;
  // A job of ranks (mpirun -np N): this setup is one rank's, with its share
  // of the host's cores; its pull and push exchange keys, rows and
  // gradients with the owners and its dense stage all-reduces the
  // gradients (RankExchangePerStep). ranks = 1: none of this.
  int ranks = 1;
  int ranks_per_host = 1;
  // With ranks and a host dense model: the gradients' all-reduce in buckets
  // of about this many bytes during the backward (pipeline/
  // gradient_buckets.h): all but the last bucket's overlap the backward.
  // 0: one all-reduce after the backward.
  int64_t dense_bucket_bytes = int64_t{1} << 20;
  // With ranks: the experts of the model's MoE layers divided among them
  // (ops/expert_parallel.h), their rows exchanged in the dense stage.
  bool expert_parallel = true;
};

// The cost of one step.
struct StepCost {
  // Seconds per batch of every simulated stage, alone on its cores, with
  // the cores it keeps busy; transfers and collectives are stages of their
  // own that use no core. In pipeline order: read, unique, [disk prefetch],
  // [pull.early], pull, [all-to-all], [host to device], dense (with its all-reduce),
  // [device to host], [all-to-all], push.
  std::vector<SimStage> stages;
  // Where each of the trainer's stages is in it.
  PerStage<int> stage_index;
  double unique_ids = 0.0;  // Distinct ids per batch.
  double disk_rows = 0.0;   // Rows read from the disk tier per batch.
  double disk_writes = 0.0;  // Rows written to the disk tier per batch.
  double hit_rate = 1.0;    // Of the memory tier.
  // Bytes per batch over the host-device link, and sent by a host over the
  // network.
  double pcie_bytes = 0.0;
  double network_bytes = 0.0;
  // A job of ranks: what one rank sends per step, and the seconds of the
  // pull's, push's and dense stage's exchanges (in those stages' times).
  RankExchangeBytes rank_bytes;
  double rank_exchange_seconds = 0.0;
  // Of them, the expert layers' (expert parallelism), and what the dense
  // gradients' all-reduce adds to the dense stage (with buckets, only what
  // the backward does not hide).
  double expert_exchange_seconds = 0.0;
  double dense_all_reduce_seconds = 0.0;
};

// The model's dense step timed on one CPU device (DenseStepTimer): seconds
// per step at each measured thread count and batch size.
struct DenseStepTiming {
  int threads = 1;
  int64_t batch = 256;
  double seconds = 0.0;
};

struct DenseMeasurement {
  // The CPU device (index into ResourceGraph::devices) the points were
  // measured on; -1: no measurement.
  int device = -1;
  std::vector<DenseStepTiming> points;
};

// Factors on the predicted time of the trainer's stages, learnt from
// measured runs (CostModel::Refine), for pipelined and sequential runs.
struct StageScales {
  PerStage<double> pipelined = PerStage<double>::Filled(1.0);
  PerStage<double> sequential = PerStage<double>::Filled(1.0);
};

// A ring of devices for a collective: its order, slowest hop and largest
// latency (GreedyRingOrder, RingBottleneck).
struct Ring {
  std::vector<int> order;
  double gbps = 0.0;
  double latency_us = 0.0;
};

// Thread safety: const methods may be called from one thread at a time
// (RingOf remembers what it computed).
class CostModel {
 public:
  // `graph` is borrowed and must outlive the model, unchanged.
  explicit CostModel(const ResourceGraph* graph, CostModelOptions options = {});

  // latency + bytes / bandwidth.
  static double TransferSeconds(double bytes, double gbps, double latency_us);
  // Ring all-reduce of `bytes` over `ranks`: 2 (n - 1) / n * bytes / bw +
  // 2 (n - 1) * latency; 0 for one rank.
  static double RingAllReduceSeconds(double bytes, int ranks, double gbps, double latency_us);
  // All-to-all where each rank holds `bytes_per_rank` split evenly among the
  // ranks (pairwise exchange): (n - 1) / n * bytes / bw + (n - 1) * latency.
  static double AllToAllSeconds(double bytes_per_rank, int ranks, double gbps, double latency_us);

  // Forward + backward of a dense op at `batch` on `device` with `threads`
  // (CPU): the roofline max(flops / GEMM rate, bytes / memory bandwidth)
  // plus the per-call overhead of each task.
  double DenseOpSeconds(const ProgramOp& op, int64_t batch, int device, int threads) const;
  // The dense stage of one step (every dense op, pooling included, and the
  // dense optimizer's update) by rooflines: the DenseOpSeconds of its ops,
  // the optimizer's bytes at the memory bandwidth and a call overhead per op.
  double DenseRooflineSeconds(const Program& program, int64_t batch, int device, int threads) const;
  // The dense stage of one step. On the device of the dense measurement:
  // the roofline times measured / roofline at the measured points (so the
  // measured time itself at a measured point), that factor interpolated
  // linearly in the batch between measured batches and in the threads
  // between measured thread counts, and taken from the nearest point beyond
  // them. Elsewhere (GPUs, other hosts, no measurement): the roofline.
  // REQUIRES: the measurement was taken of `program`'s model.
  double DenseStageSeconds(const Program& program, int64_t batch, int device, int threads) const;
  // GEMM rate (GFLOP/s) of `threads` threads of CPU `device`, or of GPU `device`.
  double GemmGflops(int device, int threads) const;
  // The rates of `device` with the defaults where unknown.
  DeviceRates RatesOf(int device) const;

  StepCost Estimate(const Program& program, const StepSetup& setup) const;
  // Bytes of one memory-tier row: floats, optimizer state, overhead.
  double RowBytes(const Program& program, int cpu) const;

  // Scales the time of the trainer's stages by measured / predicted (busy
  // seconds per batch of the same configuration); a stage measured or
  // predicted as 0 keeps its factor.
  // Pipelined and sequential runs are refined apart: their stages contend
  // for cores differently.
  void Refine(const PerStage<double>& predicted, const PerStage<double>& measured, bool pipelined);
  const StageScales& stage_scales() const { return scales_; }
  // Points with seconds <= 0 are ignored.
  void set_dense_measurement(DenseMeasurement measurement);
  const DenseMeasurement& dense_measurement() const { return dense_; }
  void set_stage_scales(const StageScales& scales) { scales_ = scales; }
  const CostModelOptions& options() const { return options_; }
  const ResourceGraph& graph() const { return *graph_; }
  // The ring of `devices`, computed once per set of devices.
  const Ring& RingOf(const std::vector<int>& devices) const;

 private:
  const ResourceGraph* graph_;
  CostModelOptions options_;
  StageScales scales_;
  DenseMeasurement dense_;
  mutable std::map<std::vector<int>, Ring> rings_;
};

}  // namespace ember::scheduler
